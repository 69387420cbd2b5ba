"""Packet-rate measurement of the software switch, and of bmv2 on the same traffic when
``simple_switch_grpc`` is installed.

    from softswitch.packet_rate import compare
    result = compare(json_text, p4info_text, frames, writes=[write_request, ...])
    result["softswitch"].pps, result["bmv2"] (None without bmv2), result["ratio"]

``frames`` is a list of (ingress_port, frame); ``writes`` are P4Runtime WriteRequests that program
both targets identically before traffic starts.  Rates count input packets.  bmv2 runs with
``--use-files``: its ports read the whole input from pcap files as fast as it can process them;
its processing time is the span between the first and the last frame it writes out.
"""

from __future__ import annotations

import os
import shutil
import signal
import struct
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc
from google.protobuf import text_format
from p4.v1 import p4runtime_pb2 as pb
from p4.v1 import p4runtime_pb2_grpc

from .dataplane import Dataplane
from .p4runtime_server.device import DeviceManager
from .pcap import PcapWriter
from .switch import V1Switch

Frames = Sequence[tuple[int, bytes]]
BMV2_BINARY = "simple_switch_grpc"


@dataclass
class BenchResult:
    target: str
    packets: int
    seconds: float

    @property
    def pps(self) -> float:
        return self.packets / self.seconds if self.seconds > 0 else 0.0


def _pipeline_request(json_text: str, p4info_text: str) -> pb.SetForwardingPipelineConfigRequest:
    req = pb.SetForwardingPipelineConfigRequest(
        device_id=0, action=pb.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT)
    text_format.Parse(p4info_text, req.config.p4info)
    req.config.p4_device_config = json_text.encode()
    return req


def programmed_switch(json_text: str, p4info_text: str,
                      writes: Sequence[pb.WriteRequest] = ()) -> V1Switch:
    """A switch running the program, programmed through the same P4Runtime code path (without
    gRPC) that serves remote controllers."""
    dataplane = Dataplane()
    manager = DeviceManager(dataplane)
    req = _pipeline_request(json_text, p4info_text)
    manager.set_pipeline(0, req.action, req.config)
    for w in writes:
        errors = [e for e in manager.write(w) if e is not None]
        if errors:
            raise RuntimeError(f"write failed: {errors[0].message}")
    return dataplane.switch


def bench_softswitch(json_text: str, p4info_text: str, frames: Frames,
                     writes: Sequence[pb.WriteRequest] = (), repeat: int = 3) -> BenchResult:
    """Packets per second of ``V1Switch.process`` over one pass of ``frames``, on a freshly
    programmed switch each time; the best of ``repeat`` passes (the state a pass leaves behind
    would change what the next one measures)."""
    best = None
    for _ in range(repeat):
        process = programmed_switch(json_text, p4info_text, writes).process
        start = time.perf_counter()
        for port, frame in frames:
            process(port, frame)
        result = BenchResult("softswitch", len(frames), time.perf_counter() - start)
        if best is None or result.pps > best.pps:
            best = result
    return best


def bench_bmv2(json_text: str, p4info_text: str, frames: Frames,
               writes: Sequence[pb.WriteRequest] = (),
               out_ports: Sequence[int] = tuple(range(16)), wait_seconds: int = 4,
               timeout: float = 120.0) -> BenchResult | None:
    """bmv2's packet rate on the same traffic, or None when simple_switch_grpc is absent.
    ``out_ports`` must include every port the traffic leaves on."""
    binary = shutil.which(BMV2_BINARY)
    if binary is None:
        return None
    ports = sorted({p for p, _ in frames})
    with tempfile.TemporaryDirectory(prefix="softswitch-bench-") as tmp:
        work = Path(tmp)
        writers = {p: PcapWriter(work / f"p{p}_in.pcap") for p in ports}
        for i, (port, frame) in enumerate(frames):
            writers[port].write(frame, timestamp=1.0 + i * 1e-6)
        for w in writers.values():
            w.close()
        out_ports = sorted(set(out_ports) | set(ports))
        for p in out_ports:
            if p not in writers:
                PcapWriter(work / f"p{p}_in.pcap").close()
        sock = work / "grpc.sock"
        cmd = [binary, "--use-files", str(wait_seconds), "--no-p4"]
        for p in out_ports:
            cmd += ["-i", f"{p}@p{p}"]
        cmd += ["--", "--grpc-server-addr", f"unix:{sock}"]
        proc = subprocess.Popen(cmd, cwd=work, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            channel = grpc.insecure_channel(f"unix:{sock}")
            grpc.channel_ready_future(channel).result(timeout=wait_seconds)
            stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)
            stub.SetForwardingPipelineConfig(_pipeline_request(json_text, p4info_text))
            for w in writes:
                stub.Write(w)
            channel.close()
            deadline = time.monotonic() + timeout
            last_total, stable_since = -1, time.monotonic()
            while time.monotonic() < deadline:
                time.sleep(0.5)
                total = sum(_count_frames(work / f"p{p}_out.pcap") for p in out_ports)
                if total != last_total:
                    last_total, stable_since = total, time.monotonic()
                elif total > 0 and time.monotonic() - stable_since > 2.0:
                    break
            stamps = []
            for p in out_ports:
                stamps += _pcap_times(work / f"p{p}_out.pcap")
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    if len(stamps) < 2:
        return BenchResult("bmv2", 0, 0.0)
    stamps.sort()
    return BenchResult("bmv2", len(frames), stamps[-1] - stamps[0])


def _count_frames(path: Path) -> int:
    return len(_pcap_times(path))


def _pcap_times(path: Path) -> list[float]:
    if not path.exists():
        return []
    data = path.read_bytes()
    times, offset = [], 24
    while offset + 16 <= len(data):
        sec, usec, incl, _ = struct.unpack("<IIII", data[offset:offset + 16])
        if offset + 16 + incl > len(data):
            break
        times.append(sec + usec / 1e6)
        offset += 16 + incl
    return times


def compare(json_text: str, p4info_text: str, frames: Frames,
            writes: Sequence[pb.WriteRequest] = (), out_ports: Sequence[int] = tuple(range(16))
            ) -> dict:
    """Both rates on one pass over ``frames`` and their ratio (softswitch / bmv2; None without
    bmv2)."""
    soft = bench_softswitch(json_text, p4info_text, frames, writes)
    bmv2 = bench_bmv2(json_text, p4info_text, frames, writes, out_ports=out_ports)
    ratio = soft.pps / bmv2.pps if bmv2 is not None and bmv2.pps > 0 else None
    return {"softswitch": soft, "bmv2": bmv2, "ratio": ratio}

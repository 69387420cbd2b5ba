"""Packet-rate measurement of the software switch, and of bmv2 on the same traffic when
``simple_switch_grpc`` is installed.

    from softswitch.bench import compare
    result = compare(json_text, p4info_text, frames, writes=[write_request, ...])
    result["softswitch"].pps, result["bmv2"].pps (None without bmv2), result["ratio"]

``frames`` is a list of (ingress_port, frame); ``writes`` are P4Runtime WriteRequests that program
both targets identically before traffic starts.  Rates count input packets.  bmv2 runs with
``--use-files``: its ports read the whole input from pcap files as fast as it can process them;
its processing time is the span between the first and the last frame it writes out.
"""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import struct
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc
from google.protobuf import text_format
from p4.v1 import p4runtime_pb2 as pb
from p4.v1 import p4runtime_pb2_grpc

from .dataplane import Dataplane
from .p4runtime.device import DeviceManager
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


def bench_softswitch(switch: V1Switch, frames: Frames, min_seconds: float = 1.0,
                     setup: Callable[[V1Switch], None] | None = None) -> BenchResult:
    """Packets per second of ``switch.process`` cycling over ``frames`` for ``min_seconds``."""
    if setup is not None:
        setup(switch)
    process = switch.process
    count = 0
    start = time.perf_counter()
    deadline = start + min_seconds
    for port, frame in itertools.cycle(frames):
        process(port, frame)
        count += 1
        if count % 64 == 0 and time.perf_counter() >= deadline:
            break
    return BenchResult("softswitch", count, time.perf_counter() - start)


def bench_bmv2(json_text: str, p4info_text: str, frames: Frames,
               writes: Sequence[pb.WriteRequest] = (), packets: int = 20000,
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
        for i, (port, frame) in zip(range(packets), itertools.cycle(frames), strict=False):
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
    return BenchResult("bmv2", packets, stamps[-1] - stamps[0])


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
            writes: Sequence[pb.WriteRequest] = (), min_seconds: float = 2.0,
            bmv2_packets: int = 20000) -> dict:
    """Both rates and their ratio (softswitch / bmv2; None without bmv2)."""
    switch = programmed_switch(json_text, p4info_text, writes)
    soft = bench_softswitch(switch, frames, min_seconds)
    bmv2 = bench_bmv2(json_text, p4info_text, frames, writes, bmv2_packets)
    ratio = soft.pps / bmv2.pps if bmv2 is not None and bmv2.pps > 0 else None
    return {"softswitch": soft, "bmv2": bmv2, "ratio": ratio}

"""Run bmv2's ``simple_switch_grpc`` over pcap files, to compare the software switch with it
(packet_rate.py, the differential tests).

With ``--use-files`` port N reads ``pN_in.pcap`` and writes ``pN_out.pcap``: no root, no veth
pairs.  bmv2 starts its pcap reader a fixed time (``wait_seconds``) after launch, then feeds every
input frame, in timestamp order across the files and as fast as it can (not in real time), into
its single ingress thread; it is programmed over P4Runtime, on a unix socket, before that.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import grpc
from p4.v1 import p4runtime_pb2 as pb
from p4.v1 import p4runtime_pb2_grpc

from .p4runtime_server import pipeline_request
from .pcap import PcapWriter, read_pcap, read_pcap_records

BMV2_BINARY = "simple_switch_grpc"
WAIT_SECONDS = 3


def bmv2_binary() -> str | None:
    return shutil.which(BMV2_BINARY)


class Bmv2Files:
    """One run of bmv2 on ``trace`` ([(ingress port, frame)]), with ``ports`` (the ports the
    trace enters on are added).  Entering launches and programs it; after the ``with`` block it
    is stopped and ``outputs`` holds each port's [(timestamp, frame)]."""

    def __init__(self, json_text: str, p4info_text: str, trace: Sequence[tuple[int, bytes]],
                 ports: Sequence[int], writes: Sequence[pb.WriteRequest] = (),
                 wait_seconds: int = WAIT_SECONDS):
        self.json_text, self.p4info_text = json_text, p4info_text
        self.trace, self.writes, self.wait_seconds = trace, writes, wait_seconds
        self.ports = sorted(set(ports) | {p for p, _ in trace})
        self.outputs: dict[int, list[tuple[float, bytes]]] = {}
        self.work: Path | None = None
        self.proc: subprocess.Popen | None = None
        self.channel: grpc.Channel | None = None

    def __enter__(self) -> Bmv2Files:
        binary = bmv2_binary()
        if binary is None:
            raise FileNotFoundError(f"{BMV2_BINARY} is not installed")
        self.work = Path(tempfile.mkdtemp(prefix="bmv2-"))  # short: unix socket paths are limited
        try:
            self._start(binary)
        except BaseException:
            self._stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self._stop(collect=True)

    def _out(self, port: int) -> Path:
        return self.work / f"p{port}_out.pcap"

    def _start(self, binary: str) -> None:
        writers = {p: PcapWriter(self.work / f"p{p}_in.pcap") for p in self.ports}
        for i, (port, frame) in enumerate(self.trace):
            writers[port].write(frame, timestamp=1000.0 + i * 1e-3)
        for w in writers.values():
            w.close()
        sock = self.work / "grpc.sock"
        cmd = [binary, "--use-files", str(self.wait_seconds), "--no-p4", "--device-id", "0"]
        for p in self.ports:
            cmd += ["-i", f"{p}@p{p}"]
        cmd += ["--", "--grpc-server-addr", f"unix:{sock}"]
        started = time.monotonic()
        self.proc = subprocess.Popen(cmd, cwd=self.work, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, start_new_session=True)
        self.channel = grpc.insecure_channel(f"unix:{sock}")
        grpc.channel_ready_future(self.channel).result(timeout=self.wait_seconds)
        self.stub = p4runtime_pb2_grpc.P4RuntimeStub(self.channel)
        self.stub.SetForwardingPipelineConfig(pipeline_request(self.json_text, self.p4info_text))
        for w in self.writes:
            self.stub.Write(w)
        if time.monotonic() - started > self.wait_seconds - 0.5:
            raise TimeoutError("bmv2 was not programmed before its pcap reader started")

    def _stop(self, collect: bool = False) -> None:
        if self.channel is not None:
            self.channel.close()
        if self.proc is not None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        if collect:
            self.outputs = {p: read_pcap_records(self._out(p)) for p in self.ports}
        shutil.rmtree(self.work, ignore_errors=True)

    def wait_for_output(self, expected: int = 1, settle: float = 0.5,
                        timeout: float = 30.0) -> None:
        """Return once at least ``expected`` frames came out and no more for ``settle`` seconds,
        or after ``timeout``."""
        deadline = time.monotonic() + timeout
        last, stable_since = None, time.monotonic()
        while time.monotonic() < deadline:
            time.sleep(settle / 5)
            counts = tuple(len(read_pcap(self._out(p))) for p in self.ports)
            if counts != last:
                last, stable_since = counts, time.monotonic()
            elif sum(counts) >= expected and time.monotonic() - stable_since >= settle:
                return

    def read(self, entities: Sequence[pb.Entity]) -> list[pb.Entity]:
        out = []
        for resp in self.stub.Read(pb.ReadRequest(device_id=0, entities=entities)):
            out.extend(resp.entities)
        return out

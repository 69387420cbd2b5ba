"""Run the same program, P4Runtime writes and packet trace through the software switch and through
bmv2's simple_switch_grpc, and collect what each target sends out of every port.

bmv2 runs with ``--use-files``: port N reads ``pN_in.pcap`` and writes ``pN_out.pcap`` (no root,
no veth pairs needed).  Its pcap reader starts a fixed time after launch and then feeds every
frame in timestamp order into the single ingress thread, so the trace is processed in order; the
harness programs bmv2 over P4Runtime (on a unix socket) before that.  Egress runs one thread per
port group, so only the per-port output sequences are compared, as bmv2 defines no order across
ports."""

from __future__ import annotations

import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import grpc
from google.protobuf import text_format
from p4.v1 import p4runtime_pb2 as pb
from p4.v1 import p4runtime_pb2_grpc

from softswitch.dataplane import Dataplane
from softswitch.p4runtime_server.device import DeviceManager
from softswitch.pcap import PcapWriter, read_pcap

WAIT_SECONDS = 3  # bmv2 starts reading its input pcaps this long after launch

Outputs = dict[int, list[bytes]]


def pipeline_request(json_text: str, p4info_text: str) -> pb.SetForwardingPipelineConfigRequest:
    req = pb.SetForwardingPipelineConfigRequest(
        device_id=0, action=pb.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT)
    text_format.Parse(p4info_text, req.config.p4info)
    req.config.p4_device_config = json_text.encode()
    return req


def write_request(updates: Sequence[pb.Update]) -> pb.WriteRequest:
    return pb.WriteRequest(device_id=0, updates=updates)


def run_softswitch(json_text: str, p4info_text: str, writes: Sequence[pb.Update],
                   trace: Sequence[tuple[int, bytes]], ports: Sequence[int],
                   reads: Sequence[pb.Entity] = ()) -> tuple[Outputs, list[pb.Entity]]:
    dataplane = Dataplane()
    manager = DeviceManager(dataplane)
    req = pipeline_request(json_text, p4info_text)
    manager.set_pipeline(0, req.action, req.config)
    if writes:
        results = manager.write(write_request(writes))
        assert all(r is None for r in results), [r.message for r in results if r]
    outputs: Outputs = {p: [] for p in ports}
    dataplane.set_transmit(lambda port, frame: outputs[port].append(frame)
                           if port in outputs else None)
    for port, frame in trace:
        dataplane.receive(port, frame)
    entities, error = manager.read(pb.ReadRequest(device_id=0, entities=reads))
    assert error is None, error
    return outputs, entities


def run_bmv2(json_text: str, p4info_text: str, writes: Sequence[pb.Update],
             trace: Sequence[tuple[int, bytes]], ports: Sequence[int],
             reads: Sequence[pb.Entity] = (), expected: int = 1, settle: float = 0.5,
             timeout: float = 30.0) -> tuple[Outputs, list[pb.Entity]]:
    """bmv2's outputs once at least ``expected`` frames came out and nothing more for
    ``settle`` seconds (or ``timeout`` passed)."""
    binary = shutil.which("simple_switch_grpc")
    assert binary is not None
    work = Path(tempfile.mkdtemp(prefix="ssdiff"))  # short: unix socket paths are limited
    try:
        writers = {p: PcapWriter(work / f"p{p}_in.pcap") for p in ports}
        for i, (port, frame) in enumerate(trace):
            writers[port].write(frame, timestamp=1000.0 + i * 1e-3)
        for w in writers.values():
            w.close()
        sock = work / "grpc.sock"
        cmd = [binary, "--use-files", str(WAIT_SECONDS), "--no-p4", "--device-id", "0"]
        for p in ports:
            cmd += ["-i", f"{p}@p{p}"]
        cmd += ["--", "--grpc-server-addr", f"unix:{sock}"]
        started = time.monotonic()
        proc = subprocess.Popen(cmd, cwd=work, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            channel = grpc.insecure_channel(f"unix:{sock}")
            grpc.channel_ready_future(channel).result(timeout=WAIT_SECONDS)
            stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)
            stub.SetForwardingPipelineConfig(pipeline_request(json_text, p4info_text))
            if writes:
                stub.Write(write_request(writes))
            if time.monotonic() - started > WAIT_SECONDS - 0.5:
                raise TimeoutError("bmv2 was not programmed before its pcap reader started")
            deadline = time.monotonic() + timeout
            last, stable_since = None, time.monotonic()
            while time.monotonic() < deadline:
                time.sleep(0.1)
                counts = tuple(len(read_pcap(work / f"p{p}_out.pcap")) for p in ports)
                if counts != last:
                    last, stable_since = counts, time.monotonic()
                elif sum(counts) >= expected and time.monotonic() - stable_since >= settle:
                    break
            entities = []
            if reads:
                for resp in stub.Read(pb.ReadRequest(device_id=0, entities=reads)):
                    entities.extend(resp.entities)
            channel.close()
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        outputs = {p: read_pcap(work / f"p{p}_out.pcap") for p in ports}
        return outputs, entities
    finally:
        shutil.rmtree(work, ignore_errors=True)

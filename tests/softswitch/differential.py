"""Run the same program, P4Runtime writes and packet trace through the software switch and through
bmv2's simple_switch_grpc (softswitch.bmv2_files), and collect what each target sends out of every
port.  bmv2's egress runs one thread per port group, so only the per-port output sequences
compare: bmv2 defines no order across ports."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from p4.v1 import p4runtime_pb2 as pb

from softswitch.bmv2_files import Bmv2Files, bmv2_binary
from softswitch.dataplane import Dataplane
from softswitch.p4runtime_server import programmed_device

Outputs = dict[int, list[bytes]]

requires_bmv2 = pytest.mark.skipif(bmv2_binary() is None,
                                   reason="simple_switch_grpc is not installed")


def run_softswitch(json_text: str, p4info_text: str, writes: Sequence[pb.WriteRequest],
                   trace: Sequence[tuple[int, bytes]], ports: Sequence[int],
                   reads: Sequence[pb.Entity] = ()) -> tuple[Outputs, list[pb.Entity]]:
    device = programmed_device(Dataplane(), json_text, p4info_text, writes)
    outputs: Outputs = {p: [] for p in ports}
    device.dataplane.set_transmit(lambda port, frame: outputs[port].append(frame)
                                  if port in outputs else None)
    for port, frame in trace:
        device.dataplane.receive(port, frame)
    entities, error = device.read(pb.ReadRequest(device_id=0, entities=reads))
    assert error is None, error
    return outputs, entities


def run_bmv2(json_text: str, p4info_text: str, writes: Sequence[pb.WriteRequest],
             trace: Sequence[tuple[int, bytes]], ports: Sequence[int],
             reads: Sequence[pb.Entity] = (), expected: int = 1, settle: float = 0.5,
             timeout: float = 30.0) -> tuple[Outputs, list[pb.Entity]]:
    """bmv2's outputs once at least ``expected`` frames came out and nothing more for
    ``settle`` seconds (or ``timeout`` passed)."""
    with Bmv2Files(json_text, p4info_text, trace, ports, writes) as bmv2:
        bmv2.wait_for_output(expected, settle, timeout)
        entities = bmv2.read(reads) if reads else []
    return {p: [frame for _, frame in bmv2.outputs[p]] for p in ports}, entities

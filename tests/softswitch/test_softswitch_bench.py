"""The benchmark helpers: a switch programmed through the P4Runtime code path, measured."""

from __future__ import annotations

import pytest
from p4.v1 import p4runtime_pb2 as pb
from softswitch_fixtures import p4info_text, program_json
from test_softswitch_p4runtime import P4Info, exact_entry, key_frame

from softswitch.bench import bench_softswitch, programmed_switch


def test_programmed_switch_and_rate():
    info = P4Info("tables")
    write = pb.WriteRequest(device_id=0)
    u = write.updates.add(type=pb.Update.INSERT)
    u.entity.table_entry.CopyFrom(exact_entry(info, 1, 2, 3, 4))
    sw = programmed_switch(program_json("tables"), p4info_text("tables"), [write])
    assert sw.process(0, key_frame(addr=1, port=2))[0][0] == 4
    result = bench_softswitch(sw, [(0, key_frame(addr=1, port=2)), (0, key_frame())],
                              min_seconds=0.2)
    assert result.packets >= 64 and result.seconds >= 0.2 and result.pps > 0
    assert sw.tables["IngressImpl.t_exact"].counter(0)[0] >= result.packets // 2


def test_failed_write_is_reported():
    info = P4Info("tables")
    write = pb.WriteRequest(device_id=0)
    for _ in range(2):
        write.updates.add(type=pb.Update.INSERT).entity.table_entry.CopyFrom(
            exact_entry(info, 1, 2, 3, 4))
    with pytest.raises(RuntimeError, match="Match entry exists"):
        programmed_switch(program_json("tables"), p4info_text("tables"), [write])

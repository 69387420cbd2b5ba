"""softswitch.packet_rate, and the device it measures: programmed through the P4Runtime code path
(softswitch.p4runtime_server.programmed_device)."""

from __future__ import annotations

import pytest
from p4.v1 import p4runtime_pb2 as pb

from softswitch.dataplane import Dataplane
from softswitch.p4runtime_server import programmed_device, write_request
from softswitch.packet_rate import bench_bmv2, bench_softswitch, compare
from tests.softswitch.differential import requires_bmv2
from tests.softswitch.frames import key_frame
from tests.softswitch.p4info import P4Info, exact_entry
from tests.softswitch.programs import p4info_text, program_json


def _insert() -> pb.Update:
    return pb.Update(type=pb.Update.INSERT,
                     entity=pb.Entity(table_entry=exact_entry(P4Info("tables"), 1, 2, 3, 4)))


def _insert_write() -> pb.WriteRequest:
    return write_request([_insert()])


def test_programmed_device_forwards_with_written_entry():
    sw = programmed_device(Dataplane(), program_json("tables"), p4info_text("tables"),
                           [_insert_write()]).switch
    assert sw.process(0, key_frame(addr=1, port=2))[0][0] == 4
    assert sw.tables["IngressImpl.t_exact"].counter(0) == (1, len(key_frame()))


def test_bench_softswitch_counts_one_pass():
    frames = [(0, key_frame(addr=1, port=2)), (0, key_frame())] * 50
    result = bench_softswitch(program_json("tables"), p4info_text("tables"), frames,
                              [_insert_write()], repeat=2)
    assert result.target == "softswitch"
    assert result.packets == 100 and result.seconds > 0
    assert result.pps == pytest.approx(100 / result.seconds)


def test_failed_write_is_reported():
    with pytest.raises(RuntimeError, match="Match entry exists"):
        programmed_device(Dataplane(), program_json("tables"), p4info_text("tables"),
                          [write_request([_insert(), _insert()])])


@requires_bmv2
@pytest.mark.bmv2
def test_compare_with_bmv2():
    frames = [(0, key_frame(addr=1, port=2))] * 20
    result = compare(program_json("tables"), p4info_text("tables"), frames, [_insert_write()],
                     out_ports=[0, 4])
    assert result["bmv2"].packets == 20 and result["bmv2"].seconds > 0
    assert result["ratio"] == pytest.approx(result["softswitch"].pps / result["bmv2"].pps)


def test_bench_bmv2_without_binary_is_none(monkeypatch):
    monkeypatch.setattr("softswitch.bmv2_files.shutil.which", lambda name: None)
    assert bench_bmv2(program_json("tables"), p4info_text("tables"), []) is None

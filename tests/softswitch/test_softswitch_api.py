"""The control API of V1Switch beyond tables: PRE, whole-switch reset, thread safety."""

from __future__ import annotations

import threading

import pytest

from softswitch import StateError
from tests.softswitch.frames import replication_frame
from tests.softswitch.programs import switch


def test_pre_groups_and_sessions_read_back():
    sw = switch("replication")
    sw.pre.set_group(5, [(3, 2), (1, 1)])
    assert sw.pre.group(5) == [(1, 1), (3, 2)]
    assert sw.pre.groups() == {5: [(1, 1), (3, 2)]}
    sw.pre.set_clone_session(4, egress_port=9, mgid=5)
    assert sw.pre.clone_session(4).egress_port == 9
    assert set(sw.pre.clone_sessions()) == {4}
    with pytest.raises(StateError):
        sw.pre.set_group(6, [(1, 1), (1, 1)])
    with pytest.raises(StateError):
        sw.pre.set_clone_session(1 << 15, egress_port=1)
    sw.pre.delete_group(5)
    sw.pre.delete_clone_session(4)
    assert sw.pre.group(5) is None and sw.pre.clone_session(4) is None
    with pytest.raises(StateError):
        sw.pre.delete_group(5)


def test_reset_state_clears_everything():
    sw = switch("stateful")
    sw.registers["IngressImpl.seen"].write(0, 7)
    sw.counters["IngressImpl.op_counter"].write(1, 2, 3)
    sw.pre.set_group(1, [(1, 1)])
    tables = switch("tables")
    t = tables.tables["IngressImpl.t_exact"]
    h = t.add([1, 1], "IngressImpl.exact_miss", [1])
    t.set_counter(h, 5, 5)
    t.set_default("IngressImpl.exact_miss", [3])
    sw.reset_state()
    tables.reset_state()
    assert sw.registers["IngressImpl.seen"].read(0) == 0
    assert sw.counters["IngressImpl.op_counter"].read(1) == (0, 0)
    assert sw.pre.groups() == {}
    assert len(t) == 0 and t.default_entry.params == {"v": 0xEE}
    assert len(tables.tables["IngressImpl.t_const"]) == 4  # const entries stay


def test_control_operations_during_traffic_are_serialized():
    sw = switch("replication")
    stop = threading.Event()
    errors = []

    def traffic():
        try:
            while not stop.is_set():
                sw.process(2, replication_frame(1))
        except Exception as exc:  # reported by the assertion below
            errors.append(exc)

    thread = threading.Thread(target=traffic)
    thread.start()
    for i in range(300):
        sw.pre.set_group(5, [(1 + i % 3, i % 7)])
    stop.set()
    thread.join()
    assert errors == []
    assert sw.pre.group(5) == [(1 + 299 % 3, 299 % 7)]

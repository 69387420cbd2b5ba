"""Match-action tables on tests/p4programs/tables.p4, through the control API of V1Switch."""

from __future__ import annotations

import struct

import pytest

from softswitch import TableError
from tests.softswitch.programs import switch

ETH = bytes.fromhex("02000000000202000000000188b6")
RESULT_FMT = "!BBBBBBBBBBH"
NAMES = ("exact_v", "lpm_v", "tern_v", "range_v", "opt_v", "const_v", "hitmiss", "sw", "ifpath",
         "reserved", "param")


def frame(addr=0, port=0, proto=0, flags=0, tag=0) -> bytes:
    return ETH + struct.pack("!IHBBH", addr, port, proto, flags, tag) + bytes(12)


def run(sw, **key) -> tuple[int, dict]:
    out = sw.process(1, frame(**key))
    assert len(out) == 1
    values = struct.unpack(RESULT_FMT, out[0][1][24:36])
    return out[0][0], dict(zip(NAMES, values, strict=True))


@pytest.fixture
def sw():
    return switch("tables")


def ip(text: str) -> int:
    return int.from_bytes(bytes(int(x) for x in text.split(".")), "big")


def test_exact_hit_miss_default_and_direct_counter(sw):
    t = sw.tables["IngressImpl.t_exact"]
    h = t.add({"hdr.key.addr": ip("10.0.0.1"), "hdr.key.port": 80}, "IngressImpl.set_exact",
              {"v": 7, "port": 3})
    port, r = run(sw, addr=ip("10.0.0.1"), port=80)
    assert (port, r["exact_v"]) == (3, 7)
    port, r = run(sw, addr=ip("10.0.0.1"), port=81)
    assert (port, r["exact_v"]) == (0, 0xEE)
    assert t.counter(h) == (1, len(frame()))
    assert sw.counters["IngressImpl.exact_counter"].read(h) == (1, len(frame()))
    assert t.counter(None) == (0, 0)  # misses are not counted
    t.set_default("IngressImpl.exact_miss", {"v": 0x55})
    assert run(sw, port=1)[1]["exact_v"] == 0x55
    t.reset_default()
    assert run(sw, port=1)[1]["exact_v"] == 0xEE
    t.modify(h, "IngressImpl.exact_miss", [9])
    assert run(sw, addr=ip("10.0.0.1"), port=80)[1]["exact_v"] == 9
    t.delete({"hdr.key.addr": ip("10.0.0.1"), "hdr.key.port": 80})
    assert run(sw, addr=ip("10.0.0.1"), port=80)[1]["exact_v"] == 0xEE


def test_lpm_longest_prefix_wins_and_exact_part_must_match(sw):
    t = sw.tables["IngressImpl.t_lpm"]
    t.add([6, (ip("10.0.0.0"), 8)], "IngressImpl.set_lpm", [1])
    t.add([6, (ip("10.1.0.0"), 16)], "IngressImpl.set_lpm", [2])
    t.add([6, (ip("10.1.2.0"), 24)], "IngressImpl.set_lpm", [3])
    t.add([17, (ip("10.0.0.0"), 8)], "IngressImpl.set_lpm", [4])
    t.add([17, None], "IngressImpl.set_lpm", [5])  # /0: everything for proto 17
    cases = {("10.9.9.9", 6): 1, ("10.1.9.9", 6): 2, ("10.1.2.3", 6): 3, ("10.1.2.3", 17): 4,
             ("11.0.0.1", 6): 0, ("11.0.0.1", 17): 5}
    for (addr, proto), expected in cases.items():
        assert run(sw, addr=ip(addr), proto=proto)[1]["lpm_v"] == expected, (addr, proto)


def test_ternary_priorities_and_ties(sw):
    t = sw.tables["IngressImpl.t_ternary"]
    t.add([(ip("10.0.0.0"), 0xFF000000), None], "IngressImpl.set_tern", [1], priority=10)
    t.add([None, (0x01, 0x01)], "IngressImpl.set_tern", [2], priority=20)
    assert run(sw, addr=ip("10.2.3.4"), flags=0)[1]["tern_v"] == 1
    assert run(sw, addr=ip("10.2.3.4"), flags=3)[1]["tern_v"] == 2
    assert run(sw, addr=ip("11.0.0.0"), flags=0)[1]["tern_v"] == 0xDD
    # Same priority: the entry with the smaller handle wins.
    t.add([None, (0x02, 0x02)], "IngressImpl.set_tern", [3], priority=20)
    assert run(sw, addr=0, flags=3)[1]["tern_v"] == 2
    with pytest.raises(TableError) as exc:
        t.add([None, (0x01, 0x01)], "IngressImpl.set_tern", [9], priority=20)
    assert exc.value.code == "DUPLICATE_ENTRY"
    # The same key with another priority is a different entry.
    t.add([None, (0x01, 0x01)], "IngressImpl.set_tern", [4], priority=30)
    assert run(sw, addr=0, flags=3)[1]["tern_v"] == 4


def test_range_with_exact_and_priorities(sw):
    t = sw.tables["IngressImpl.t_range"]
    t.add([(1000, 2000), 6], "IngressImpl.set_range", [1], priority=1)
    t.add([(1500, 1600), 6], "IngressImpl.set_range", [2], priority=5)
    t.add([None, 17], "IngressImpl.set_range", [3], priority=1)
    assert run(sw, port=1000, proto=6)[1]["range_v"] == 1
    assert run(sw, port=1550, proto=6)[1]["range_v"] == 2
    assert run(sw, port=2001, proto=6)[1]["range_v"] == 0
    assert run(sw, port=65535, proto=17)[1]["range_v"] == 3


def test_optional_fields(sw):
    t = sw.tables["IngressImpl.t_optional"]
    t.add({"hdr.key.proto": 6}, "IngressImpl.set_opt", [1], priority=1)
    t.add({"hdr.key.flags": 3}, "IngressImpl.set_opt", [2], priority=2)
    assert run(sw, proto=6, flags=0)[1]["opt_v"] == 1
    assert run(sw, proto=6, flags=3)[1]["opt_v"] == 2
    assert run(sw, proto=1, flags=3)[1]["opt_v"] == 2
    assert run(sw, proto=1, flags=0)[1]["opt_v"] == 0


def test_const_entries_in_program_order_and_const_default(sw):
    cases = {(0x11, 50): 1, (0x21, 500): 2, (0x00, 55): 3, (0xFF, 1500): 4, (0xFF, 3000): 0x99}
    for (flags, tag), expected in cases.items():
        assert run(sw, flags=flags, tag=tag)[1]["const_v"] == expected, (flags, tag)
    t = sw.tables["IngressImpl.t_const"]
    assert len(t) == 4 and all(e.is_const for e in t)
    with pytest.raises(TableError) as exc:
        t.add([(1, 1), (0, 1)], "IngressImpl.set_const", [5], priority=1)
    assert exc.value.code == "IMMUTABLE_TABLE_ENTRIES"
    with pytest.raises(TableError) as exc:
        t.set_default("IngressImpl.set_const", [1])
    assert exc.value.code == "DEFAULT_ENTRY_IS_CONST"
    first = t.entries()[0]
    assert first.priority > t.entries()[1].priority


def test_hit_miss_branches(sw):
    t = sw.tables["IngressImpl.t_hitmiss"]
    t.add([42], "IngressImpl.set_hm", [5])
    assert run(sw, tag=42)[1]["hitmiss"] == 0x85
    assert run(sw, tag=43)[1]["hitmiss"] == 0x0F


def test_switch_on_action_run_and_if_inside_action(sw):
    t = sw.tables["IngressImpl.t_switch"]
    t.add([1], "IngressImpl.a1")
    t.add([2], "IngressImpl.a2", {"p": 0x1234})
    r = run(sw, proto=1, flags=0x20)[1]
    assert (r["sw"], r["reserved"], r["ifpath"], r["param"]) == (1, 0xA1, 1, 1)
    r = run(sw, proto=2, flags=0x10)[1]
    assert (r["sw"], r["reserved"], r["ifpath"], r["param"]) == (2, 0xA2, 2, 0x1235)
    r = run(sw, proto=3, flags=0x0F)[1]
    assert (r["sw"], r["reserved"], r["ifpath"]) == (0, 0xFE, 3)
    sw.tables["IngressImpl.t_if"].set_default("IngressImpl.with_if", {"threshold": 0x80})
    assert run(sw, proto=3, flags=0x20)[1]["ifpath"] == 3


def test_invalid_operations_are_refused_with_bmv2_error_codes(sw):
    t = sw.tables["IngressImpl.t_exact"]
    key = {"hdr.key.addr": 1, "hdr.key.port": 2}
    t.add(key, "IngressImpl.set_exact", {"v": 1, "port": 1})
    bad = [
        (lambda: t.add(key, "IngressImpl.set_exact", {"v": 1, "port": 1}), "DUPLICATE_ENTRY"),
        (lambda: t.add({"hdr.key.addr": 1 << 32, "hdr.key.port": 2}, "IngressImpl.set_exact",
                       {"v": 1, "port": 1}), "BAD_MATCH_KEY"),
        (lambda: t.add({"hdr.key.addr": 1}, "IngressImpl.set_exact", {"v": 1, "port": 1}),
         "BAD_MATCH_KEY"),
        (lambda: t.add({"hdr.key.addr": 5, "hdr.key.port": 2}, "IngressImpl.set_lpm", [1]),
         "INVALID_ACTION_NAME"),
        (lambda: t.add({"hdr.key.addr": 5, "hdr.key.port": 2}, "IngressImpl.set_exact",
                       {"v": 256, "port": 1}), "BAD_ACTION_DATA"),
        (lambda: t.add({"hdr.key.addr": 5, "hdr.key.port": 2}, "IngressImpl.set_exact",
                       {"v": 1}), "BAD_ACTION_DATA"),
        (lambda: t.add({"hdr.key.addr": 5, "hdr.key.port": 2}, "IngressImpl.set_exact",
                       {"v": 1, "port": 1}, priority=3), "BAD_MATCH_KEY"),
        (lambda: t.delete(99), "INVALID_HANDLE"),
        (lambda: sw.tables["IngressImpl.t_ternary"].add([None, None], "IngressImpl.set_tern",
                                                        [1]), "BAD_MATCH_KEY"),
        (lambda: sw.tables["IngressImpl.t_lpm"].add([6, (ip("10.1.0.0"), 8)],
                                                    "IngressImpl.set_lpm", [1]),
         "BAD_MATCH_KEY"),
        (lambda: sw.tables["IngressImpl.t_if"].add([], "IngressImpl.with_if", [1]),
         "NO_TABLE_KEY"),
    ]
    for call, code in bad:
        with pytest.raises(TableError) as exc:
            call()
        assert exc.value.code == code


def test_table_capacity_and_handle_reuse(sw):
    t = sw.tables["IngressImpl.t_exact"]
    handles = [t.add([i, 0], "IngressImpl.exact_miss", [i % 256]) for i in range(64)]
    assert handles == list(range(64))
    with pytest.raises(TableError) as exc:
        t.add([64, 0], "IngressImpl.exact_miss", [0])
    assert exc.value.code == "TABLE_FULL"
    t.delete(handles[10])
    t.delete(handles[3])
    assert t.add([100, 0], "IngressImpl.exact_miss", [0]) == 3
    assert t.add([101, 0], "IngressImpl.exact_miss", [0]) == 10
    listed = {e.handle: e for e in t.entries()}
    assert listed[3].match == {"hdr.key.addr": 100, "hdr.key.port": 0}
    assert listed[5].params == {"v": 5} and listed[5].action == "IngressImpl.exact_miss"


def test_non_key_frames_are_dropped(sw):
    assert sw.process(1, bytes.fromhex("020000000002020000000001") + b"\x08\x00" + b"x" * 40) \
        == []

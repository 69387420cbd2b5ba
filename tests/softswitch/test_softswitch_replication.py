"""Packet replication and re-injection on tests/p4programs/replication.p4: multicast, clones,
resubmit, recirculate, drop, exit, packet_length bookkeeping. Expected values follow
simple_switch's documented instance_type values and metadata preservation rules."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from tests.softswitch.frames import REP_FMT, REPLICATION_ETH, replication_frame
from tests.softswitch.programs import switch

NORMAL, INGRESS_CLONE, EGRESS_CLONE, RECIRC, REPLICATION, RESUBMIT = 0, 1, 2, 4, 5, 6
REP_LEN = struct.calcsize(REP_FMT)


@dataclass
class Rep:
    mode: int
    in_instance: int
    eg_instance: int
    carry: int
    rid: int
    in_port: int
    passes: int
    marker: int
    in_len: int
    eg_len: int


def rep(data: bytes) -> Rep:
    return Rep(*struct.unpack(REP_FMT, data[14:14 + REP_LEN]))


def test_multicast_replicas_carry_rid_and_replication_instance_type():
    sw = switch("replication")
    sw.pre.set_group(5, [(3, 20), (1, 10), (2, 10)])
    f = replication_frame(1)
    out = sw.process(7, f)
    assert [p for p, _ in out] == [1, 2, 3]  # nodes by rid, ports ascending
    reps = [rep(d) for _, d in out]
    assert [r.rid for r in reps] == [10, 10, 20]
    assert {(r.in_instance, r.eg_instance, r.in_port, r.marker) for r in reps} == \
        {(NORMAL, REPLICATION, 7, 0x11)}
    assert {r.eg_len for r in reps} == {len(f)}


def test_multicast_to_unknown_group_sends_nothing():
    assert switch("replication").process(7, replication_frame(1)) == []


def test_ingress_clone_is_the_received_packet_with_metadata_reset():
    sw = switch("replication")
    sw.pre.set_clone_session(7, egress_port=9)
    f = replication_frame(2)
    out = sw.process(4, f)
    assert [p for p, _ in out] == [9, 1]
    clone, original = rep(out[0][1]), rep(out[1][1])
    # The clone is the frame as received (ingress changes are not in it), re-parsed.
    assert (clone.in_instance, clone.marker, clone.eg_instance) == (0, 0, INGRESS_CLONE)
    assert clone.carry == 0  # clone() preserves no metadata
    assert (original.marker, original.eg_instance, original.in_port) == (0x11, NORMAL, 4)


def test_ingress_clone_preserving_a_field_list():
    sw = switch("replication")
    sw.pre.set_clone_session(7, egress_port=9)
    out = sw.process(4, replication_frame(8))
    assert [p for p, _ in out] == [9, 1]
    assert rep(out[0][1]).carry == 0xCD
    assert rep(out[1][1]).carry == 0xCD


def test_clone_without_a_session_only_forwards_the_original():
    out = switch("replication").process(4, replication_frame(2))
    assert [p for p, _ in out] == [1]


def test_clone_to_a_multicast_group():
    sw = switch("replication")
    sw.pre.set_group(30, [(5, 1), (6, 2)])
    sw.pre.set_clone_session(7, mgid=30)
    out = sw.process(4, replication_frame(2))
    assert [p for p, _ in out] == [5, 6, 1]
    assert [(rep(d).eg_instance, rep(d).rid) for _, d in out] == \
        [(INGRESS_CLONE, 1), (INGRESS_CLONE, 2), (NORMAL, 0)]


def test_resubmit_restarts_ingress_with_preserved_fields_only():
    f = replication_frame(3)
    out = switch("replication").process(6, f)
    assert len(out) == 1 and out[0][0] == 1
    r = rep(out[0][1])
    assert (r.passes, r.carry) == (2, 0x5A)
    assert r.in_instance == RESUBMIT
    assert r.in_port == 0  # standard metadata is not preserved across resubmit
    assert (r.in_len, r.eg_len) == (len(f), len(f))
    assert r.eg_instance == NORMAL


def test_recirculate_reenters_ingress_with_the_deparsed_packet():
    f = replication_frame(4)
    out = switch("replication").process(6, f)
    assert len(out) == 1 and out[0][0] == 3
    r = rep(out[0][1])
    assert r.in_instance == RECIRC
    assert r.passes == 1
    assert r.in_port == 0
    assert r.in_len == len(f)
    assert r.eg_instance == NORMAL


def test_mark_to_drop_also_cancels_multicast():
    sw = switch("replication")
    sw.pre.set_group(5, [(1, 1)])
    assert sw.process(2, replication_frame(5)) == []


def test_exit_stops_ingress_but_not_egress():
    out = switch("replication").process(2, replication_frame(6))
    assert len(out) == 1 and out[0][0] == 2
    r = rep(out[0][1])
    assert r.marker == 0  # set after the exit
    assert r.in_port == 2 and r.eg_instance == NORMAL


def test_egress_clone_carries_egress_changes_and_goes_through_egress_again():
    sw = switch("replication")
    sw.pre.set_clone_session(8, egress_port=10)
    out = sw.process(2, replication_frame(7))
    assert [p for p, _ in out] == [2, 10]
    original, clone = rep(out[0][1]), rep(out[1][1])
    assert (original.marker, original.eg_instance) == (0x22, NORMAL)
    assert (clone.marker, clone.eg_instance, clone.carry) == (0x22, EGRESS_CLONE, 0xEE)


def test_set_invalid_shrinks_packet_length_seen_by_egress():
    f = replication_frame(9, extra=b"\xde\xad\xbe\xef")
    out = switch("replication").process(2, f)
    assert len(out) == 1 and out[0][0] == 4
    r = rep(out[0][1])
    assert (r.in_len, r.eg_len) == (len(f), len(f) - 4)
    assert out[0][1] == REPLICATION_ETH + out[0][1][14:14 + REP_LEN] + b"payload"


def test_to_cpu_port_prepends_packet_in_header():
    out = switch("replication").process(3, replication_frame(10))
    assert len(out) == 1 and out[0][0] == 64
    data = out[0][1]
    assert data[:3] == bytes([3 >> 1, (3 & 1) << 7, 0x2A])
    assert data[3:17] == REPLICATION_ETH


def test_packet_out_from_cpu_port_is_forwarded_by_its_header():
    packet_out = bytes([5 >> 1, (5 & 1) << 7, 0x99])
    out = switch("replication").process(64, packet_out + replication_frame(0))
    assert len(out) == 1 and out[0][0] == 5
    assert out[0][1][:14] == REPLICATION_ETH
    assert rep(out[0][1]).carry == 0x99

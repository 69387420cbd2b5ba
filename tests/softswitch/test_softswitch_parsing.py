"""Parser, checksum and deparser semantics on tests/p4programs/parsing.p4.

Expected frames are built with scapy, whose IPv4 and UDP checksums are computed independently of
the switch."""

from __future__ import annotations

import struct

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from tests.softswitch.frames import ETH_ADDRS, probe, udp_packet
from tests.softswitch.programs import switch

ERR_NONE, ERR_TOO_SHORT, ERR_BAD_VERSION, ERR_BAD_TAG = 0, 1, 2, 3


def report(error: int, checksum_error: int, peek: int, path: int) -> bytes:
    return struct.pack("!BBHB", error, checksum_error, peek, path)


def run(frame: bytes) -> list[tuple[int, bytes]]:
    return switch("parsing").process(1, frame)


def test_ipv4_udp_ttl_and_both_checksums_are_recomputed():
    frame = bytes(Ether(**ETH_ADDRS) / udp_packet(ttl=64))
    out = run(frame)
    expected = report(ERR_NONE, 0, 0, 1) + bytes(Ether(**ETH_ADDRS) / udp_packet(ttl=63))
    assert out == [(2, expected)]


def test_wrong_ipv4_checksum_sets_checksum_error_and_is_fixed_on_the_way_out():
    pkt = Ether(**ETH_ADDRS) / IP(bytes(udp_packet()))
    pkt[IP].chksum ^= 0x1111
    out = run(bytes(pkt))
    assert out[0][1][:5] == report(ERR_NONE, 1, 0, 1)
    assert out[0][1][5:] == bytes(Ether(**ETH_ADDRS) / udp_packet(ttl=63))


def test_verify_failure_keeps_extracted_header_and_stops_parsing():
    ip6 = IP(bytes(IP(version=6, src="10.0.0.1", dst="10.0.0.2", proto=17, ttl=9)))
    body = bytes(UDP(sport=1, dport=2) / Raw(b"xyz"))
    out = run(bytes(Ether(**ETH_ADDRS) / ip6 / Raw(body)))
    # ipv4 was extracted (ttl decremented, checksum updated); the UDP header stays payload.
    expected_ip = IP(bytes(ip6))
    expected_ip.ttl = 8
    del expected_ip.chksum
    assert out == [(2, report(ERR_BAD_VERSION, 0, 0, 1) + bytes(Ether(**ETH_ADDRS, type=0x0800)) +
                    bytes(expected_ip)[:20] + body)]


def test_truncated_ipv4_is_packet_too_short_and_bytes_pass_through():
    eth = bytes(Ether(**ETH_ADDRS, type=0x0800))
    out = run(eth + b"\x45" * 10)
    assert out == [(2, report(ERR_TOO_SHORT, 0, 0, 1) + eth + b"\x45" * 10)]


def test_frame_shorter_than_ethernet():
    out = run(b"\x01" * 9)
    assert out == [(2, report(ERR_TOO_SHORT, 0, 0, 0) + b"\x01" * 9)]


def test_unknown_ethertype_accepts_after_ethernet():
    eth = bytes(Ether(**ETH_ADDRS, type=0x1234))
    assert run(eth + b"rest") == [(2, report(ERR_NONE, 0, 0, 1) + eth + b"rest")]


def test_masked_select_lookahead_and_unaligned_signed_fields():
    # etherType 0x88B5 matches 0x88B0 &&& 0xFFF0; kind 0 goes to the default transition.
    eth = bytes(Ether(**ETH_ADDRS, type=0x88B5))
    hdr = probe(kind=0, flags=0b10101, vid=0xFFF, pcp=3, delta=-127, tag=0x123456,
                stamp=(1 << 48) - 1)
    out = run(eth + hdr + b"tail")
    peek = int.from_bytes(hdr[:2], "big")
    # delta -127 - 3 wraps to 126; vid and stamp wrap to 0; flags ^= 0x1F.
    expected = probe(kind=0, flags=0b01010, vid=0, pcp=3, delta=126, tag=0x123456, stamp=0)
    assert out == [(2, report(ERR_NONE, 0, peek, 2) + eth + expected + b"tail")]


def test_multi_field_select_with_wildcard_reaches_ipv4():
    eth = bytes(Ether(**ETH_ADDRS, type=0x88B0))
    hdr = probe(kind=1, flags=0, vid=0x123, pcp=0, delta=5, tag=1, stamp=10)
    ip = udp_packet(ttl=10)
    out = run(eth + hdr + bytes(ip))
    expected_probe = probe(kind=1, flags=0x1F, vid=0x124, pcp=0, delta=2, tag=1, stamp=11)
    expected = report(ERR_NONE, 0, int.from_bytes(hdr[:2], "big"), 2) + eth + expected_probe + \
        bytes(udp_packet(ttl=9))
    assert out == [(2, expected)]


def test_advance_skips_bytes_that_are_then_gone_from_the_packet():
    eth = bytes(Ether(**ETH_ADDRS, type=0x88BF))
    hdr = probe(kind=2, flags=1, vid=0x0AB, pcp=0, delta=0, tag=2, stamp=0)
    ip = udp_packet(ttl=3)
    out = run(eth + hdr + b"SKIP" + bytes(ip))
    expected_probe = probe(kind=2, flags=0x1E, vid=0x0AC, pcp=0, delta=-3, tag=2, stamp=1)
    assert out == [(2, report(ERR_NONE, 0, int.from_bytes(hdr[:2], "big"), 3) + eth +
                    expected_probe + bytes(udp_packet(ttl=2)))]


def test_lookahead_in_transition_key():
    eth = bytes(Ether(**ETH_ADDRS, type=0x88B1))
    hdr = probe(kind=3, flags=0, vid=0x800, pcp=0, delta=0, tag=3, stamp=0)
    peek = int.from_bytes(hdr[:2], "big")
    expected_probe = probe(kind=3, flags=0x1F, vid=0x801, pcp=0, delta=-3, tag=3, stamp=1)
    # Next nibble 4: parsed as IPv4.
    ip = udp_packet(ttl=5)
    out = run(eth + hdr + bytes(ip))
    assert out == [(2, report(ERR_NONE, 0, peek, 4) + eth + expected_probe +
                    bytes(udp_packet(ttl=4)))]
    # Next nibble 6: accepted, the rest is payload.
    out = run(eth + hdr + b"\x60rest")
    assert out == [(2, report(ERR_NONE, 0, peek, 4) + eth + expected_probe + b"\x60rest")]


def test_custom_error_from_verify_in_probe_state():
    eth = bytes(Ether(**ETH_ADDRS, type=0x88B2))
    hdr = probe(kind=1, flags=0, vid=0, pcp=0, delta=0, tag=0xBADBAD, stamp=0)
    out = run(eth + hdr + b"more")
    expected_probe = probe(kind=1, flags=0x1F, vid=1, pcp=0, delta=-3, tag=0xBADBAD, stamp=1)
    assert out == [(2, report(ERR_BAD_TAG, 0, int.from_bytes(hdr[:2], "big"), 1) + eth +
                    expected_probe + b"more")]


def test_probe_too_short_for_its_header():
    eth = bytes(Ether(**ETH_ADDRS, type=0x88B3))
    out = run(eth + b"\x00" * 12)
    # The lookahead (2 bytes) succeeds, the 13-byte extract does not.
    assert out == [(2, report(ERR_TOO_SHORT, 0, 0, 1) + eth + b"\x00" * 12)]

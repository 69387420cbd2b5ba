"""Frames for the test programs, shared by the test modules that send them."""

from __future__ import annotations

import struct

from scapy.layers.inet import IP, UDP
from scapy.packet import Raw

# -- parsing.p4 ------------------------------------------------------------------------------------

ETH_ADDRS = dict(dst="02:00:00:00:00:02", src="02:00:00:00:00:01")  # scapy Ether() arguments


def probe(kind: int, flags: int, vid: int, pcp: int, delta: int, tag: int, stamp: int) -> bytes:
    first = (kind << 29) | (flags << 24) | (vid << 12) | (pcp << 8) | (delta & 0xFF)
    return struct.pack("!I", first) + tag.to_bytes(3, "big") + stamp.to_bytes(6, "big")


def udp_packet(ttl: int = 64, payload: bytes = b"hello aggregation") -> IP:
    return IP(src="10.0.0.1", dst="10.0.0.2", ttl=ttl, id=7) / UDP(sport=1234, dport=5678) / \
        Raw(payload)


# -- tables.p4 -------------------------------------------------------------------------------------

def key_frame(addr=0, port=0, proto=0, flags=0, tag=0) -> bytes:
    return bytes.fromhex("02000000000202000000000188b6") + \
        struct.pack("!IHBBH", addr, port, proto, flags, tag) + bytes(12)


# -- replication.p4 --------------------------------------------------------------------------------

REPLICATION_ETH = bytes.fromhex("0200000000020200000000010800")
REP_FMT = "!BBBBHHBBHH"  # the rep header: mode, then what the program records


def replication_frame(mode: int, extra: bytes = b"") -> bytes:
    return REPLICATION_ETH + struct.pack(REP_FMT, mode, 0, 0, 0, 0, 0, 0, 0, 0, 0) + extra + \
        b"payload"

"""The TNA program's headers in Python: their layouts, the ingress and egress parsers and the
deparsers of p4src/tofino/parser.p4, on bytes. A parsed packet is a :class:`Packet`: the valid
headers by name (each a dict of fields, the lanes a list of 64 unsigned words) and what the
parser found wrong."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from protocol import constants as P

LAYOUTS = {
    "pass": (("response", 4), ("_pad0", 4), ("job_index", 8), ("job_group", 16), ("_pad1", 7),
             ("port", 9), ("_pad3", 3), ("lane_index", 13)),
    "packet_out": (("opcode", 8), ("aggregator", 32)),
    "packet_in": (("ingress_port", 9), ("_pad", 7), ("opcode", 8), ("aggregator", 32)),
    "ethernet": (("dst_addr", 48), ("src_addr", 48), ("ether_type", 16)),
    "ipv4": (("version", 4), ("ihl", 4), ("diffserv", 8), ("total_len", 16),
             ("identification", 16), ("flags", 3), ("frag_offset", 13), ("ttl", 8),
             ("protocol", 8), ("hdr_checksum", 16), ("src_addr", 32), ("dst_addr", 32)),
    "udp": (("src_port", 16), ("dst_port", 16), ("length", 16), ("checksum", 16)),
    "sa": P.HEADER_FIELDS,
}
EMIT_ORDER = ("pass", "packet_in", "ethernet", "ipv4", "udp", "sa", "lanes")
RESPOND_REPORT = 7


def size(name: str) -> int:
    if name == "lanes":
        return 4 * P.LANES
    return sum(bits for _, bits in LAYOUTS[name]) // 8


def unpack(name: str, data: bytes):
    if name == "lanes":
        return list(struct.unpack(f"!{P.LANES}I", data))
    value, fields, shift = int.from_bytes(data, "big"), {}, 8 * len(data)
    for field_name, bits in LAYOUTS[name]:
        shift -= bits
        fields[field_name] = (value >> shift) & ((1 << bits) - 1)
    return fields


def pack(name: str, fields) -> bytes:
    if name == "lanes":
        return struct.pack(f"!{P.LANES}I", *fields)
    value = 0
    for field_name, bits in LAYOUTS[name]:
        value = (value << bits) | (fields[field_name] & ((1 << bits) - 1))
    return value.to_bytes(size(name), "big")


def ipv4_checksum(ipv4: dict) -> int:
    data = pack("ipv4", {**ipv4, "hdr_checksum": 0})
    total = sum(struct.unpack("!10H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


@dataclass
class Packet:
    hdr: dict = field(default_factory=dict)
    payload: bytes = b""
    parser_error: bool = False
    bad_version: bool = False
    checksum_err: bool = False

    def valid(self, name: str) -> bool:
        return name in self.hdr

    def emit(self) -> bytes:
        return b"".join(pack(n, self.hdr[n]) for n in EMIT_ORDER if n in self.hdr) + self.payload


class _Reader:
    def __init__(self, frame: bytes, packet: Packet):
        self.frame, self.pos, self.packet = frame, 0, packet

    def extract(self, name: str) -> bool:
        n = size(name)
        if self.pos + n > len(self.frame):
            self.packet.parser_error = True
            return False
        self.packet.hdr[name] = unpack(name, self.frame[self.pos:self.pos + n])
        self.pos += n
        return True

    def done(self) -> Packet:
        self.packet.payload = self.frame[self.pos:]
        return self.packet


def parse_ingress(frame: bytes, port: int, resubmitted: bool, cpu_ports: set[int],
                  loop_ports: set[int]) -> Packet:
    r = _Reader(frame, Packet())
    if port in cpu_ports:
        if not r.extract("packet_out"):
            return r.done()
    elif port in loop_ports and not resubmitted:
        if not r.extract("pass"):
            return r.done()
        names = ["ethernet", "ipv4", "udp", "sa", "lanes"]
        if r.packet.hdr["pass"]["response"] == RESPOND_REPORT:
            names.insert(0, "packet_in")
        for name in names:
            if not r.extract(name):
                break
        return r.done()
    _parse_frame(r)
    return r.done()


def _parse_frame(r: _Reader) -> None:
    if not r.extract("ethernet") or r.packet.hdr["ethernet"]["ether_type"] != P.ETHERTYPE_IPV4:
        return
    if not r.extract("ipv4"):
        return
    ipv4 = r.packet.hdr["ipv4"]
    r.packet.checksum_err = ipv4_checksum(ipv4) != ipv4["hdr_checksum"]
    if (ipv4["ihl"], ipv4["frag_offset"], ipv4["protocol"]) != (5, 0, P.IP_PROTO_UDP):
        return
    if not r.extract("udp") or r.packet.hdr["udp"]["dst_port"] != P.UDP_PORT:
        return
    if not r.extract("sa"):
        return
    if r.packet.hdr["sa"]["version"] != P.VERSION:
        r.packet.bad_version = True
        return
    r.extract("lanes")


def parse_egress(frame: bytes, bridge: dict) -> Packet:
    r = _Reader(frame, Packet())
    if bridge["to_loop"] or not bridge["sa"]:
        return r.done()
    for name in (("packet_in",) if bridge["to_cpu"] else ()) + ("ethernet", "ipv4", "udp", "sa"):
        r.extract(name)
    return r.done()


def deparse_egress(packet: Packet) -> bytes:
    if packet.valid("sa"):
        packet.hdr["ipv4"]["hdr_checksum"] = ipv4_checksum(packet.hdr["ipv4"])
    return packet.emit()

"""A scapy layer for SA-ATP (docs/protocol.md §2), for tests, pcaps and debugging.

Importing this module binds the layer to UDP port 23162, so ``Ether(raw)`` dissects SA-ATP frames
and Wireshark-style summaries name the op.
"""

from __future__ import annotations

from scapy.fields import (
    BitEnumField,
    BitField,
    ByteEnumField,
    ByteField,
    FieldListField,
    FlagsField,
    IntField,
    ShortField,
    SignedIntField,
    XIntField,
    XShortField,
)
from scapy.layers.inet import UDP
from scapy.packet import Packet, bind_layers

from protocol import constants as P

_OPS = {op.value: op.name for op in P.Op}
_REASONS = {r.value: r.name for r in P.Bounce}
_FLAG_NAMES = ["SET", "RETX", "COPY", "HELPER", "PROBE", "R5", "R6", "R7"]


class SaAtp(Packet):
    name = "SA-ATP"
    fields_desc = [
        BitField("version", P.VERSION, 4),
        BitEnumField("op", P.Op.DATA, 4, _OPS),
        FlagsField("flags", 0, 8, _FLAG_NAMES),
        ShortField("job", 0),
        ShortField("slot", 0),
        ByteField("worker", 0),
        ByteEnumField("reason", 0, _REASONS),
        IntField("chunk", 0),
        XIntField("bitmap", 0),
        ByteField("count", 0),
        ByteField("fanin", 0),
        XShortField("scale", 0),
        XShortField("exp", 0),
        XIntField("run", 0),
        FieldListField("lanes", [0] * P.LANES, SignedIntField("", 0), count_from=lambda _: P.LANES),
    ]

    def mysummary(self):
        return self.sprintf("SA-ATP %op% job=%job% slot=%slot% chunk=%chunk% worker=%worker%")


bind_layers(UDP, SaAtp, dport=P.UDP_PORT)
bind_layers(UDP, SaAtp, sport=P.UDP_PORT)

"""Name-based access to a P4Info (tables, actions, counters, packet metadata), and the P4Runtime
byte-string encoding of values."""

from __future__ import annotations

from google.protobuf import text_format
from p4.config.v1 import p4info_pb2


class P4InfoError(KeyError):
    """A name the P4Info does not have (the message lists what it does have)."""

    def __str__(self) -> str:  # KeyError quotes its argument; we want the plain sentence
        return str(self.args[0])


def encode(value: int, bitwidth: int) -> bytes:
    """Canonical P4Runtime byte string of an unsigned value (no leading zero bytes)."""
    if value < 0 or value >> bitwidth:
        raise ValueError(f"value {value} does not fit in {bitwidth} bits")
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


def decode(data: bytes) -> int:
    return int.from_bytes(data, "big")


class P4Info:
    """Index of one P4Info message by fully-qualified names."""

    def __init__(self, message: p4info_pb2.P4Info):
        self.message = message
        self._tables = {t.preamble.name: t for t in message.tables}
        self._actions = {a.preamble.name: a for a in message.actions}
        self._counters = {c.preamble.name: c for c in message.counters}
        self._packet_metadata = {m.preamble.name: m for m in message.controller_packet_metadata}
        self._action_names = {a.preamble.id: a.preamble.name for a in message.actions}

    @classmethod
    def from_text(cls, text: str) -> P4Info:
        return cls(text_format.Parse(text, p4info_pb2.P4Info()))

    @staticmethod
    def _find(kind: str, index: dict, name: str):
        try:
            return index[name]
        except KeyError:
            raise P4InfoError(f"no {kind} named {name!r} in the P4Info; it has: "
                              f"{', '.join(sorted(index)) or 'none'}") from None

    def table(self, name: str) -> p4info_pb2.Table:
        return self._find("table", self._tables, name)

    def action(self, name: str) -> p4info_pb2.Action:
        return self._find("action", self._actions, name)

    def action_name(self, action_id: int) -> str:
        return self._action_names[action_id]

    def counter(self, name: str) -> p4info_pb2.Counter:
        return self._find("counter", self._counters, name)

    def packet_metadata(self, name: str) -> p4info_pb2.ControllerPacketMetadata:
        return self._find("controller packet metadata", self._packet_metadata, name)

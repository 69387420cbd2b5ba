"""The P4Runtime ids of a test program's objects, by name."""

from __future__ import annotations

from google.protobuf import text_format
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2 as pb

from tests.softswitch.programs import p4info_text


def _named(items, name: str):
    return next(x for x in items if x.preamble.name == name)


class P4Info:
    def __init__(self, name: str):
        self.msg = text_format.Parse(p4info_text(name), p4info_pb2.P4Info())

    def table(self, name: str) -> p4info_pb2.Table:
        return _named(self.msg.tables, name)

    def action(self, name: str) -> p4info_pb2.Action:
        return _named(self.msg.actions, name)

    def action_id(self, name: str) -> int:
        return self.action(name).preamble.id

    def field_id(self, table: str, name: str) -> int:
        return next(f.id for f in self.table(table).match_fields if f.name == name)

    def counter_id(self, name: str) -> int:
        return _named(self.msg.counters, name).preamble.id

    def register_id(self, name: str) -> int:
        return _named(self.msg.registers, name).preamble.id


def exact_entry(info: P4Info, addr: int, port: int, v: int, out_port: int,
                encode=lambda x, n: x.to_bytes(n, "big")) -> pb.TableEntry:
    """An entry of the tables program's t_exact (``encode`` makes the key's bytestrings)."""
    table = "IngressImpl.t_exact"
    te = pb.TableEntry(table_id=info.table(table).preamble.id)
    m = te.match.add(field_id=info.field_id(table, "hdr.key.addr"))
    m.exact.value = encode(addr, 4)
    m = te.match.add(field_id=info.field_id(table, "hdr.key.port"))
    m.exact.value = encode(port, 2)
    te.action.action.action_id = info.action_id("IngressImpl.set_exact")
    te.action.action.params.add(param_id=1, value=bytes([v]))
    te.action.action.params.add(param_id=2, value=out_port.to_bytes(2, "big"))
    return te

"""Table entries and multicast groups described by names, and their P4Runtime form.

The controller computes the entries it wants as plain values (hashable, comparable), so that
reconciliation is a set difference between what it wants and what it reads back.
"""

from __future__ import annotations

from dataclasses import dataclass

from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from control_plane.p4info import P4Info, decode, encode

MatchValue = int | tuple[int, int]  # exact / optional: value; lpm: (value, prefix); ternary:
#                                     (value, mask); range: (low, high)


@dataclass(frozen=True)
class TableEntry:
    table: str
    match: tuple[tuple[str, MatchValue], ...]  # sorted by field name
    action: str
    params: tuple[tuple[str, int], ...] = ()  # sorted by parameter name
    priority: int = 0
    is_default: bool = False

    @classmethod
    def make(cls, table: str, match: dict[str, MatchValue], action: str,
             params: dict[str, int] | None = None, priority: int = 0) -> TableEntry:
        return cls(table, tuple(sorted(match.items())), action,
                   tuple(sorted((params or {}).items())), priority)

    @classmethod
    def default(cls, table: str, action: str, params: dict[str, int] | None = None
                ) -> TableEntry:
        return cls(table, (), action, tuple(sorted((params or {}).items())), 0, True)

    @property
    def key(self) -> tuple:
        """What identifies the entry in its table."""
        return (self.table, self.match, self.priority, self.is_default)

    def to_proto(self, p4info: P4Info) -> p4runtime_pb2.TableEntry:
        table = p4info.table(self.table)
        entry = p4runtime_pb2.TableEntry(table_id=table.preamble.id, priority=self.priority,
                                         is_default_action=self.is_default)
        fields = {f.name: f for f in table.match_fields}
        for name, value in self.match:
            if name not in fields:
                raise KeyError(f"table {self.table} has no match field {name!r}; it has "
                               f"{sorted(fields)}")
            _set_match(entry.match.add(), fields[name], value)
        action = entry.action.action
        info = p4info.action(self.action)
        action.action_id = info.preamble.id
        widths = {p.name: p for p in info.params}
        for name, value in self.params:
            if name not in widths:
                raise KeyError(f"action {self.action} has no parameter {name!r}; it has "
                               f"{sorted(widths)}")
            action.params.add(param_id=widths[name].id, value=encode(value, widths[name].bitwidth))
        return entry

    @classmethod
    def from_proto(cls, entry: p4runtime_pb2.TableEntry, p4info: P4Info) -> TableEntry:
        table = next(t for t in p4info.message.tables if t.preamble.id == entry.table_id)
        fields = {f.id: f for f in table.match_fields}
        match = tuple(sorted((fields[m.field_id].name, _get_match(m)) for m in entry.match))
        action_name = p4info.action_name(entry.action.action.action_id)
        params_info = {p.id: p.name for p in p4info.action(action_name).params}
        params = tuple(sorted((params_info[p.param_id], decode(p.value))
                              for p in entry.action.action.params))
        return cls(table.preamble.name, match, action_name, params, entry.priority,
                   entry.is_default_action)


def _set_match(m: p4runtime_pb2.FieldMatch, field: p4info_pb2.MatchField, value) -> None:
    m.field_id = field.id
    kind = field.match_type
    width = field.bitwidth
    if kind == p4info_pb2.MatchField.EXACT:
        m.exact.value = encode(value, width)
    elif kind == p4info_pb2.MatchField.LPM:
        m.lpm.value, m.lpm.prefix_len = encode(value[0], width), value[1]
    elif kind == p4info_pb2.MatchField.TERNARY:
        m.ternary.value, m.ternary.mask = encode(value[0], width), encode(value[1], width)
    elif kind == p4info_pb2.MatchField.RANGE:
        m.range.low, m.range.high = encode(value[0], width), encode(value[1], width)
    elif kind == p4info_pb2.MatchField.OPTIONAL:
        m.optional.value = encode(value, width)
    else:
        raise ValueError(f"match field {field.name}: unsupported match type {kind}")


def _get_match(m: p4runtime_pb2.FieldMatch) -> MatchValue:
    kind = m.WhichOneof("field_match_type")
    if kind == "exact":
        return decode(m.exact.value)
    if kind == "lpm":
        return (decode(m.lpm.value), m.lpm.prefix_len)
    if kind == "ternary":
        return (decode(m.ternary.value), decode(m.ternary.mask))
    if kind == "range":
        return (decode(m.range.low), decode(m.range.high))
    if kind == "optional":
        return decode(m.optional.value)
    raise ValueError(f"unsupported field match {kind}")


@dataclass(frozen=True)
class MulticastGroup:
    """A packet replication engine group: replicas as sorted (port, replica id) pairs."""

    group_id: int
    replicas: tuple[tuple[int, int], ...]

    @classmethod
    def make(cls, group_id: int, replicas) -> MulticastGroup:
        return cls(group_id, tuple(sorted(replicas)))

    def to_proto(self) -> p4runtime_pb2.PacketReplicationEngineEntry:
        pre = p4runtime_pb2.PacketReplicationEngineEntry()
        pre.multicast_group_entry.multicast_group_id = self.group_id
        for port, rid in self.replicas:
            pre.multicast_group_entry.replicas.add(egress_port=port, instance=rid)
        return pre

    @classmethod
    def from_proto(cls, pre: p4runtime_pb2.PacketReplicationEngineEntry) -> MulticastGroup:
        g = pre.multicast_group_entry
        return cls.make(g.multicast_group_id, ((r.egress_port, r.instance) for r in g.replicas))

"""The P4Runtime form of table entries and multicast groups (``entries.py``): the Update messages
of the controller's writes, in the order it batches them, and the entries it reads back."""

from __future__ import annotations

from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from control_plane.connection import Update
from control_plane.entries import MatchValue, MulticastGroup, TableEntry
from control_plane.p4info import P4Info, decode, encode


def table_entry(entry: TableEntry, p4info: P4Info) -> p4runtime_pb2.TableEntry:
    table = p4info.table(entry.table)
    proto = p4runtime_pb2.TableEntry(table_id=table.preamble.id, priority=entry.priority,
                                     is_default_action=entry.is_default)
    fields = {f.name: f for f in table.match_fields}
    for name, value in entry.match:
        if name not in fields:
            raise KeyError(f"table {entry.table} has no match field {name!r}; it has "
                           f"{sorted(fields)}")
        _set_match(proto.match.add(), fields[name], value)
    action = proto.action.action
    info = p4info.action(entry.action)
    action.action_id = info.preamble.id
    widths = {p.name: p for p in info.params}
    for name, value in entry.params:
        if name not in widths:
            raise KeyError(f"action {entry.action} has no parameter {name!r}; it has "
                           f"{sorted(widths)}")
        action.params.add(param_id=widths[name].id, value=encode(value, widths[name].bitwidth))
    return proto


def read_table_entry(entry: p4runtime_pb2.TableEntry, p4info: P4Info) -> TableEntry:
    table = next(t for t in p4info.message.tables if t.preamble.id == entry.table_id)
    fields = {f.id: f for f in table.match_fields}
    match = tuple(sorted((fields[m.field_id].name, _get_match(m)) for m in entry.match))
    action_name = p4info.action_name(entry.action.action.action_id)
    params_info = {p.id: p.name for p in p4info.action(action_name).params}
    params = tuple(sorted((params_info[p.param_id], decode(p.value))
                          for p in entry.action.action.params))
    return TableEntry(table.preamble.name, match, action_name, params, entry.priority,
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


def group_entry(group: MulticastGroup) -> p4runtime_pb2.PacketReplicationEngineEntry:
    pre = p4runtime_pb2.PacketReplicationEngineEntry()
    pre.multicast_group_entry.multicast_group_id = group.group_id
    for port, rid in group.replicas:
        pre.multicast_group_entry.replicas.add(egress_port=port, instance=rid)
    return pre

def read_group(pre: p4runtime_pb2.PacketReplicationEngineEntry) -> MulticastGroup:
    g = pre.multicast_group_entry
    return MulticastGroup.make(g.multicast_group_id,
                               ((r.egress_port, r.instance) for r in g.replicas))


def _update(kind, entity_setter) -> Update:
    update = Update(type=kind)
    entity_setter(update.entity)
    return update


def insert(entry: TableEntry, p4info: P4Info) -> Update:
    return _table_update(Update.INSERT, entry, p4info)


def modify(entry: TableEntry, p4info: P4Info) -> Update:
    return _table_update(Update.MODIFY, entry, p4info)


def delete(entry: TableEntry, p4info: P4Info) -> Update:
    return _table_update(Update.DELETE, entry, p4info)


def _table_update(kind, entry: TableEntry, p4info: P4Info) -> Update:
    if entry.is_default:
        kind = Update.MODIFY  # a default entry always exists; it can only be modified
    return _update(kind, lambda e: e.table_entry.CopyFrom(table_entry(entry, p4info)))


def insert_group(group: MulticastGroup) -> Update:
    return _update(Update.INSERT,
                   lambda e: e.packet_replication_engine_entry.CopyFrom(group_entry(group)))


def modify_group(group: MulticastGroup) -> Update:
    return _update(Update.MODIFY,
                   lambda e: e.packet_replication_engine_entry.CopyFrom(group_entry(group)))


def delete_group(group: MulticastGroup) -> Update:
    return _update(Update.DELETE,
                   lambda e: e.packet_replication_engine_entry.CopyFrom(group_entry(group)))

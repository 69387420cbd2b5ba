"""P4Runtime Update messages that insert, modify or delete table entries and multicast groups
(the controller's writes, in the order it batches them)."""

from __future__ import annotations

from control_plane.connection import Update
from control_plane.entries import MulticastGroup, TableEntry
from control_plane.p4info import P4Info


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
    return _update(kind, lambda e: e.table_entry.CopyFrom(entry.to_proto(p4info)))


def insert_group(group: MulticastGroup) -> Update:
    return _update(Update.INSERT,
                   lambda e: e.packet_replication_engine_entry.CopyFrom(group.to_proto()))


def modify_group(group: MulticastGroup) -> Update:
    return _update(Update.MODIFY,
                   lambda e: e.packet_replication_engine_entry.CopyFrom(group.to_proto()))


def delete_group(group: MulticastGroup) -> Update:
    return _update(Update.DELETE,
                   lambda e: e.packet_replication_engine_entry.CopyFrom(group.to_proto()))

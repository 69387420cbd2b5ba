"""P4Runtime's TableEntry and DirectCounterEntry on the switch's tables, with the checks, status
codes and messages of PI's ``DeviceMgr`` (its table and direct counter operations), in PI's order
so the two read side by side.  Match keys are converted in match_fields.py.

What P4Runtime keeps with an entry and the table API does not (controller metadata, metadata) is
kept here by entry handle; an entry P4Runtime did not write (a const entry of the program) is
unknown to P4Runtime, as in PI.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2 as pb

from ..core.errors import TableError
from ..core.tables import MatchTable, TableEntry
from .match_fields import fill_match, match_key
from .pipeline import (
    ACTION,
    TABLE,
    PipelineIndex,
    Scope,
    TableMap,
    Unit,
    check_id,
    check_update_type,
    failed,
    invalid,
    invalid_id,
    new_entity,
    set_counter_data,
    to_bytes,
    to_int,
)

if TYPE_CHECKING:
    from ..dataplane import Dataplane

Update = pb.Update


@dataclass
class _EntryInfo:
    controller_metadata: int = 0
    metadata: bytes = b""
    idle_timeout_ns: int = 0


class TableEntries:
    """The table entries of one device, on the switch its dataplane runs."""

    def __init__(self, dataplane: Dataplane):
        self.dataplane = dataplane
        self.index: PipelineIndex | None = None
        self._entries: dict[int, dict[int, _EntryInfo]] = {}  # table id -> handle -> info
        self._defaults: dict[int, _EntryInfo] = {}

    def reset(self, index: PipelineIndex) -> None:
        """A new pipeline: its tables, with no entry written yet."""
        self.index = index
        self._entries = {tid: {} for tid in index.tables}
        self._defaults = {tid: _EntryInfo() for tid in index.tables}

    # -- write ----------------------------------------------------------------------------------

    def write(self, kind: int, entry: pb.TableEntry) -> None:
        check_id(entry.table_id, TABLE)
        t = self.index.table(entry.table_id)
        if entry.HasField("time_since_last_hit"):
            raise invalid("has_time_since_last_hit must not be set in WriteRequest")
        check_update_type(kind)
        table = self.dataplane.switch.tables[t.name]
        if kind == Update.INSERT:
            self._insert(t, table, entry)
        elif kind == Update.MODIFY:
            self._modify(t, table, entry)
        else:
            self._delete(t, table, entry)

    def _validate_action(self, t: TableMap, entry: pb.TableEntry) -> None:
        if entry.is_default_action and t.const_default:
            raise failed(code_pb2.PERMISSION_DENIED,
                         f"Cannot set / reset default action for table {t.id} which has a const "
                         "default action")
        if not entry.HasField("action"):
            return
        if entry.action.WhichOneof("type") != "action":
            raise invalid(f"Cannot provide indirect action for direct table {t.id}")
        action_id = entry.action.action.action_id
        if action_id >> 24 != ACTION or action_id not in self.index.actions:
            raise invalid_id()
        ref = t.actions.get(action_id)
        if ref is None:
            raise invalid("Invalid action for table")
        scope = ref[1]
        if scope == Scope.TABLE_ONLY and entry.is_default_action:
            raise failed(code_pb2.PERMISSION_DENIED,
                         "Cannot use TABLE_ONLY action as default action")
        if scope == Scope.DEFAULT_ONLY and not entry.is_default_action:
            raise failed(code_pb2.PERMISSION_DENIED,
                         "Cannot use DEFAULT_ONLY action in table entry")

    def _action_data(self, t: TableMap, action: pb.Action) -> tuple[str, list[int]]:
        amap = t.actions[action.action_id][0]
        if len(action.params) != len(amap.params):
            raise invalid("Unexpected number of action parameters")
        values = dict.fromkeys(amap.params, 0)
        for p in action.params:
            if p.param_id not in amap.params:
                raise invalid("Unknown action parameter")
            values[p.param_id] = to_int(p.value, amap.params[p.param_id][1])
        return amap.name, [values[pid] for pid in amap.params]

    @staticmethod
    def _check_resources(t: TableMap, entry: pb.TableEntry) -> None:
        if entry.HasField("meter_config"):
            raise invalid("Table has no direct meters")
        if entry.HasField("counter_data") and not t.direct_counter_id:
            raise invalid("Table has no direct counters")
        if entry.idle_timeout_ns < 0:
            raise invalid("idle_timeout_ns must be a positive value")
        if entry.idle_timeout_ns > 0:
            raise invalid("idle_timeout_ns must be set to 0 for tables which do not support "
                          "idle timeout")

    def _set_direct_counter(self, t: TableMap, table: MatchTable, handle: int | None,
                            entry: pb.TableEntry) -> None:
        if not entry.HasField("counter_data"):
            return
        data = entry.counter_data
        old_packets, old_bytes = table.counter(handle)
        unit = self.index.direct_counters[t.direct_counter_id].unit
        packets = data.packet_count if unit in (Unit.PACKETS, Unit.BOTH) else old_packets
        nbytes = data.byte_count if unit in (Unit.BYTES, Unit.BOTH) else old_bytes
        table.set_counter(handle, packets, nbytes)

    def _find_handle(self, t: TableMap, table: MatchTable, match: list, priority: int
                     ) -> int | None:
        e = table.find(match, priority or None)
        if e is None or e.handle not in self._entries[t.id]:
            return None  # const entries are unknown to P4Runtime, as in PI
        return e.handle

    def _insert(self, t: TableMap, table: MatchTable, entry: pb.TableEntry) -> None:
        if entry.is_default_action:
            raise invalid("Cannot use INSERT for default entry")
        if not entry.HasField("action"):
            raise invalid("'action' field must be set")
        match, priority = match_key(t, entry)
        self._validate_action(t, entry)
        name, data = self._action_data(t, entry.action.action)
        self._check_resources(t, entry)
        if self._find_handle(t, table, match, priority) is not None:
            raise failed(code_pb2.ALREADY_EXISTS,
                         "Match entry exists, use MODIFY if you wish to change action")
        try:
            handle = table.add(match, name, data, priority or None)
        except TableError as exc:
            raise failed(code_pb2.UNKNOWN,
                         f"Error when adding match entry to target: {exc}") from None
        self._set_direct_counter(t, table, handle, entry)
        self._entries[t.id][handle] = _EntryInfo(entry.controller_metadata, entry.metadata)

    def _modify(self, t: TableMap, table: MatchTable, entry: pb.TableEntry) -> None:
        match, priority = match_key(t, entry)
        self._validate_action(t, entry)
        action = None
        if entry.HasField("action"):
            action = self._action_data(t, entry.action.action)
        elif not entry.is_default_action:
            raise invalid("'action' field must be set for non-default entries")
        self._check_resources(t, entry)
        handle = None
        if not entry.is_default_action:
            handle = self._find_handle(t, table, match, priority)
            if handle is None:
                raise failed(code_pb2.NOT_FOUND, "Cannot find match entry")
        try:
            if entry.is_default_action:
                if action is None:
                    table.reset_default()
                else:
                    table.set_default(*action)
            else:
                table.modify(handle, *action)
        except TableError as exc:
            raise failed(code_pb2.UNKNOWN,
                         f"Error when modifying match entry in target: {exc}") from None
        self._set_direct_counter(t, table, handle, entry)
        info = _EntryInfo() if action is None else _EntryInfo(entry.controller_metadata,
                                                              entry.metadata)
        if entry.is_default_action:
            self._defaults[t.id] = info
        else:
            self._entries[t.id][handle] = info

    def _delete(self, t: TableMap, table: MatchTable, entry: pb.TableEntry) -> None:
        if entry.is_default_action:
            raise invalid("Cannot use DELETE for default entry")
        match, priority = match_key(t, entry)
        handle = self._find_handle(t, table, match, priority)
        if handle is None:
            raise failed(code_pb2.NOT_FOUND, "Cannot find match entry")
        try:
            table.delete(handle)
        except TableError as exc:
            raise failed(code_pb2.UNKNOWN,
                         f"Error when deleting match entry in target: {exc}") from None
        del self._entries[t.id][handle]

    def write_direct_counter(self, kind: int, entry: pb.DirectCounterEntry) -> None:
        if not entry.HasField("table_entry"):
            raise invalid("Missing table_entry field in DirectCounterEntry")
        te = entry.table_entry
        check_id(te.table_id, TABLE)
        t = self.index.table(te.table_id)
        table = self.dataplane.switch.tables[t.name]
        handle = self._handle_for(t, table, te)
        if not t.direct_counter_id:
            raise invalid("Table has no direct counters")
        check_update_type(kind)
        if kind == Update.INSERT:
            raise invalid("INSERT update type not supported for counters")
        if kind == Update.DELETE:
            table.set_counter(handle, 0, 0)
            return
        holder = pb.TableEntry()
        holder.counter_data.CopyFrom(entry.data)
        self._set_direct_counter(t, table, handle, holder)

    def _handle_for(self, t: TableMap, table: MatchTable, te: pb.TableEntry) -> int | None:
        match, priority = match_key(t, te)
        if te.is_default_action:
            return None
        handle = self._find_handle(t, table, match, priority)
        if handle is None:
            raise invalid("Cannot map table entry to handle")
        return handle

    # -- read -----------------------------------------------------------------------------------

    def read(self, request: pb.TableEntry, out: list[pb.Entity]) -> None:
        index = self.index
        if request.table_id == 0:
            for t in index.tables.values():
                self._read_table(t, request, out)
            return
        check_id(request.table_id, TABLE)
        self._read_table(index.table(request.table_id), request, out)

    def _read_table(self, t: TableMap, request: pb.TableEntry, out: list[pb.Entity]) -> None:
        table = self.dataplane.switch.tables[t.name]
        if request.is_default_action:
            if request.HasField("time_since_last_hit"):
                raise invalid("Default table entries do not support entry ageing, do not set "
                              "'time_since_last_hit' in your ReadRequest")
            d = table.default_entry
            msg = new_entity(out).table_entry
            msg.table_id = t.id
            msg.is_default_action = True
            if d.action:
                self._fill_action(t, d, msg)
            if request.HasField("counter_data") and t.direct_counter_id:
                set_counter_data(msg.counter_data, d.packets, d.bytes)
            info = self._defaults.get(t.id, _EntryInfo())
            msg.controller_metadata = info.controller_metadata
            msg.metadata = info.metadata
            return
        if request.HasField("time_since_last_hit"):
            raise invalid("Do not set time_since_last_hit for a ReadRequest if the table does not "
                          "support idle timeout; yes, that includes wildcard reads")
        if len(request.match):
            match, priority = match_key(t, request)
            e = table.find(match, priority or None)
            entries = [] if e is None else [e]
        else:
            entries = table.entries()
        for e in entries:
            msg = new_entity(out).table_entry
            self._fill_entry(t, e, msg)
            if request.HasField("counter_data") and t.direct_counter_id:
                set_counter_data(msg.counter_data, e.packets, e.bytes)
            if t.is_const:
                continue
            info = self._entries[t.id].get(e.handle, _EntryInfo())
            msg.controller_metadata = info.controller_metadata
            msg.metadata = info.metadata
            msg.idle_timeout_ns = info.idle_timeout_ns

    def _fill_entry(self, t: TableMap, e: TableEntry, msg: pb.TableEntry) -> None:
        msg.table_id = t.id
        fill_match(t, e, msg)
        self._fill_action(t, e, msg)

    def _fill_action(self, t: TableMap, e: TableEntry, msg: pb.TableEntry) -> None:
        for aid, (amap, _) in t.actions.items():
            if amap.name == e.action:
                msg.action.action.action_id = aid
                for pid, (pname, _) in amap.params.items():
                    p = msg.action.action.params.add()
                    p.param_id = pid
                    p.value = to_bytes(e.params[pname])
                return

    def read_direct_counter(self, request: pb.DirectCounterEntry, out: list[pb.Entity]) -> None:
        if not request.HasField("table_entry"):
            raise invalid("Missing table_entry field in DirectCounterEntry")
        te = request.table_entry
        if te.table_id == 0:
            raise failed(code_pb2.UNIMPLEMENTED,
                         "Reading all direct counters for ALL tables is not supported yet")
        check_id(te.table_id, TABLE)
        t = self.index.table(te.table_id)
        if not t.direct_counter_id:
            raise invalid("Table has no direct counters")
        table = self.dataplane.switch.tables[t.name]
        if len(te.match) or te.is_default_action:
            handle = self._handle_for(t, table, te)
            packets, nbytes = table.counter(handle)
            msg = new_entity(out).direct_counter_entry
            msg.table_entry.CopyFrom(te)
            set_counter_data(msg.data, packets, nbytes)
            return
        for e in table.entries():
            msg = new_entity(out).direct_counter_entry
            msg.table_entry.table_id = t.id
            self._fill_entry(t, e, msg.table_entry)
            msg.table_entry.ClearField("action")
            set_counter_data(msg.data, e.packets, e.bytes)

"""The P4Runtime device: pipeline configuration, writes and reads, with the status codes and
messages of p4lang/PI's ``DeviceMgr`` (the server inside ``simple_switch_grpc``).

Where PI and the P4Runtime specification differ, PI is followed (it is what bmv2 users get):
every failed update of a batch makes the whole Write fail with UNKNOWN and one ``p4.v1.Error``
per update; target-side failures (table full, const table...) are UNKNOWN.  Two extensions beyond
PI are documented where they are: register entries (PI answers UNIMPLEMENTED; here they follow the
specification unless ``register_access`` is off) and RECONCILE_AND_COMMIT, which here keeps the
forwarding state of every object the new pipeline still has.

The module is long on purpose: it mirrors ``DeviceMgr`` (device_mgr.cpp), one method per entity
kind and operation with PI's checks in PI's order, so the two read side by side.  Multicast groups
and clone sessions are apart in replication.py, as PI keeps its PRE managers apart.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2 as pb

from ..core.errors import SoftSwitchError, StateError, TableError
from ..core.match_keys import BM_MAX_PRIORITY
from ..core.switch import Switch
from ..core.tables import MatchTable
from .pipeline import (
    ACTION,
    COUNTER,
    REGISTER,
    TABLE,
    MatchType,
    P4RuntimeError,
    PipelineIndex,
    Scope,
    TableMap,
    Unit,
    check_update_type,
    failed,
    invalid,
    invalid_id,
    to_bytes,
    to_int,
)
from .replication import ReplicationManager

if TYPE_CHECKING:
    from ..dataplane import Dataplane

log = logging.getLogger("softswitch.p4runtime_server")

SetAction = pb.SetForwardingPipelineConfigRequest
GetType = pb.GetForwardingPipelineConfigRequest
Update = pb.Update


@dataclass
class _EntryInfo:
    controller_metadata: int = 0
    metadata: bytes = b""
    idle_timeout_ns: int = 0


@dataclass
class _Pipeline:
    index: PipelineIndex
    config: pb.ForwardingPipelineConfig


class DeviceManager:
    """One P4Runtime device (``device_id``) backed by a :class:`Dataplane`."""

    def __init__(self, dataplane: Dataplane, register_access: bool = True):
        self.dataplane = dataplane
        self.device_id = dataplane.device_id
        self.register_access = register_access
        self.lock = threading.RLock()
        self.pipeline: _Pipeline | None = None
        self._saved: _Pipeline | None = None  # VERIFY_AND_SAVE, waiting for COMMIT
        self._entries: dict[int, dict[int, _EntryInfo]] = {}  # table id -> handle -> info
        self._defaults: dict[int, _EntryInfo] = {}
        self.replication = ReplicationManager(dataplane)

    @property
    def switch(self) -> Switch:
        return self.dataplane.switch

    def _switch_lock(self):
        """Reads and writes are atomic with respect to packet processing."""
        switch = self.dataplane.switch
        return switch.lock if switch is not None else contextlib.nullcontext()

    # -- pipeline configuration ----------------------------------------------------------------

    def set_pipeline(self, device_id: int, action: int,
                     config: pb.ForwardingPipelineConfig) -> None:
        with self.lock:
            if action == SetAction.UNSPECIFIED:
                raise invalid("Invalid SetForwardingPipeline action")
            prepared = None
            if action in (SetAction.VERIFY, SetAction.VERIFY_AND_SAVE,
                          SetAction.VERIFY_AND_COMMIT, SetAction.RECONCILE_AND_COMMIT):
                prepared = self._prepare(config)
            if action == SetAction.VERIFY:
                return
            if device_id != self.device_id:
                raise failed(code_pb2.UNKNOWN, "Error when trying to assign device")
            if action == SetAction.VERIFY_AND_SAVE:
                self._saved = prepared
                return
            if action == SetAction.COMMIT:
                if self._saved is None:
                    raise failed(code_pb2.UNKNOWN, "Error in second phase of device update")
                prepared, self._saved = self._saved, None
            if action == SetAction.RECONCILE_AND_COMMIT and self.pipeline is not None:
                self._reconcile(prepared)
                return
            if action in (SetAction.VERIFY_AND_COMMIT, SetAction.COMMIT,
                          SetAction.RECONCILE_AND_COMMIT):
                self._commit(prepared)
                return
            raise invalid("Invalid SetForwardingPipeline action")

    def _prepare(self, config: pb.ForwardingPipelineConfig) -> _Pipeline:
        try:
            program = self.dataplane.load_program(config.p4_device_config)
        except SoftSwitchError as exc:
            raise failed(code_pb2.UNKNOWN, f"Error in first phase of device update: {exc}") \
                from None
        try:
            index = PipelineIndex(config.p4info, program)
        except ValueError as exc:
            raise failed(code_pb2.UNKNOWN, f"Error when importing p4info: {exc}") from None
        saved = pb.ForwardingPipelineConfig()
        saved.CopyFrom(config)
        return _Pipeline(index, saved)

    def _commit(self, prepared: _Pipeline) -> None:
        self.dataplane.install(prepared.index.program)
        self.pipeline = prepared
        self._entries = {tid: {} for tid in prepared.index.tables}
        self._defaults = {tid: _EntryInfo() for tid in prepared.index.tables}
        self.replication.clear()
        log.info("forwarding pipeline committed (%d tables)", len(prepared.index.tables))

    def _reconcile(self, prepared: _Pipeline) -> None:
        """Commit the new pipeline and re-create the old forwarding state in it: every table
        entry, counter value, register value, multicast group and clone session of an object the
        new P4Info still has (same name)."""
        old = self.pipeline.index
        state = self._snapshot()
        old_switch = self.switch
        self._commit(prepared)
        new = prepared.index
        table_ids = {t.name: t.id for t in new.tables.values()}
        errors = []
        updates = []
        for entity in state:
            which = entity.WhichOneof("entity")
            if which == "table_entry":
                old_table = old.tables[entity.table_entry.table_id]
                if old_table.is_const or old_table.name not in table_ids:
                    continue  # const entries come with the program
                tname = old_table.name
                entity.table_entry.table_id = table_ids[tname]
                updates.append((Update.INSERT, entity))
            elif which == "packet_replication_engine_entry":
                updates.append((Update.INSERT, entity))
        with self.switch.lock:
            for kind, entity in updates:
                try:
                    self._write_one(kind, entity)
                except P4RuntimeError as exc:
                    errors.append(exc.message)
            for name, reg in old_switch.registers.items():
                target = self.switch.registers.get(name)
                if target is not None and target.size == reg.size:
                    target.values[:] = [v & ((1 << target.bitwidth) - 1) for v in reg.values]
            for name, ctr in old_switch.counters.items():
                target = self.switch.counters.get(name)
                if target is not None and not ctr.is_direct and not target.is_direct \
                        and target.size == ctr.size:
                    target.packets[:], target.bytes[:] = ctr.packets, ctr.bytes
        if errors:
            raise failed(code_pb2.UNKNOWN, f"Error when reconciling config: {errors[0]}")

    def _snapshot(self) -> list[pb.Entity]:
        request = pb.ReadRequest()
        request.entities.add().table_entry.counter_data.SetInParent()
        pre = request.entities.add().packet_replication_engine_entry
        pre.multicast_group_entry.SetInParent()
        request.entities.add().packet_replication_engine_entry.clone_session_entry.SetInParent()
        entities, error = self.read(request)
        if error is not None:
            raise failed(code_pb2.UNKNOWN, f"Error when reconciling config: {error.message}")
        return entities

    def get_pipeline(self, response_type: int) -> pb.ForwardingPipelineConfig:
        with self.lock:
            out = pb.ForwardingPipelineConfig()
            if self.pipeline is None:
                return out
            saved = self.pipeline.config
            if response_type == GetType.ALL:
                out.p4info.CopyFrom(saved.p4info)
                out.p4_device_config = saved.p4_device_config
            elif response_type == GetType.P4INFO_AND_COOKIE:
                out.p4info.CopyFrom(saved.p4info)
            elif response_type == GetType.DEVICE_CONFIG_AND_COOKIE:
                out.p4_device_config = saved.p4_device_config
            elif response_type != GetType.COOKIE_ONLY:
                raise invalid("Invalid response_type in GetForwardingPipelineConfigRequest")
            if saved.HasField("cookie"):
                out.cookie.CopyFrom(saved.cookie)
            return out

    # -- write ----------------------------------------------------------------------------------

    def write(self, request: pb.WriteRequest) -> list[P4RuntimeError | None]:
        """One result per update (None = success); raises for request-level errors."""
        with self.lock, self._switch_lock():
            if request.atomicity != pb.WriteRequest.CONTINUE_ON_ERROR:
                raise failed(code_pb2.UNIMPLEMENTED,
                             "Support for atomic write modes has not been implemented yet")
            results: list[P4RuntimeError | None] = []
            for update in request.updates:
                try:
                    self._write_one(update.type, update.entity)
                    results.append(None)
                except P4RuntimeError as exc:
                    results.append(exc)
            return results

    def _write_one(self, kind: int, entity: pb.Entity) -> None:
        which = entity.WhichOneof("entity")
        if which == "table_entry":
            self._table_write(kind, entity.table_entry)
        elif which == "counter_entry":
            self._counter_write(kind, entity.counter_entry)
        elif which == "direct_counter_entry":
            self._direct_counter_write(kind, entity.direct_counter_entry)
        elif which == "register_entry":
            self._register_write(kind, entity.register_entry)
        elif which == "packet_replication_engine_entry":
            self.replication.write(kind, entity.packet_replication_engine_entry)
        elif which in ("meter_entry", "direct_meter_entry", "action_profile_member",
                       "action_profile_group"):
            raise invalid("Invalid P4 id")  # the pipeline can have none of these
        elif which == "value_set_entry":
            raise failed(code_pb2.UNIMPLEMENTED, "ValueSet writes are not supported yet")
        elif which == "extern_entry":
            raise failed(code_pb2.UNIMPLEMENTED, "No extern support yet")
        elif which == "digest_entry":
            raise invalid("Invalid P4 id")
        else:
            raise failed(code_pb2.UNKNOWN, "Incorrect entity type")

    # -- tables ---------------------------------------------------------------------------------

    def _check_id(self, p4_id: int, prefix: int) -> None:
        if p4_id >> 24 != prefix:
            raise invalid_id()

    def _table_write(self, kind: int, entry: pb.TableEntry) -> None:
        self._check_id(entry.table_id, TABLE)
        t = self.pipeline.index.table(entry.table_id)
        if entry.HasField("time_since_last_hit"):
            raise invalid("has_time_since_last_hit must not be set in WriteRequest")
        check_update_type(kind)
        table = self.switch.tables[t.name]
        if kind == Update.INSERT:
            self._table_insert(t, table, entry)
        elif kind == Update.MODIFY:
            self._table_modify(t, table, entry)
        else:
            self._table_delete(t, table, entry)

    def _match(self, t: TableMap, entry: pb.TableEntry) -> tuple[list, int]:
        """The match key in the table API's form, and the priority (PI's construct_match_key)."""
        if entry.is_default_action:
            if len(entry.match):
                raise invalid("Non-empty key for default entry")
            if entry.priority != 0:
                raise invalid("Non-zero priority for default entry")
            return [], 0
        if len(entry.match) > len(t.fields):
            raise invalid("Too many fields in match key")
        given = {}
        for mf in entry.match:
            given.setdefault(mf.field_id, mf)
        values: list[object] = []
        matched = 0
        for f in t.fields:
            mf = given.get(f.id)
            if mf is None:
                if f.match_type in (MatchType.LPM, MatchType.TERNARY, MatchType.OPTIONAL,
                                    MatchType.RANGE):
                    values.append(None)
                    continue
                raise invalid("Missing non-ternary field in match key")
            matched += 1
            values.append(self._field_value(f, mf))
        if matched != len(entry.match):
            raise invalid("Unknown field in match key")
        if not t.needs_priority and entry.priority > 0:
            raise invalid("Non-zero priority for non-ternary match")
        if t.needs_priority and entry.priority == 0:
            raise invalid("Zero priority for ternary match")
        if t.needs_priority and not 0 < entry.priority <= BM_MAX_PRIORITY:
            raise invalid("Invalid priority value")
        return values, entry.priority

    @staticmethod
    def _field_value(f, mf: pb.FieldMatch) -> object:
        kind = mf.WhichOneof("field_match_type")
        width, s = f.bitwidth, f.shift
        full = (1 << width) - 1
        if f.match_type == MatchType.EXACT:
            if kind != "exact":
                raise invalid("Invalid match type")
            return to_int(mf.exact.value, width) << s
        if f.match_type == MatchType.LPM:
            if kind != "lpm":
                raise invalid("Invalid match type")
            value = to_int(mf.lpm.value, width)
            plen = mf.lpm.prefix_len
            if plen < 0:
                raise invalid("Prefix length cannot be < 0")
            if plen > width:
                raise invalid("Prefix length cannot be > bitwidth")
            if plen == 0:
                raise invalid("Invalid reprsentation of 'don't care' LPM match, omit match "
                              "field instead of using a prefix length of 0")
            if value & ((1 << (width - plen)) - 1):
                raise invalid("Invalid LPM value, incorrect number of trailing zeros")
            return (value, plen)
        if f.match_type == MatchType.TERNARY:
            if kind != "ternary":
                raise invalid("Invalid match type")
            value = to_int(mf.ternary.value, width)
            mask = to_int(mf.ternary.mask, width)
            if mask == 0:
                raise invalid("Invalid representation of 'don't care' ternary match, omit match "
                              "field instead of using 0 mask")
            if value & mask != value:
                raise invalid("Invalid ternary value, make sure value & mask == value")
            return (value << s, mask << s)
        if f.match_type == MatchType.RANGE:
            if kind != "range":
                raise invalid("Invalid match type")
            low, high = to_int(mf.range.low, width), to_int(mf.range.high, width)
            if low == 0 and high == full:
                raise invalid("Invalid representation of 'don't care' range match, omit match "
                              "field instead of using low=0 and high=2**bitwidth-1")
            if low > high:
                raise invalid("Invalid range value, make sure low <= high")
            return (low << s, high << s)
        if f.match_type == MatchType.OPTIONAL:
            if kind != "optional":
                raise invalid("Invalid match type")
            return (to_int(mf.optional.value, width) << s, full << s)
        raise invalid("Invalid match type")

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
        if action_id >> 24 != ACTION or action_id not in self.pipeline.index.actions:
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
        unit = self.pipeline.index.direct_counters[t.direct_counter_id].unit
        packets = data.packet_count if unit in (Unit.PACKETS, Unit.BOTH) else old_packets
        nbytes = data.byte_count if unit in (Unit.BYTES, Unit.BOTH) else old_bytes
        table.set_counter(handle, packets, nbytes)

    def _find_handle(self, t: TableMap, table: MatchTable, match: list, priority: int
                     ) -> int | None:
        e = table.find(match, priority or None)
        if e is None or e.handle not in self._entries[t.id]:
            return None  # const entries are unknown to P4Runtime, as in PI
        return e.handle

    def _table_insert(self, t: TableMap, table: MatchTable, entry: pb.TableEntry) -> None:
        if entry.is_default_action:
            raise invalid("Cannot use INSERT for default entry")
        if not entry.HasField("action"):
            raise invalid("'action' field must be set")
        match, priority = self._match(t, entry)
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

    def _table_modify(self, t: TableMap, table: MatchTable, entry: pb.TableEntry) -> None:
        match, priority = self._match(t, entry)
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

    def _table_delete(self, t: TableMap, table: MatchTable, entry: pb.TableEntry) -> None:
        if entry.is_default_action:
            raise invalid("Cannot use DELETE for default entry")
        match, priority = self._match(t, entry)
        handle = self._find_handle(t, table, match, priority)
        if handle is None:
            raise failed(code_pb2.NOT_FOUND, "Cannot find match entry")
        try:
            table.delete(handle)
        except TableError as exc:
            raise failed(code_pb2.UNKNOWN,
                         f"Error when deleting match entry in target: {exc}") from None
        del self._entries[t.id][handle]

    # -- counters and registers -----------------------------------------------------------------

    def _counter_write(self, kind: int, entry: pb.CounterEntry) -> None:
        c = self._counter(entry.counter_id)
        if not entry.HasField("index"):
            raise failed(code_pb2.UNIMPLEMENTED,
                         "Wildcard write is not supported for indirect counters yet")
        index = entry.index.index
        if index < 0:
            raise invalid("A negative number is not a valid index value")
        check_update_type(kind)
        if kind == Update.INSERT:
            raise invalid("INSERT update type not supported for counters")
        ctr = self.switch.counters[c.name]
        try:
            if kind == Update.DELETE:
                ctr.write(index, 0, 0)
                return
            old_packets, old_bytes = ctr.read(index)
            packets = entry.data.packet_count if c.unit in (Unit.PACKETS, Unit.BOTH) \
                else old_packets
            nbytes = entry.data.byte_count if c.unit in (Unit.BYTES, Unit.BOTH) else old_bytes
            ctr.write(index, packets, nbytes)
        except StateError:
            raise failed(code_pb2.UNKNOWN, "Error when writing to counter") from None

    def _counter(self, counter_id: int):
        self._check_id(counter_id, COUNTER)
        c = self.pipeline.index.counters.get(counter_id)
        if c is None:
            raise invalid_id()
        return c

    def _direct_counter_write(self, kind: int, entry: pb.DirectCounterEntry) -> None:
        if not entry.HasField("table_entry"):
            raise invalid("Missing table_entry field in DirectCounterEntry")
        te = entry.table_entry
        self._check_id(te.table_id, TABLE)
        t = self.pipeline.index.table(te.table_id)
        table = self.switch.tables[t.name]
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
        match, priority = self._match(t, te)
        if te.is_default_action:
            return None
        handle = self._find_handle(t, table, match, priority)
        if handle is None:
            raise invalid("Cannot map table entry to handle")
        return handle

    def _register_write(self, kind: int, entry: pb.RegisterEntry) -> None:
        if not self.register_access:
            raise failed(code_pb2.UNIMPLEMENTED, "Register writes are not supported yet")
        r = self._register(entry.register_id)
        check_update_type(kind)
        if kind != Update.MODIFY:
            raise invalid("Only MODIFY updates are supported for registers")
        if entry.data.WhichOneof("data") != "bitstring":
            raise invalid("Register data must be a bitstring")
        value = to_int(entry.data.bitstring, r.bitwidth)
        reg = self.switch.registers[r.name]
        if not entry.HasField("index"):
            reg.values[:] = [value] * reg.size
            return
        if not 0 <= entry.index.index < r.size:
            raise failed(code_pb2.OUT_OF_RANGE, "Register index is out of range")
        reg.write(entry.index.index, value)

    def _register(self, register_id: int):
        self._check_id(register_id, REGISTER)
        r = self.pipeline.index.registers.get(register_id)
        if r is None:
            raise invalid_id()
        return r

    # -- read -----------------------------------------------------------------------------------

    def read(self, request: pb.ReadRequest) -> tuple[list[pb.Entity], P4RuntimeError | None]:
        """The entities read, and the error that stopped the read (PI returns what it read
        before the error together with the error)."""
        with self.lock, self._switch_lock():
            out: list[pb.Entity] = []
            try:
                for entity in request.entities:
                    self._read_one(entity, out)
            except P4RuntimeError as exc:
                return out, exc
            return out, None

    def _read_one(self, entity: pb.Entity, out: list[pb.Entity]) -> None:
        which = entity.WhichOneof("entity")
        if which == "table_entry":
            self._table_read(entity.table_entry, out)
        elif which == "counter_entry":
            self._counter_read(entity.counter_entry, out)
        elif which == "direct_counter_entry":
            self._direct_counter_read(entity.direct_counter_entry, out)
        elif which == "register_entry":
            self._register_read(entity.register_entry, out)
        elif which == "packet_replication_engine_entry":
            out.extend(self.replication.read(entity.packet_replication_engine_entry))
        elif which in ("meter_entry", "direct_meter_entry", "action_profile_member",
                       "action_profile_group"):
            pass  # the pipeline has none of these: a wildcard read returns nothing
        elif which == "value_set_entry":
            raise failed(code_pb2.UNIMPLEMENTED, "ValueSet reads are not supported yet")
        elif which == "digest_entry":
            pass
        else:
            raise failed(code_pb2.UNKNOWN, "Incorrect entity type")

    def _table_read(self, request: pb.TableEntry, out: list[pb.Entity]) -> None:
        index = self.pipeline.index
        if request.table_id == 0:
            for t in index.tables.values():
                self._table_read_one(t, request, out)
            return
        self._check_id(request.table_id, TABLE)
        self._table_read_one(index.table(request.table_id), request, out)

    def _table_read_one(self, t: TableMap, request: pb.TableEntry, out: list[pb.Entity]) -> None:
        table = self.switch.tables[t.name]
        if request.is_default_action:
            if request.HasField("time_since_last_hit"):
                raise invalid("Default table entries do not support entry ageing, do not set "
                              "'time_since_last_hit' in your ReadRequest")
            d = table.default_entry
            msg = _new(out).table_entry
            msg.table_id = t.id
            msg.is_default_action = True
            if d.action:
                self._fill_action(t, d, msg)
            if request.HasField("counter_data") and t.direct_counter_id:
                _set_counter_data(msg.counter_data, d.packets, d.bytes)
            info = self._defaults.get(t.id, _EntryInfo())
            msg.controller_metadata = info.controller_metadata
            msg.metadata = info.metadata
            return
        if request.HasField("time_since_last_hit"):
            raise invalid("Do not set time_since_last_hit for a ReadRequest if the table does not "
                          "support idle timeout; yes, that includes wildcard reads")
        if len(request.match):
            match, priority = self._match(t, request)
            e = table.find(match, priority or None)
            entries = [] if e is None else [e]
        else:
            entries = table.entries()
        for e in entries:
            msg = _new(out).table_entry
            self._fill_entry(t, e, msg)
            if request.HasField("counter_data") and t.direct_counter_id:
                _set_counter_data(msg.counter_data, e.packets, e.bytes)
            if t.is_const:
                continue
            info = self._entries[t.id].get(e.handle, _EntryInfo())
            msg.controller_metadata = info.controller_metadata
            msg.metadata = info.metadata
            msg.idle_timeout_ns = info.idle_timeout_ns

    def _fill_entry(self, t: TableMap, e, msg: pb.TableEntry) -> None:
        msg.table_id = t.id
        if t.needs_priority and e.priority > 0:
            msg.priority = e.priority
        keys = t.spec.keys
        for f in t.fields:
            value = e.match[keys[f.key_index].name]
            if value is None:
                continue  # wildcard: omitted, as PI does
            width_mask = (1 << keys[f.key_index].width) - 1
            mf = msg.match.add()
            mf.field_id = f.id
            s = f.shift
            if f.match_type == MatchType.EXACT:
                mf.exact.value = to_bytes(value >> s)
            elif f.match_type == MatchType.LPM:
                mf.lpm.value = to_bytes(value[0])
                mf.lpm.prefix_len = value[1]
            elif f.match_type == MatchType.TERNARY:
                mf.ternary.value = to_bytes(value[0] >> s)
                mf.ternary.mask = to_bytes((value[1] & width_mask) >> s)
            elif f.match_type == MatchType.RANGE:
                mf.range.low = to_bytes(value[0] >> s)
                mf.range.high = to_bytes(value[1] >> s)
            else:
                mf.optional.value = to_bytes(value[0] >> s)
        self._fill_action(t, e, msg)

    def _fill_action(self, t: TableMap, e, msg: pb.TableEntry) -> None:
        for aid, (amap, _) in t.actions.items():
            if amap.name == e.action:
                msg.action.action.action_id = aid
                for pid, (pname, _) in amap.params.items():
                    p = msg.action.action.params.add()
                    p.param_id = pid
                    p.value = to_bytes(e.params[pname])
                return

    def _counter_read(self, request: pb.CounterEntry, out: list[pb.Entity]) -> None:
        index = self.pipeline.index
        counters = list(index.counters.values()) if request.counter_id == 0 else \
            [self._counter(request.counter_id)]
        for c in counters:
            ctr = self.switch.counters[c.name]
            if request.HasField("index"):
                if request.index.index < 0:
                    raise invalid("A negative number is not a valid index value")
                indices = [request.index.index]
            else:
                indices = range(c.size)
            for i in indices:
                try:
                    packets, nbytes = ctr.read(i)
                except StateError:
                    raise failed(code_pb2.UNKNOWN,
                                 "Error when reading counter from target") from None
                msg = _new(out).counter_entry
                msg.counter_id = c.id
                msg.index.index = i
                _set_counter_data(msg.data, packets, nbytes)

    def _direct_counter_read(self, request: pb.DirectCounterEntry,
                             out: list[pb.Entity]) -> None:
        if not request.HasField("table_entry"):
            raise invalid("Missing table_entry field in DirectCounterEntry")
        te = request.table_entry
        if te.table_id == 0:
            raise failed(code_pb2.UNIMPLEMENTED,
                         "Reading all direct counters for ALL tables is not supported yet")
        self._check_id(te.table_id, TABLE)
        t = self.pipeline.index.table(te.table_id)
        if not t.direct_counter_id:
            raise invalid("Table has no direct counters")
        table = self.switch.tables[t.name]
        if len(te.match) or te.is_default_action:
            handle = self._handle_for(t, table, te)
            packets, nbytes = table.counter(handle)
            msg = _new(out).direct_counter_entry
            msg.table_entry.CopyFrom(te)
            _set_counter_data(msg.data, packets, nbytes)
            return
        for e in table.entries():
            msg = _new(out).direct_counter_entry
            msg.table_entry.table_id = t.id
            self._fill_entry(t, e, msg.table_entry)
            msg.table_entry.ClearField("action")
            _set_counter_data(msg.data, e.packets, e.bytes)

    def _register_read(self, request: pb.RegisterEntry, out: list[pb.Entity]) -> None:
        if not self.register_access:
            raise failed(code_pb2.UNIMPLEMENTED, "Register reads are not supported yet")
        index = self.pipeline.index
        registers = list(index.registers.values()) if request.register_id == 0 else \
            [self._register(request.register_id)]
        for r in registers:
            values = self.switch.registers[r.name].values
            if request.HasField("index"):
                i = request.index.index
                if not 0 <= i < r.size:
                    raise failed(code_pb2.OUT_OF_RANGE, "Register index is out of range")
                cells = [(i, values[i])]
            else:
                cells = list(enumerate(values))
            for i, v in cells:
                msg = _new(out).register_entry
                msg.register_id = r.id
                msg.index.index = i
                msg.data.bitstring = to_bytes(v)


def _new(out: list[pb.Entity]) -> pb.Entity:
    entity = pb.Entity()
    out.append(entity)
    return entity


def _set_counter_data(data: pb.CounterData, packets: int, nbytes: int) -> None:
    """Both counts, whatever the counter's unit: bmv2 counts packets and bytes of every counter
    and PI reports both, so a packets-only counter reads with its bytes there too."""
    data.packet_count = packets
    data.byte_count = nbytes

"""Match-action tables: control-plane entry management, default entries and direct counters.

The per-packet lookup is the table's match unit (match_units.py), an index kept in step with the
entries; handles are reused smallest first, as bmv2 reuses them.

Priorities in this API are P4Runtime priorities (a larger number wins).  bmv2's own convention is
the opposite; const entries from the JSON carry bmv2 priorities and are converted the way
simple_switch_grpc's PI layer converts them (``2**31 - 1 - bmv2_priority``).

The table key is one int: the key elements' values concatenated, most significant first.  An entry
is a ``(mask, value)`` over that int plus, for range elements, a list of bounds (match_keys.py
checks and compiles the match the control plane gives).
"""

from __future__ import annotations

import heapq
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from .codegen import ActionInfo
from .errors import TableError
from .expressions import parse_hexstr
from .match_keys import (
    MatchSpec,
    check_priority,
    compile_match,
    const_entry_match,
    match_view,
    normalize_match,
)
from .match_units import MATCH_UNITS
from .program import Program, TableSpec


@dataclass(frozen=True)
class TableEntry:
    """A read-only view of one entry (or of the default entry, whose ``handle`` is None)."""

    handle: int | None
    match: dict[str, object]
    priority: int
    action: str
    params: dict[str, int]
    packets: int
    bytes: int
    is_const: bool


class _Entry:
    __slots__ = ("handle", "fields", "priority", "mask", "value", "ranges", "action", "fn", "data",
                 "next", "packets", "bytes", "is_const", "identity")

    def __init__(self) -> None:
        self.packets = 0
        self.bytes = 0


def _noop(F, V, p, D):  # the action of a table with no default entry in the JSON
    return None


class MatchTable:
    """One P4 table.  All control operations take the switch lock."""

    def __init__(self, spec: TableSpec, program: Program, namespace: dict,
                 lock: threading.RLock):
        self.spec = spec
        self.name = spec.name
        self._program = program
        self._namespace = namespace
        self._lock = lock
        self._entries: dict[int, _Entry] = {}
        self._by_identity: dict[tuple, _Entry] = {}
        self._free_handles: list[int] = []
        self._next_handle = 0
        self._immutable = False
        self._count = spec.direct_counter is not None
        self._nodes: dict[str, Callable] = {}
        self._unit = MATCH_UNITS[spec.match_type]()
        #: key (the concatenated key elements) -> matching entry or None; generated code calls it
        self.lookup = self._unit.lookup
        self.default = _Entry()
        self._default_default = (None, ())

    # -- wiring (done once by the switch) -------------------------------------------------------

    def resolve(self, nodes: dict[str, Callable]) -> None:
        """Bind control-flow node names to their functions (needed where the next node depends
        on the action run), then install the JSON's default and const entries (bmv2 does this
        at load time too)."""
        self._nodes = nodes
        spec = self.spec
        d = spec.default_entry
        if d is not None:
            self._default_default = (d.action_id, d.data)
        self._install_default(*self._default_default)
        self.default.is_const = bool(d and d.entry_const)
        for node in spec.const_entries:
            self._add_const(node)
        if spec.const_entries:
            self._immutable = True

    def _node(self, name: str | None) -> Callable | None:
        return None if name is None else self._nodes.get(name)

    def _next_for(self, action_id: int, default: bool) -> Callable | None:
        spec = self.spec
        if spec.next_by_action is None:
            return self._node(spec.next_miss if default else spec.next_hit)
        return self._node(spec.next_by_action[action_id])

    def _install_default(self, action_id: int | None, data: tuple) -> None:
        e = self.default
        e.handle = None
        e.fields = ()
        e.priority = 0
        e.identity = None
        if action_id is None:
            e.action, e.fn, e.data = None, _noop, ()
            e.next = self._node(self.spec.base_default_next if self.spec.next_by_action is not None
                                else self.spec.next_miss)
        else:
            info = self._program.actions[action_id]
            e.action, e.fn, e.data = info, self._namespace[info.fname], data
            e.next = self._next_for(action_id, True)

    # -- actions --------------------------------------------------------------------------------

    def _action(self, name: str) -> ActionInfo:
        try:
            return self._program.action_by_name(self.spec, name)
        except KeyError:
            raise TableError("INVALID_ACTION_NAME", f"action {name!r} is not an action of table "
                             f"{self.name!r}") from None

    @staticmethod
    def _action_data(info: ActionInfo, params: Mapping[str, int] | Sequence[int] | None) -> tuple:
        if params is None:
            params = {}
        if isinstance(params, Mapping):
            unknown = set(params) - {n for n, _ in info.params}
            if unknown or len(params) != len(info.params):
                raise TableError("BAD_ACTION_DATA", f"action {info.name!r} takes parameters "
                                 f"{[n for n, _ in info.params]}, got {sorted(params)}")
            values = [params[n] for n, _ in info.params]
        else:
            values = list(params)
            if len(values) != len(info.params):
                raise TableError("BAD_ACTION_DATA", f"action {info.name!r} takes "
                                 f"{len(info.params)} parameters, got {len(values)}")
        for (pname, width), v in zip(info.params, values, strict=True):
            if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < (1 << width):
                raise TableError("BAD_ACTION_DATA", f"value {v!r} of parameter {pname!r} does "
                                 f"not fit in {width} bits")
        return tuple(values)

    # -- control operations ---------------------------------------------------------------------

    def add(self, match: MatchSpec | None, action: str,
            params: Mapping[str, int] | Sequence[int] | None = None,
            priority: int | None = None) -> int:
        """Add an entry; returns its handle."""
        with self._lock:
            if self._immutable:
                raise TableError("IMMUTABLE_TABLE_ENTRIES", f"table {self.name!r} has const "
                                 "entries and cannot be modified")
            return self._insert(normalize_match(self.spec, match),
                                check_priority(self.spec, priority), self._action(action), params,
                                False)

    def _insert(self, fields: list[tuple], priority: int, info: ActionInfo, params,
                is_const: bool) -> int:
        data = self._action_data(info, params)
        mask, value, ranges = compile_match(self.spec.keys, fields)
        identity = self._unit.identity(mask, value, ranges, priority)
        if identity in self._by_identity:
            raise TableError("DUPLICATE_ENTRY", f"table {self.name!r} already has an entry "
                             "with this match key")
        if len(self._entries) >= self.spec.max_size:
            raise TableError("TABLE_FULL", f"table {self.name!r} is full "
                             f"({self.spec.max_size} entries)")
        e = _Entry()
        e.handle = heapq.heappop(self._free_handles) if self._free_handles else self._next_handle
        if e.handle == self._next_handle:
            self._next_handle += 1
        e.fields, e.priority, e.mask, e.value, e.ranges = tuple(fields), priority, mask, value, \
            ranges
        e.identity, e.is_const = identity, is_const
        self._set_action(e, info, data)
        self._entries[e.handle] = e
        self._by_identity[identity] = e
        self._unit.add(e)
        return e.handle

    def _set_action(self, e: _Entry, info: ActionInfo, data: tuple) -> None:
        e.action, e.fn, e.data = info, self._namespace[info.fname], data
        e.next = self._next_for(info.id, False)

    def _add_const(self, node: dict) -> None:
        """An entry of the JSON ``entries`` list."""
        fields, priority = const_entry_match(self.spec, node)
        act = node["action_entry"]
        info = self._program.actions[int(act["action_id"])]
        data = [parse_hexstr(x) for x in act.get("action_data", [])]
        self._insert(fields, priority, info, data, True)

    def _find(self, match: MatchSpec | int, priority: int | None) -> _Entry:
        if isinstance(match, int) and not isinstance(match, bool):
            e = self._entries.get(match)
            if e is None:
                raise TableError("INVALID_HANDLE", f"table {self.name!r} has no entry with "
                                 f"handle {match}")
            return e
        fields = normalize_match(self.spec, match)
        mask, value, ranges = compile_match(self.spec.keys, fields)
        e = self._by_identity.get(self._unit.identity(mask, value, ranges,
                                                      check_priority(self.spec, priority)))
        if e is None:
            raise TableError("INVALID_HANDLE", f"table {self.name!r} has no entry with this "
                             "match key")
        return e

    def modify(self, match: MatchSpec | int, action: str,
               params: Mapping[str, int] | Sequence[int] | None = None,
               priority: int | None = None) -> None:
        """Change the action of the entry given by handle or by match key (+ priority)."""
        with self._lock:
            if self._immutable:
                raise TableError("IMMUTABLE_TABLE_ENTRIES", f"table {self.name!r} has const "
                                 "entries and cannot be modified")
            e = self._find(match, priority)
            info = self._action(action)
            self._set_action(e, info, self._action_data(info, params))

    def delete(self, match: MatchSpec | int, priority: int | None = None) -> None:
        with self._lock:
            if self._immutable:
                raise TableError("IMMUTABLE_TABLE_ENTRIES", f"table {self.name!r} has const "
                                 "entries and cannot be modified")
            e = self._find(match, priority)
            self._remove(e)

    def _remove(self, e: _Entry) -> None:
        del self._entries[e.handle]
        del self._by_identity[e.identity]
        self._unit.remove(e)
        heapq.heappush(self._free_handles, e.handle)

    def clear(self) -> None:
        """Remove every entry (const entries stay)."""
        with self._lock:
            if self._immutable:
                return
            for e in list(self._entries.values()):
                self._remove(e)

    def find(self, match: MatchSpec, priority: int | None = None) -> TableEntry | None:
        with self._lock:
            try:
                return self._view(self._find(match, priority))
            except TableError:
                return None

    def set_default(self, action: str, params: Mapping[str, int] | Sequence[int] | None = None
                    ) -> None:
        with self._lock:
            d = self.spec.default_entry
            if d is not None and d.entry_const:
                raise TableError("DEFAULT_ENTRY_IS_CONST", f"the default entry of table "
                                 f"{self.name!r} is const")
            info = self._action(action)
            if d is not None and d.action_const and info.id != d.action_id:
                raise TableError("DEFAULT_ACTION_IS_CONST", f"the default action of table "
                                 f"{self.name!r} is const")
            self._install_default(info.id, self._action_data(info, params))

    def reset_default(self) -> None:
        with self._lock:
            self._install_default(*self._default_default)

    def reset(self) -> None:
        """Back to the state after loading: no runtime entries, JSON default entry."""
        with self._lock:
            self.clear()
            self._install_default(*self._default_default)

    @property
    def default_entry(self) -> TableEntry:
        with self._lock:
            return self._view(self.default)

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[TableEntry]:
        return iter(self.entries())

    def entries(self) -> list[TableEntry]:
        with self._lock:
            return [self._view(e) for _, e in sorted(self._entries.items())]

    def counter(self, handle: int | None) -> tuple[int, int]:
        """(packets, bytes) of the direct counter of an entry (None: the default entry)."""
        with self._lock:
            e = self.default if handle is None else self._find(handle, None)
            return e.packets, e.bytes

    def set_counter(self, handle: int | None, packets: int, nbytes: int) -> None:
        with self._lock:
            e = self.default if handle is None else self._find(handle, None)
            e.packets, e.bytes = packets, nbytes

    def reset_counters(self) -> None:
        with self._lock:
            for e in list(self._entries.values()) + [self.default]:
                e.packets = e.bytes = 0

    def _view(self, e: _Entry) -> TableEntry:
        match = match_view(self.spec.keys, e.fields) if e is not self.default else {}
        info = e.action
        params = ({} if info is None
                  else {n: v for (n, _), v in zip(info.params, e.data, strict=True)})
        return TableEntry(e.handle, match, e.priority, "" if info is None else info.name, params,
                          e.packets, e.bytes, bool(e.is_const))

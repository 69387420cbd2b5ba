"""The P4Info of a pushed pipeline, indexed by id and tied to the bmv2 JSON objects it names.

p4c gives every P4Runtime object the same control-plane name in the P4Info and in the bmv2 JSON
(``MyIngress.fwd``, ``MyIngress.fwd.set_port``...), so objects are paired by name; match fields and
action parameters are paired by position, which p4c keeps identical in both outputs.

Also the errors (:class:`P4RuntimeError`, ``failed``, ``invalid``), checks and bytestring
conversions that every part of the device shares.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from google.rpc import code_pb2
from p4.config.v1 import p4info_pb2
from p4.v1 import p4runtime_pb2

from ..core.program import Program, TableSpec

# P4Runtime id prefixes (most significant byte of an id).
ACTION, TABLE, COUNTER, DIRECT_COUNTER, METER, DIRECT_METER, REGISTER = (
    0x01, 0x02, 0x12, 0x13, 0x14, 0x15, 0x16)

MatchType = p4info_pb2.MatchField.MatchType
Scope = p4info_pb2.ActionRef.Scope
Unit = p4info_pb2.CounterSpec.Unit


class P4RuntimeError(Exception):
    """A request failed; ``code`` is a ``google.rpc.Code`` value."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


def failed(code: int, message: str) -> P4RuntimeError:
    return P4RuntimeError(code, message)


def invalid(message: str) -> P4RuntimeError:
    return P4RuntimeError(code_pb2.INVALID_ARGUMENT, message)


def invalid_id() -> P4RuntimeError:
    return invalid("Invalid P4 id")


def check_id(p4_id: int, prefix: int) -> None:
    """An id whose most significant byte names another kind of object is an invalid id."""
    if p4_id >> 24 != prefix:
        raise invalid_id()


def check_update_type(kind: int) -> None:
    if kind == p4runtime_pb2.Update.UNSPECIFIED:
        raise invalid("Update type is not set")
    if kind not in (p4runtime_pb2.Update.INSERT, p4runtime_pb2.Update.MODIFY,
                    p4runtime_pb2.Update.DELETE):
        raise invalid("Invalid update type")


def to_int(data: bytes, bitwidth: int) -> int:
    """A P4Runtime bytestring as an unsigned value; non-canonical forms (leading zero bytes,
    fewer bytes than the width needs) are accepted, as PI accepts them."""
    value = int.from_bytes(data, "big")
    if value >> bitwidth:
        raise invalid(f"Bytestring provided does not fit within {bitwidth} bits")
    return value


def to_bytes(value: int) -> bytes:
    """Canonical P4Runtime bytestring (no leading zero bytes, at least one byte)."""
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


def new_entity(out: list[p4runtime_pb2.Entity]) -> p4runtime_pb2.Entity:
    """A new entity of a ReadResponse, appended to ``out``."""
    entity = p4runtime_pb2.Entity()
    out.append(entity)
    return entity


def set_counter_data(data: p4runtime_pb2.CounterData, packets: int, nbytes: int) -> None:
    """Both counts, whatever the counter's unit: bmv2 counts packets and bytes of every counter
    and PI reports both, so a packets-only counter reads with its bytes there too."""
    data.packet_count = packets
    data.byte_count = nbytes


def _name(preamble_name: str) -> str:
    return preamble_name.lstrip(".")


@dataclass
class MatchFieldMap:
    id: int
    name: str
    bitwidth: int
    match_type: int
    key_index: int
    shift: int  # a key on a slice: P4Runtime values are the slice, the JSON key the whole field


@dataclass
class ActionMap:
    id: int
    name: str
    params: dict[int, tuple[str, int]]  # param id -> (name, bitwidth)


@dataclass
class TableMap:
    id: int
    name: str
    spec: TableSpec
    fields: list[MatchFieldMap]
    actions: dict[int, tuple[ActionMap, int]]  # action id -> (action, scope)
    const_default: bool
    is_const: bool
    direct_counter_id: int
    needs_priority: bool
    by_field_id: dict[int, MatchFieldMap] = field(default_factory=dict)


@dataclass
class CounterMap:
    id: int
    name: str
    unit: int
    size: int


@dataclass
class DirectCounterMap:
    id: int
    name: str
    table_id: int
    unit: int


@dataclass
class RegisterMap:
    id: int
    name: str
    bitwidth: int
    size: int


@dataclass
class PacketMetadataMap:
    """A ``@controller_header`` (packet_in / packet_out): fields in order, packed MSB first."""

    fields: list[tuple[int, str, int]]  # (id, name, bitwidth)

    @property
    def nbytes(self) -> int:
        return (sum(w for _, _, w in self.fields) + 7) // 8

    def unpack(self, frame: bytes) -> tuple[list[tuple[int, int]], bytes] | None:
        n = self.nbytes
        if len(frame) < n:
            return None
        header = int.from_bytes(frame[:n], "big")
        values, shift = [], n * 8
        for fid, _, width in self.fields:
            shift -= width
            values.append((fid, (header >> shift) & ((1 << width) - 1)))
        return values, frame[n:]

    def pack(self, values: dict[int, int]) -> bytes:
        n = self.nbytes
        header, shift = 0, n * 8
        for fid, _, width in self.fields:
            shift -= width
            header |= values.get(fid, 0) << shift
        return header.to_bytes(n, "big")


class PipelineIndex:
    """Raises ``ValueError`` naming the first P4Info object the program does not have."""

    def __init__(self, p4info: p4info_pb2.P4Info, program: Program):
        self.p4info = p4info
        self.program = program
        self.actions: dict[int, ActionMap] = {}
        for a in p4info.actions:
            params = {p.id: (p.name, p.bitwidth) for p in a.params}
            self.actions[a.preamble.id] = ActionMap(a.preamble.id, _name(a.preamble.name), params)
        self.direct_counters: dict[int, DirectCounterMap] = {}
        for c in p4info.direct_counters:
            self.direct_counters[c.preamble.id] = DirectCounterMap(
                c.preamble.id, _name(c.preamble.name), c.direct_table_id, c.spec.unit)
        self.tables: dict[int, TableMap] = {}
        for t in p4info.tables:
            self.tables[t.preamble.id] = self._table(t)
        self.counters: dict[int, CounterMap] = {}
        for c in p4info.counters:
            name = _name(c.preamble.name)
            info = program.counters.get(name)
            if info is None or info.is_direct:
                raise ValueError(f"P4Info counter {name!r} is not an indirect counter of the "
                                 "bmv2 JSON")
            self.counters[c.preamble.id] = CounterMap(c.preamble.id, name, c.spec.unit, info.size)
        self.registers: dict[int, RegisterMap] = {}
        for r in p4info.registers:
            name = _name(r.preamble.name)
            reg = program.registers.get(name)
            if reg is None:
                raise ValueError(f"P4Info register {name!r} is not in the bmv2 JSON")
            self.registers[r.preamble.id] = RegisterMap(r.preamble.id, name, reg.bitwidth,
                                                        reg.size)
        if p4info.meters or p4info.direct_meters or p4info.action_profiles:
            raise ValueError("P4Info has meters or action profiles, which this target refuses")
        self.packet_in: PacketMetadataMap | None = None
        self.packet_out: PacketMetadataMap | None = None
        for m in p4info.controller_packet_metadata:
            meta = PacketMetadataMap([(f.id, f.name, f.bitwidth) for f in m.metadata])
            if m.preamble.name == "packet_in":
                self.packet_in = meta
            elif m.preamble.name == "packet_out":
                self.packet_out = meta

    def _table(self, t: p4info_pb2.Table) -> TableMap:
        name = _name(t.preamble.name)
        spec = self.program.tables.get(name)
        if spec is None:
            raise ValueError(f"P4Info table {name!r} is not in the bmv2 JSON")
        if len(t.match_fields) != len(spec.keys):
            raise ValueError(f"table {name!r}: P4Info has {len(t.match_fields)} match fields, the "
                             f"bmv2 JSON {len(spec.keys)}")
        fields = []
        for i, (mf, key) in enumerate(zip(t.match_fields, spec.keys, strict=True)):
            shift = 0
            if mf.bitwidth != key.width:
                mask = key.mask or 0
                shift = (mask & -mask).bit_length() - 1 if mask else 0
                contiguous = mask and (mask >> shift) == (1 << mf.bitwidth) - 1
                if not contiguous or mf.match_type == MatchType.LPM:
                    raise ValueError(f"table {name!r}: match field {mf.name!r} is {mf.bitwidth} "
                                     f"bits in the P4Info and {key.width} in the bmv2 JSON")
            fields.append(MatchFieldMap(mf.id, mf.name, mf.bitwidth, mf.match_type, i, shift))
        actions: dict[int, tuple[ActionMap, int]] = {}
        json_names = {self.program.actions[aid].name for aid in spec.action_ids}
        for ref in t.action_refs:
            action = self.actions.get(ref.id)
            if action is None or action.name not in json_names:
                raise ValueError(f"table {name!r}: P4Info action {ref.id} is not an action of "
                                 "the table in the bmv2 JSON")
            actions[ref.id] = (action, ref.scope)
        direct_counter_id = 0
        for rid in t.direct_resource_ids:
            if rid in self.direct_counters:
                direct_counter_id = rid
        needs_priority = any(f.match_type in (MatchType.TERNARY, MatchType.RANGE,
                                              MatchType.OPTIONAL) for f in fields)
        table = TableMap(t.preamble.id, name, spec, fields, actions, t.const_default_action_id != 0,
                         t.is_const_table, direct_counter_id, needs_priority)
        table.by_field_id = {f.id: f for f in fields}
        return table

    def table(self, table_id: int) -> TableMap:
        t = self.tables.get(table_id)
        if t is None:
            raise invalid_id()
        return t

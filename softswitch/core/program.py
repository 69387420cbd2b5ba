"""Load a bmv2 JSON program into a compiled form that no target is built into.

What a target needs of a program beyond the JSON's own objects (the metadata fields it reads and
writes by name, the parsers and pipelines it runs, the primitives its actions may call) it
declares in an :class:`Architecture`, as bmv2's targets declare their required fields to the
core; the loader checks the program against it and generates the code with its primitives.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from .codegen import (
    ActionInfo,
    ControlFlowGenerator,
    CounterInfo,
    ModuleGenerator,
    PrimitiveGenerator,
    RegisterInfo,
)
from .errors import ProgramError, UnsupportedConstruct
from .expressions import parse_hexstr
from .layout import VALID_FIELD, Field, Layout

SUPPORTED_MAJOR_VERSION = 2
MATCH_KINDS = ("exact", "lpm", "ternary", "range")

# Sections whose presence (non-empty) the core refuses, whatever the target, and why.
_REFUSED_SECTIONS = {
    "header_stacks": "header stacks",
    "header_union_types": "header unions",
    "header_unions": "header unions",
    "header_union_stacks": "header union stacks",
    "parse_vsets": "parser value sets",
    "meter_arrays": "meters",
    "learn_lists": "digests (learn lists)",
    "extern_instances": "extern instances",
}


@dataclass
class KeySpec:
    name: str
    match_type: str  # exact, lpm, ternary (also used for optional) or range
    field: Field
    mask: int | None  # static mask p4c puts on the key element (slices, '&' in the key)
    shift: int  # position of this element in the concatenated table key

    @property
    def width(self) -> int:
        return self.field.width


@dataclass
class DefaultEntrySpec:
    action_id: int
    data: tuple[int, ...]
    action_const: bool
    entry_const: bool


@dataclass
class TableSpec:
    name: str
    id: int
    pipeline: str
    match_type: str
    keys: list[KeySpec]
    action_ids: list[int]
    next_by_action: dict[int, str | None] | None  # None when next is decided by hit/miss
    next_hit: str | None
    next_miss: str | None
    base_default_next: str | None
    default_entry: DefaultEntrySpec | None
    const_entries: list[dict]
    max_size: int
    direct_counter: str | None
    node: dict = field(repr=False, default_factory=dict)

    @property
    def needs_priority(self) -> bool:
        return self.match_type in ("ternary", "range")


@dataclass
class Program:
    """A loaded program: the layout, the generated code and the specs of its runtime objects."""

    json: dict
    layout: Layout
    code: object  # compiled module code object
    source: str
    constants: dict
    codecs: dict
    actions: dict[int, ActionInfo]
    tables: dict[str, TableSpec]
    pipelines: dict[str, str | None]  # pipeline name -> its first node function (None: empty)
    node_functions: dict[str, str]  # control-flow node name -> its function, for join points
    registers: dict[str, RegisterInfo]
    counters: dict[str, CounterInfo]
    field_lists: dict[int, list[int]]
    parsers: dict[str, str]
    deparsers: dict[str, str]
    errors: dict[str, int]
    arch_fields: dict[str, Field | None]  # the architecture's field names -> field (or None)

    def action_by_name(self, table: TableSpec, name: str) -> ActionInfo:
        for aid in table.action_ids:
            if self.actions[aid].name == name:
                return self.actions[aid]
        raise KeyError(name)


@dataclass(frozen=True)
class Architecture:
    """What a target asks of the programs it runs."""

    name: str  # as messages name the target
    required_fields: tuple[str, ...]  # header.field names (field aliases apply) it must have
    optional_fields: tuple[str, ...]  # names it uses when the program has them
    parsers: tuple[str, ...]  # the parsers, deparsers and pipelines it runs, by name
    deparsers: tuple[str, ...]
    pipelines: tuple[str, ...]
    primitives: type[PrimitiveGenerator] = PrimitiveGenerator  # with the target's own primitives


def load_program(source: dict | str | bytes, arch: Architecture) -> Program:
    """Load bmv2 JSON (a parsed dict, or JSON text) for a target of architecture ``arch`` and
    compile it.  Raises :class:`~softswitch.core.errors.UnsupportedConstruct` for any construct
    the core or the target does not run."""
    if isinstance(source, (str, bytes, bytearray)):
        try:
            root = json.loads(source)
        except ValueError as exc:
            raise ProgramError(f"invalid JSON: {exc}") from None
    else:
        root = source
    if not isinstance(root, dict):
        raise ProgramError("bmv2 JSON must be an object")
    _check_version(root)
    for key, what in _REFUSED_SECTIONS.items():
        if root.get(key):
            first = root[key][0] if isinstance(root[key], list) else root[key]
            raise UnsupportedConstruct(what, first, f"JSON section {key!r} is not empty")

    layout = Layout(root)
    gen = ModuleGenerator(root, layout, arch.primitives)
    parsers, deparsers = gen.generate()

    tables: dict[str, TableSpec] = {}
    direct_bindings = {c.binding: c.name for c in gen.counters.values() if c.is_direct}
    pipes = root.get("pipelines", [])
    for pipe in pipes:
        if pipe.get("action_profiles"):
            raise UnsupportedConstruct("action profiles / selectors", pipe["action_profiles"][0])
        if pipe.get("action_calls"):
            raise UnsupportedConstruct("direct action calls in a control", pipe["action_calls"][0])
        for tnode in pipe.get("tables", []):
            spec = _table_spec(tnode, pipe["name"], layout, gen, direct_bindings)
            if spec.name in tables:
                raise ProgramError(f"duplicate table name {spec.name!r}", tnode)
            tables[spec.name] = spec
    pipelines, node_functions = ControlFlowGenerator(gen, pipes, tables).generate()

    arch_fields = {}
    for name in arch.required_fields:
        f = layout.find(name)
        if f is None:
            raise ProgramError(f"required field {name!r} is missing from the program")
        arch_fields[name] = f
    for name in arch.optional_fields:
        arch_fields[name] = layout.find(name)
    for what, names, needed in (("parser", parsers, arch.parsers),
                                ("deparser", deparsers, arch.deparsers),
                                ("pipeline", pipelines, arch.pipelines)):
        for n in needed:
            if n not in names:
                raise ProgramError(f"{arch.name} needs a {what} named {n!r}")

    source_text = gen.finish()
    code = compile(source_text, "<softswitch generated program>", "exec")
    return Program(root, layout, code, source_text, gen.constants, gen.codecs, gen.actions,
                   tables, pipelines, node_functions, gen.registers, gen.counters,
                   gen.field_lists, parsers, deparsers, gen.errors, arch_fields)


def _check_version(root: dict) -> None:
    meta = root.get("__meta__", {})
    version = meta.get("version")
    if version is None:
        raise ProgramError("bmv2 JSON has no __meta__.version (JSON format < 2.0)")
    if not isinstance(version, list) or len(version) != 2 or version[0] != SUPPORTED_MAJOR_VERSION:
        raise UnsupportedConstruct(f"bmv2 JSON format version {version}", meta)


def _table_spec(tnode: dict, pipeline: str, layout: Layout, gen: ModuleGenerator,
                direct_bindings: dict[str, str]) -> TableSpec:
    name = tnode["name"]
    if tnode.get("type", "simple") != "simple":
        raise UnsupportedConstruct(f"table implementation {tnode.get('type')!r} (action profiles)",
                                   tnode)
    if tnode.get("direct_meters"):
        raise UnsupportedConstruct("direct meters", tnode)
    if tnode.get("support_timeout"):
        raise UnsupportedConstruct("table entry ageing (support_timeout)", tnode)
    match_type = tnode.get("match_type", "exact")
    if match_type not in MATCH_KINDS:
        raise UnsupportedConstruct(f"table match type {match_type!r}", tnode)
    keys: list[KeySpec] = []
    for knode in tnode.get("key", []):
        kind = knode["match_type"]
        if kind not in MATCH_KINDS:
            raise UnsupportedConstruct(f"key match type {kind!r}", tnode)
        hname, fname = knode["target"]
        if fname == VALID_FIELD:
            raise UnsupportedConstruct("matching on a header's $valid$ field", tnode)
        f = layout.field(hname, fname, tnode)
        mask = knode.get("mask")
        keys.append(KeySpec(knode.get("name") or f"{hname}.{fname}", kind, f,
                            None if mask is None else parse_hexstr(mask, tnode), 0))
    if sum(k.match_type == "lpm" for k in keys) > 1:
        raise ProgramError(f"table {name!r} features 2 LPM match fields", tnode)
    shift = sum(k.width for k in keys)
    for k in keys:
        shift -= k.width
        k.shift = shift

    if "action_ids" in tnode:
        action_ids = [int(a) for a in tnode["action_ids"]]
    else:
        by_name = {a.name: a.id for a in gen.actions.values()}
        action_ids = [by_name[a] for a in tnode.get("actions", [])]
    for aid in action_ids:
        if aid not in gen.actions:
            raise ProgramError(f"table {name!r} refers to unknown action id {aid}", tnode)
    next_tables = tnode.get("next_tables", {})
    next_by_action = None
    next_hit = next_miss = None
    if "__HIT__" in next_tables or "__MISS__" in next_tables:
        if set(next_tables) != {"__HIT__", "__MISS__"}:
            raise ProgramError(f"table {name!r} mixes __HIT__/__MISS__ with other next tables",
                               tnode)
        next_hit, next_miss = next_tables["__HIT__"], next_tables["__MISS__"]
    else:
        next_by_action = {}
        for aid in action_ids:
            aname = gen.actions[aid].name
            if aname not in next_tables:
                raise ProgramError(f"table {name!r} has no next_tables entry for {aname!r}", tnode)
            next_by_action[aid] = next_tables[aname]
    base_default_next = tnode.get("base_default_next")

    default_entry = None
    if "default_entry" in tnode:
        d = tnode["default_entry"]
        aid = int(d["action_id"])
        if aid not in gen.actions:
            raise ProgramError(f"default entry of table {name!r} uses unknown action {aid}", tnode)
        data = tuple(parse_hexstr(x, tnode) for x in d.get("action_data", []))
        if len(data) != len(gen.actions[aid].params):
            raise ProgramError(f"default entry of table {name!r} has the wrong number of "
                               "action arguments", tnode)
        default_entry = DefaultEntrySpec(aid, data, bool(d.get("action_const")),
                                         bool(d.get("action_entry_const")))
    entries = tnode.get("entries", [])
    max_size = len(entries) if entries else int(tnode.get("max_size", 0))
    direct_counter = direct_bindings.get(name) if tnode.get("with_counters") else None
    return TableSpec(name, int(tnode["id"]), pipeline, match_type, keys, action_ids,
                     next_by_action, next_hit, next_miss, base_default_next, default_entry,
                     entries, max_size, direct_counter, tnode)

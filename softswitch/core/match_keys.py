"""Match specifications of the table API (tables.py): the match of an entry, given per key
element, checked against the element's width and compiled into ``(mask, value, ranges)`` over the
table key (the key elements concatenated, most significant first), as bmv2's match units check and
build their keys; the match of a const entry of the JSON; and the match of an entry read back.
Priorities are P4Runtime priorities (a larger number wins)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .errors import TableError
from .expressions import parse_hexstr
from .program import KeySpec, TableSpec

BM_MAX_PRIORITY = (1 << 31) - 1

MatchSpec = Mapping[str, object] | Sequence[object]


def normalize_match(spec: TableSpec, match: MatchSpec | None) -> list[tuple]:
    """Per key element: ('exact', v) | ('lpm', v, plen) | ('ternary', v, mask) |
    ('range', lo, hi), validated against the element's width."""
    keys = spec.keys
    if not keys:
        raise TableError("NO_TABLE_KEY", f"table {spec.name!r} has no key")
    if match is None:
        match = {}
    if isinstance(match, Mapping):
        unknown = set(match) - {k.name for k in keys}
        if unknown:
            raise TableError("BAD_MATCH_KEY", f"table {spec.name!r} has no key field(s) "
                             f"{sorted(unknown)}")
        values = [match.get(k.name) for k in keys]
    else:
        values = list(match)
        if len(values) != len(keys):
            raise TableError("BAD_MATCH_KEY", f"table {spec.name!r} expects {len(keys)} key "
                             f"fields, got {len(values)}")
    return [normalize_field(k, v) for k, v in zip(keys, values, strict=True)]


def normalize_field(k: KeySpec, v: object) -> tuple:
    full = (1 << k.width) - 1

    def check(x: object, what: str) -> int:
        if not isinstance(x, int) or isinstance(x, bool) or not 0 <= x <= full:
            raise TableError("BAD_MATCH_KEY", f"{what} {x!r} for key field {k.name!r} does "
                             f"not fit in {k.width} bits")
        return x

    if k.match_type == "exact":
        if v is None:
            raise TableError("BAD_MATCH_KEY", f"exact key field {k.name!r} is missing")
        return ("exact", check(v, "value"))
    if k.match_type == "lpm":
        if v is None:
            return ("lpm", 0, 0)
        value, plen = (v, k.width) if isinstance(v, int) else tuple(v)
        if not isinstance(plen, int) or not 0 <= plen <= k.width:
            raise TableError("BAD_MATCH_KEY", f"invalid prefix length {plen!r} for {k.name!r}")
        prefix_mask = full ^ ((1 << (k.width - plen)) - 1)
        if check(value, "value") & ~prefix_mask:
            raise TableError("BAD_MATCH_KEY", f"value {value:#x} of {k.name!r} has bits set "
                             f"beyond its /{plen} prefix")
        return ("lpm", value, plen)
    if k.match_type == "ternary":
        if v is None:
            return ("ternary", 0, 0)
        value, mask = (v, full) if isinstance(v, int) else tuple(v)
        check(value, "value")
        check(mask, "mask")
        if value & ~mask:
            raise TableError("BAD_MATCH_KEY", f"value {value:#x} of {k.name!r} has bits "
                             f"outside its mask {mask:#x}")
        return ("ternary", value, mask)
    if v is None:
        return ("range", 0, full)
    lo, hi = (v, v) if isinstance(v, int) else tuple(v)
    check(lo, "low bound")
    check(hi, "high bound")
    if lo > hi:
        raise TableError("BAD_MATCH_KEY", f"empty range [{lo}, {hi}] for {k.name!r}")
    return ("range", lo, hi)


def compile_match(keys: list[KeySpec], fields: list[tuple]) -> tuple[int, int, tuple]:
    """(mask, value, ranges) over the concatenated key for normalized match fields."""
    mask = value = 0
    ranges = []
    for k, f in zip(keys, fields, strict=True):
        full = (1 << k.width) - 1
        if f[0] == "exact":
            m, v = full, f[1]
        elif f[0] == "lpm":
            m, v = full ^ ((1 << (k.width - f[2])) - 1), f[1]
        elif f[0] == "ternary":
            m, v = f[2], f[1]
        else:
            m, v = 0, 0
            if (f[1], f[2]) != (0, full):
                ranges.append((k.shift, full, f[1], f[2]))
        mask |= m << k.shift
        value |= v << k.shift
    return mask, value, tuple(ranges)


def check_priority(spec: TableSpec, priority: int | None) -> int:
    if spec.needs_priority:
        if priority is None or not isinstance(priority, int) or not 1 <= priority <= \
                BM_MAX_PRIORITY:
            raise TableError("BAD_MATCH_KEY", f"table {spec.name!r} needs a priority in "
                             f"[1, {BM_MAX_PRIORITY}], got {priority!r}")
        return priority
    if priority not in (None, 0):
        raise TableError("BAD_MATCH_KEY", f"table {spec.name!r} ({spec.match_type} "
                         "match) does not take priorities")
    return 0


def const_entry_match(spec: TableSpec, node: dict) -> tuple[list[tuple], int]:
    """The normalized match and the priority of an entry of the JSON ``entries`` list, whose key
    is in hexstr form and whose priority is bmv2's (converted the way simple_switch_grpc's PI
    layer converts it)."""
    fields = []
    for k, m in zip(spec.keys, node["match_key"], strict=True):
        kind = m["match_type"]
        if kind == "exact":
            fields.append(normalize_field(k, parse_hexstr(m["key"])))
        elif kind == "lpm":
            fields.append(normalize_field(k, (parse_hexstr(m["key"]), int(m["prefix_length"]))))
        elif kind == "ternary":
            v, mask = parse_hexstr(m["key"]), parse_hexstr(m["mask"])
            fields.append(normalize_field(k, (v & mask, mask)))
        elif kind == "range":
            fields.append(normalize_field(k, (parse_hexstr(m["start"]), parse_hexstr(m["end"]))))
        else:
            raise TableError("BAD_MATCH_KEY", f"const entry match type {kind!r}")
    priority = BM_MAX_PRIORITY - int(node.get("priority", 0)) if spec.needs_priority else 0
    return fields, priority


def match_view(keys: list[KeySpec], fields: Sequence[tuple]) -> dict[str, object]:
    """A normalized match in the form the table API takes it, a wildcard as None."""
    match: dict[str, object] = {}
    for k, f in zip(keys, fields, strict=True):
        if f[0] == "exact":
            match[k.name] = f[1]
        elif f[0] in ("lpm", "ternary"):
            match[k.name] = None if f[2] == 0 else (f[1], f[2])
        else:
            match[k.name] = None if (f[1], f[2]) == (0, (1 << k.width) - 1) else (f[1], f[2])
    return match

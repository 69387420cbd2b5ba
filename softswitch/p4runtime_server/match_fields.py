"""Match keys between P4Runtime and the table API, both ways: the match fields of a
``TableEntry`` checked and converted as PI's ``construct_match_key`` does, and the match of a table
entry read back into match fields (a wildcard is omitted, as PI omits it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from p4.v1 import p4runtime_pb2 as pb

from ..core.match_keys import BM_MAX_PRIORITY
from .pipeline import MatchFieldMap, MatchType, TableMap, invalid, to_bytes, to_int

if TYPE_CHECKING:
    from ..core.tables import TableEntry


def match_key(t: TableMap, entry: pb.TableEntry) -> tuple[list, int]:
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
        values.append(field_value(f, mf))
    if matched != len(entry.match):
        raise invalid("Unknown field in match key")
    if not t.needs_priority and entry.priority > 0:
        raise invalid("Non-zero priority for non-ternary match")
    if t.needs_priority and entry.priority == 0:
        raise invalid("Zero priority for ternary match")
    if t.needs_priority and not 0 < entry.priority <= BM_MAX_PRIORITY:
        raise invalid("Invalid priority value")
    return values, entry.priority


def field_value(f: MatchFieldMap, mf: pb.FieldMatch) -> object:
    """One match field in the table API's form, shifted where the key is a slice."""
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


def fill_match(t: TableMap, e: TableEntry, msg: pb.TableEntry) -> None:
    """The priority and the match fields of ``e`` into ``msg``."""
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

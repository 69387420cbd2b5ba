"""BF Runtime's description of a switch's tables, read from BF Runtime JSON: the program's
(the committed p4src/tofino/compiled/bfrt.json) and the SDE's fixed tables.

The fixed tables are the SDE's (``share/bf_rt_shared/bf_rt_*_tf1.json`` of an SDE install);
where no SDE is installed, :data:`FIXED_TABLES` describes the ones the controller uses in the
same form (our own description of the SDE's published names and types; the real-client tests
check it against the SDE's files). The fake client and the BF Runtime test server take every
name, id, match type, width and choice from here, as the real client and server do.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROGRAM_JSON = ROOT / "p4src" / "tofino" / "compiled" / "bfrt.json"

_WIDTHS = {"uint8": 8, "uint16": 16, "uint32": 32, "uint64": 64, "int32": 32}


def _field_type(spec: dict) -> tuple[str, int | None, tuple[str, ...]]:
    """(kind, bits, choices): kind is int, bool, string or float."""
    kind = spec["type"]
    if kind == "bytes":
        return "int", spec["width"], ()
    if kind in _WIDTHS:
        return "int", _WIDTHS[kind], ()
    return kind, None, tuple(spec.get("choices", ()))


@dataclass(frozen=True)
class Field:
    name: str
    id: int
    kind: str               # int | bool | string | float
    bits: int | None        # for int fields
    mandatory: bool = False
    repeated: bool = False
    read_only: bool = False
    choices: tuple[str, ...] = ()
    match_type: str = ""    # key fields: Exact | Ternary | ...
    register: bool = False  # a register's data: one value per pipe when read

    @property
    def size(self) -> int:
        """Bytes on the wire."""
        return ((self.bits or 0) + 7) // 8


@dataclass
class Table:
    name: str
    id: int
    type: str
    size: int
    keys: dict[str, Field]
    data: dict[str, Field]                              # fields outside any action
    actions: dict[str, tuple[int, dict[str, Field]]] = field(default_factory=dict)
    scopes: dict[str, str] = field(default_factory=dict)  # action: TableOnly | DefaultOnly | ...
    const_default: bool = False
    attributes: tuple[str, ...] = ()                       # ConstTable: no writes

    def action_fields(self, action: str | None) -> dict[str, Field]:
        return self.data if action is None else self.actions[action][1]

    def action_name(self, action_id: int) -> str:
        return next(n for n, (i, _) in self.actions.items() if i == action_id)


def _key(spec: dict) -> Field:
    kind, bits, choices = _field_type(spec["type"])
    return Field(spec["name"], spec["id"], kind, bits, spec.get("mandatory", False),
                 match_type=spec["match_type"], choices=choices)


def _data(spec: dict) -> Field:
    one = spec.get("singleton", spec)
    kind, bits, choices = _field_type(one.get("type", {"type": "container"}))
    register = any(a.get("value") == "register_data" for a in one.get("annotations", ()))
    return Field(one["name"], one["id"], kind, bits, spec.get("mandatory", False),
                 one.get("repeated", False), spec.get("read_only", one.get("read_only", False)),
                 choices, register=register)


def _table(spec: dict) -> Table:
    table = Table(spec["name"], spec["id"], spec["table_type"], spec.get("size", 0),
                  {k["name"]: _key(k) for k in spec.get("key", [])},
                  {f.name: f for f in map(_data, spec.get("data", []))},
                  const_default=spec.get("has_const_default_action", False),
                  attributes=tuple(spec.get("attributes", ())))
    for action in spec.get("action_specs", []):
        table.actions[action["name"]] = (action["id"],
                                         {f.name: f for f in map(_data, action["data"])})
        table.scopes[action["name"]] = action.get("action_scope", "TableAndDefault")
    return table


class Schema:
    """Every table of a program and of the SDE's fixed JSON, by name and by id."""

    def __init__(self, program: dict, fixed: list[dict]):
        self.program_json, self.fixed_json = program, fixed
        specs = program["tables"] + [t for doc in fixed for t in doc["tables"]]
        self.tables = {t["name"]: _table(t) for t in specs}
        self.by_id = {t.id: t for t in self.tables.values()}

    @classmethod
    @cache
    def load(cls, fixed_dir: Path | None = None) -> Schema:
        """The committed program's tables with the SDE's fixed tables from ``fixed_dir``
        (its ``*_tf1.json``), or with :data:`FIXED_TABLES` (read once: nothing changes it)."""
        program = json.loads(PROGRAM_JSON.read_text())
        if fixed_dir is None:
            return cls(program, [FIXED_TABLES])
        return cls(program, [json.loads(p.read_text())
                             for p in sorted(Path(fixed_dir).glob("*_tf1.json"))])


def _fixed(name: str, table_id: int, table_type: str, size: int, keys, data) -> dict:
    return {"name": name, "id": table_id, "table_type": table_type, "size": size,
            "key": [{"id": i + 1, "name": n, "mandatory": True, "match_type": "Exact",
                     "type": {"type": t}} for i, (n, t) in enumerate(keys)],
            "data": [{"mandatory": m, "read_only": ro,
                      "singleton": {"id": i, "name": n, "repeated": r, "type": t}}
                     for i, n, m, r, ro, t in data]}


def _choices(*names: str) -> dict:
    return {"type": "string", "choices": list(names)}


# The SDE's fixed tables that the controller writes, described as the SDE's JSON describes
# them (ids here are our own: a client takes them from whatever server it talks to).
FIXED_TABLES = {"tables": [
    _fixed("$pre.mgid", 0x7F000001, "PreMgid", 65536, [("$MGID", "uint16")], [
        (1, "$MULTICAST_NODE_ID", False, True, False, {"type": "uint32"}),
        (2, "$MULTICAST_NODE_L1_XID_VALID", False, True, False, {"type": "bool"}),
        (3, "$MULTICAST_NODE_L1_XID", False, True, False, {"type": "uint16"})]),
    _fixed("$pre.node", 0x7F000002, "PreNode", 16777216, [("$MULTICAST_NODE_ID", "uint32")], [
        (1, "$MULTICAST_RID", True, False, False, {"type": "uint16"}),
        (2, "$MULTICAST_LAG_ID", True, True, False, {"type": "uint8"}),
        (3, "$DEV_PORT", True, True, False, {"type": "uint32"})]),
    _fixed("$PORT", 0x7F000003, "PortConfigure", 256, [("$DEV_PORT", "uint32")], [
        (1, "$SPEED", False, False, False, _choices(
            "BF_SPEED_NONE", "BF_SPEED_1G", "BF_SPEED_10G", "BF_SPEED_25G", "BF_SPEED_40G",
            "BF_SPEED_40G_NB", "BF_SPEED_40G_NON_BREAKABLE", "BF_SPEED_50G", "BF_SPEED_100G",
            "BF_SPEED_200G", "BF_SPEED_400G")),
        (2, "$FEC", False, False, False, _choices(
            "BF_FEC_TYP_NONE", "BF_FEC_TYP_FIRECODE", "BF_FEC_TYP_REED_SOLOMON",
            "BF_FEC_TYP_FC", "BF_FEC_TYP_RS")),
        (4, "$PORT_ENABLE", False, False, False, {"type": "bool"}),
        (5, "$AUTO_NEGOTIATION", False, False, False, _choices(
            "PM_AN_DEFAULT", "PM_AN_FORCE_ENABLE", "PM_AN_FORCE_DISABLE")),
        (6, "$LOOPBACK_MODE", False, False, False, _choices(
            "BF_LPBK_NONE", "BF_LPBK_MAC_NEAR", "BF_LPBK_MAC_FAR", "BF_LPBK_PCS_NEAR",
            "BF_LPBK_SERDES_NEAR", "BF_LPBK_SERDES_FAR")),
        (25, "$PORT_UP", False, False, True, {"type": "bool"})]),
]}

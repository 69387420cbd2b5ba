"""The state a Tofino switch's BF Runtime server holds, as the reference model and the fakes use it.

:class:`FakeSwitch` holds what bf_switchd would: the entries of the TNA program's tables, its
registers (a value per pipe), counters and parser value sets, the ``$pre`` and ``$PORT``
tables, all named as bf-p4c names them (read from the P4 source by ``p4_text``), and a log of
every write. It enforces nothing: ``bfrt_rules.BfrtDevice`` holds the server's rules over it,
for the fake client (``fake_bfrt``) and the gRPC test server (``bfrt_server``) alike. The
reference model (``model/``) runs its packets on a FakeSwitch's state.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tests.tofino import p4_text

PIPES = 4
ALL_PIPES = 0xFFFF


@dataclass
class TableSchema:
    name: str
    keys: tuple[str, ...]
    actions: dict[str | None, tuple[str, ...]]   # action -> data fields (None: no actions)
    default: tuple[str | None, dict] = (None, {})
    read_only: bool = False                      # const entries: no writes at all
    const_default: bool = False
    kind: str = "table"                          # table | register | counter
    size: int = 0


@dataclass
class FakeSwitch:
    schema: dict[str, TableSchema] = field(default_factory=lambda: program_schema())
    writes: list[tuple] = field(default_factory=list)
    pipes: int = PIPES                                     # active pipes
    boot_ports: dict[int, dict] = field(default_factory=dict)   # ports bf_switchd adds itself

    def __post_init__(self):
        self.restart()

    def restart(self) -> None:
        """As bf_switchd started again: every table empty but for the ports it adds itself,
        every register and counter 0."""
        self.entries: dict[str, dict[tuple, tuple[str | None, dict]]] = {n: {} for n in self.schema}
        self.entries["$PORT"] = {(("$DEV_PORT", port),): (None, dict(settings))
                                 for port, settings in self.boot_ports.items()}
        self.defaults = {n: s.default for n, s in self.schema.items()}
        self.cells: dict[str, dict[tuple[int, int], dict]] = {
            n: {} for n, s in self.schema.items() if s.kind == "register"}
        self.counts: dict[str, dict[int, list[int]]] = {
            n: {} for n, s in self.schema.items() if s.kind == "counter"}

    # -- what the data plane (the reference model) uses -----------------------------------------

    def lookup(self, table: str, key: dict) -> tuple[str | None, dict, bool]:
        """(action, data, hit) for an exact-match lookup."""
        found = self.entries[table].get(tuple(sorted(key.items())))
        if found is None:
            return (*self.defaults[table], False)
        return (*found, True)

    def register(self, name: str, pipe: int, index: int) -> dict:
        fields = self.schema[name].actions[None]
        return self.cells[name].get((pipe, index), dict.fromkeys(fields, 0))

    def set_register(self, name: str, pipe: int, index: int, value: dict) -> None:
        self.cells[name][(pipe, index)] = dict(value)

    def count(self, name: str, index: int, nbytes: int) -> None:
        cell = self.counts[name].setdefault(index, [0, 0])
        cell[0] += 1
        cell[1] += nbytes

    def counter(self, name: str, index: int) -> tuple[int, int]:
        return tuple(self.counts[name].get(index, (0, 0)))

    def value_set(self, name: str) -> ValueSet:
        return ValueSet([dict(k)["f1"] for k in self.entries[name]])

    def group(self, mgid: int) -> list[tuple[int, int]]:
        """(port, replica id) of every copy of a multicast group."""
        found = self.entries["$pre.mgid"].get((("$MGID", mgid),))
        if found is None:
            return []
        copies = []
        for node in found[1]["$MULTICAST_NODE_ID"]:
            data = self.entries["$pre.node"][(("$MULTICAST_NODE_ID", node),)][1]
            copies += [(port, data["$MULTICAST_RID"]) for port in data["$DEV_PORT"]]
        return sorted(copies)


class ValueSet:
    """A parser value set's members: (value, mask) pairs; a port is in it if it matches one."""

    def __init__(self, members: list[tuple[int, int]]):
        self.members = members

    def __contains__(self, port: int) -> bool:
        return any(port & mask == value & mask for value, mask in self.members)


def program_schema() -> dict[str, TableSchema]:
    """The BF Runtime tables of the TNA program as its source declares them."""
    schema = {}
    for path, control in p4_text.instance_paths().items():
        c = p4_text.controls()[control]
        for t in c.tables.values():
            actions = {f"{path}.{a}" if a != "NoAction" else "NoAction":
                       tuple(n for _, n in c.actions[a][0]) if a in c.actions else ()
                       for a in t.actions}
            name, _, args = t.default.partition("(")
            default_action = f"{path}.{name}" if name != "NoAction" else "NoAction"
            params = [n for _, n in c.actions[name][0]] if name in c.actions else []
            values = [int(v, 0) for v in args.rstrip(")").split(",") if v.strip()]
            # A ternary or range match orders entries by a priority, a key field of its own.
            prioritised = any(kind in ("ternary", "range") for _, kind in t.keys)
            keys = tuple(k for k, _ in t.keys) + (("$MATCH_PRIORITY",) if prioritised else ())
            schema[f"{p4_text.PIPE}.{path}.{t.name}"] = TableSchema(
                f"{p4_text.PIPE}.{path}.{t.name}", keys, actions,
                (default_action, dict(zip(params, values, strict=True))),
                read_only=bool(t.const_entries), const_default=t.default_is_const)
        for r, (cell_type, size) in c.registers.items():
            parts = ("lo", "hi") if cell_type.endswith("_pair_t") else ("f1",)
            name = f"{p4_text.PIPE}.{path}.{r}"
            schema[name] = TableSchema(name, ("$REGISTER_INDEX",),
                                       {None: tuple(f"{path}.{r}.{p}" for p in parts)},
                                       kind="register", size=p4_text.constants()[size])
        for n, size in c.counters.items():
            name = f"{p4_text.PIPE}.{path}.{n}"
            schema[name] = TableSchema(name, ("$COUNTER_INDEX",),
                                       {None: ("$COUNTER_SPEC_PKTS", "$COUNTER_SPEC_BYTES")},
                                       kind="counter", size=p4_text.constants()[size])
    for name in p4_text.value_sets():
        schema[name] = TableSchema(name, ("f1",), {None: ()})
    fixed = {
        "$pre.mgid": (("$MGID",), ("$MULTICAST_NODE_ID", "$MULTICAST_NODE_L1_XID_VALID",
                                   "$MULTICAST_NODE_L1_XID")),
        "$pre.node": (("$MULTICAST_NODE_ID",), ("$MULTICAST_RID", "$MULTICAST_LAG_ID",
                                                "$DEV_PORT")),
        "$PORT": (("$DEV_PORT",), ("$SPEED", "$FEC", "$AUTO_NEGOTIATION", "$PORT_ENABLE",
                                   "$LOOPBACK_MODE")),
    }
    for name, (keys, data) in fixed.items():
        schema[name] = TableSchema(name, keys, {None: data})
    return schema

"""A fake of the SDE's ``bfrt_grpc.client`` module and of the switch behind it.

:class:`FakeSwitch` holds what bf_switchd would: the entries of the TNA program's tables, its
registers (a value per pipe), counters and parser value sets, the ``$pre`` and ``$PORT``
tables, all named as bf-p4c names them (read from the P4 source by ``p4_text``). It records
every write and refuses names, fields and writes the program would not take (a const table, an
entry added twice, an unknown action). :class:`FakeClient` is the module the controller imports:
``ClientInterface``, ``Target``, ``KeyTuple``, ``DataTuple``, with the method names of SDE 9.x.
The reference model (``model/``) runs its packets on a FakeSwitch's state.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tests.tofino import p4_text

PIPES = 4
ALL_PIPES = 0xFFFF


class FakeBfrtError(RuntimeError):
    """What the BF Runtime server would refuse."""


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

    def __post_init__(self):
        self.restart()

    def restart(self) -> None:
        """As bf_switchd started again: every table empty, every register and counter 0."""
        self.entries: dict[str, dict[tuple, tuple[str | None, dict]]] = {n: {} for n in self.schema}
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

    def value_set(self, name: str) -> set[int]:
        return {dict(k)["f1"] for k in self.entries[name]}

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


# -- the client module -----------------------------------------------------------------------

class KeyTuple:
    def __init__(self, name, value=None, mask=None, prefix_len=None, low=None, high=None):
        self.name, self.value, self.mask = name, value, mask


class DataTuple:
    def __init__(self, name, val=None, float_val=None, str_val=None, int_arr_val=None,
                 bool_arr_val=None, bool_val=None):
        self.name = name
        for v in (val, str_val, int_arr_val, bool_arr_val, bool_val):
            if v is not None:
                self.value = tuple(v) if isinstance(v, list) else v
                break
        else:
            raise FakeBfrtError(f"data field {name} without a value")


@dataclass(frozen=True)
class Target:
    device_id: int = 0
    pipe_id: int = ALL_PIPES


class _Key:
    def __init__(self, fields: dict):
        self.fields = fields

    def to_dict(self) -> dict:
        return {n: ({"value": v[0], "mask": v[1]} if isinstance(v, tuple) else {"value": v})
                for n, v in self.fields.items()}


class _Data:
    def __init__(self, fields: dict, action: str | None):
        self.fields, self.action = fields, action

    def to_dict(self) -> dict:
        out = {n: list(v) if isinstance(v, tuple) else v for n, v in self.fields.items()}
        if self.action is not None:
            out["action_name"] = self.action
        return out


class _Table:
    def __init__(self, switch: FakeSwitch, name: str):
        if name not in switch.schema:
            raise FakeBfrtError(f"no table {name!r} in the program")
        self.switch, self.schema, self.name = switch, switch.schema[name], name

    def make_key(self, fields: list[KeyTuple]) -> _Key:
        names = [f.name for f in fields]
        if sorted(names) != sorted(self.schema.keys):
            raise FakeBfrtError(f"{self.name}: key fields {names}, the table has "
                                f"{list(self.schema.keys)}")
        return _Key({f.name: f.value if f.mask is None else (f.value, f.mask) for f in fields})

    def make_data(self, fields: list[DataTuple], action_name: str | None = None) -> _Data:
        if action_name not in self.schema.actions:
            raise FakeBfrtError(f"{self.name}: no action {action_name!r}")
        allowed = self.schema.actions[action_name]
        for f in fields:
            if f.name not in allowed:
                raise FakeBfrtError(f"{self.name}: {action_name} has no data field {f.name!r}")
        return _Data({f.name: f.value for f in fields}, action_name)

    def _check_write(self, key: _Key) -> None:
        if self.schema.read_only:
            raise FakeBfrtError(f"{self.name} is const: it takes no entries")
        if self.schema.kind != "table":
            index = next(iter(key.fields.values()))
            if not 0 <= index < self.schema.size:
                raise FakeBfrtError(f"{self.name}: index {index} beyond {self.schema.size}")

    def entry_add(self, target: Target, keys: list[_Key], datas: list[_Data]) -> None:
        self._write("add", target, keys, datas)

    def entry_mod(self, target: Target, keys: list[_Key], datas: list[_Data]) -> None:
        self._write("mod", target, keys, datas)

    def _write(self, op: str, target: Target, keys: list[_Key], datas: list[_Data]) -> None:
        for key, data in zip(keys, datas, strict=True):
            self._check_write(key)
            self.switch.writes.append((op, self.name, key.fields, data.fields, data.action,
                                       target.pipe_id))
            index = tuple(sorted(key.fields.items()))
            if self.schema.kind == "register":
                pipes = range(PIPES) if target.pipe_id == ALL_PIPES else [target.pipe_id]
                for pipe in pipes:
                    cell = self.switch.register(self.name, pipe, index[0][1])
                    self.switch.set_register(self.name, pipe, index[0][1],
                                             {**cell, **data.fields})
                continue
            if self.schema.kind == "counter":
                self.switch.counts[self.name][index[0][1]] = [
                    data.fields.get("$COUNTER_SPEC_PKTS", 0),
                    data.fields.get("$COUNTER_SPEC_BYTES", 0)]
                continue
            exists = index in self.switch.entries[self.name]
            if exists == (op == "add"):
                raise FakeBfrtError(f"{self.name}: entry {key.fields} "
                                    f"{'already exists' if exists else 'does not exist'}")
            self.switch.entries[self.name][index] = (data.action, data.fields)

    def entry_del(self, target: Target, keys: list[_Key] | None = None) -> None:
        table = self.switch.entries[self.name]
        for key in keys if keys is not None else [_Key(dict(k)) for k in list(table)]:
            self._check_write(key)
            self.switch.writes.append(("del", self.name, key.fields, None, None, target.pipe_id))
            if table.pop(tuple(sorted(key.fields.items())), None) is None:
                raise FakeBfrtError(f"{self.name}: entry {key.fields} does not exist")

    def entry_get(self, target: Target, keys: list[_Key] | None = None, flags=None,
                  required_data=None):
        if self.schema.kind == "register":
            fields = self.schema.actions[None]
            for key in keys:
                index = next(iter(key.fields.values()))
                cells = [self.switch.register(self.name, p, index) for p in range(PIPES)]
                yield _Data({f: tuple(c[f] for c in cells) for f in fields}, None), key
            return
        if self.schema.kind == "counter":
            for key in keys:
                packets, nbytes = self.switch.counter(self.name, next(iter(key.fields.values())))
                yield _Data({"$COUNTER_SPEC_PKTS": packets, "$COUNTER_SPEC_BYTES": nbytes},
                            None), key
            return
        table = self.switch.entries[self.name]
        wanted = None if keys is None else {tuple(sorted(k.fields.items())) for k in keys}
        for index, (action, data) in list(table.items()):
            if wanted is None or index in wanted:
                yield _Data(data, action), _Key(dict(index))

    def default_entry_set(self, target: Target, data: _Data) -> None:
        if self.schema.const_default or data.action not in self.schema.actions:
            raise FakeBfrtError(f"{self.name}: default entry cannot be {data.action}")
        self.switch.writes.append(("default", self.name, None, data.fields, data.action,
                                   target.pipe_id))
        self.switch.defaults[self.name] = (data.action, data.fields)

    def default_entry_get(self, target: Target):
        action, data = self.switch.defaults[self.name]
        yield _Data({**data, "is_default_entry": True}, action), _Key({})


class _Info:
    def __init__(self, switch: FakeSwitch):
        self.switch = switch

    def table_get(self, name: str) -> _Table:
        return _Table(self.switch, name)


class FakeClient:
    """Stands for the ``bfrt_grpc.client`` module; serves FakeSwitches by address."""

    KeyTuple = KeyTuple
    DataTuple = DataTuple
    Target = Target

    def __init__(self, switches: dict[str, FakeSwitch], program: str = "sa_atp_tna"):
        client = self

        class ClientInterface:
            def __init__(self, grpc_addr, client_id=0, device_id=0, **_):
                if grpc_addr not in switches:
                    raise FakeBfrtError(f"no BF Runtime server at {grpc_addr}")
                self.switch = switches[grpc_addr]
                client.interfaces.append(self)

            def bind_pipeline_config(self, p4_name):
                if p4_name != program:
                    raise FakeBfrtError(f"the switch runs {program}, not {p4_name}")

            def bfrt_info_get(self, p4_name=None):
                return _Info(self.switch)

            def tear_down_stream(self):
                pass

        self.ClientInterface = ClientInterface
        self.interfaces: list = []

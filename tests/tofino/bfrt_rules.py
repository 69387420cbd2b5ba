"""What bf_switchd's BF Runtime server holds and refuses, for one device running one program,
on a FakeSwitch's state (which the reference model's packets change).

The rules are those of open-p4studio's server (pkgsrc/bf-drivers/src/bf_rt: ``proto/`` for
sessions and binding, ``bf_rt_p4/`` and ``bf_rt_common/`` for keys and data, ``bf_rt_port/``
for ``$PORT``; pipe_mgr for registers), as its sources state them:

* a client subscribes under an id no other subscribed client has; one client binds a program;
  a client that has not bound the program must name it (``p4_name``) in every read and write;
* key fields have the table's match type, fit its width (bits above it are refused), and a key
  that is not in the table is NOT_FOUND (read, modify, delete), one that is, ALREADY_EXISTS
  (add); a const table takes no writes; an action takes its own data fields and is used only
  where its scope allows (table entry or default);
* a register read of all pipes returns one value per active pipe, of one pipe one value; an
  index beyond the register is refused; writes go to the target's pipes;
* ``$PORT``: an add needs ``$SPEED`` and ``$FEC``; a port reads back with every setting, the
  FEC under the first of its names in alphabetical order (firecode as ``BF_FEC_TYP_FC``); a
  change that names ``$SPEED`` disables, deletes and adds the port again (counted as a flap);
  the table holds the ports bf_switchd added too.

Values are plain Python here (ints, (value, mask) pairs, strings, bools, tuples); the fake
client and the gRPC test server turn their own forms into these. A refusal is a
:class:`Refused` with the gRPC status the server would give.
"""

from __future__ import annotations

from tests.tofino.bfrt_schema import Field, Schema, Table
from tests.tofino.fake_switch import ALL_PIPES, FakeSwitch

FEC_VALUES = {"BF_FEC_TYP_NONE": 0, "BF_FEC_TYP_FIRECODE": 1, "BF_FEC_TYP_FC": 1,
              "BF_FEC_TYP_REED_SOLOMON": 2, "BF_FEC_TYP_RS": 2}
PORT_DEFAULTS = {"$AUTO_NEGOTIATION": "PM_AN_DEFAULT", "$PORT_ENABLE": False,
                 "$LOOPBACK_MODE": "BF_LPBK_NONE", "$PORT_UP": False}


class Refused(Exception):
    """A request the server refuses: ``code`` is the gRPC status code's name."""

    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code, self.message = code, message


def fec_read_back(name: str) -> str:
    """The name the port manager reads a FEC type back with."""
    return min(n for n, v in FEC_VALUES.items() if v == FEC_VALUES[name])


class BfrtDevice:
    """One device's BF Runtime server state: sessions and bindings, and the tables of
    ``schema`` on ``switch``."""

    def __init__(self, switch: FakeSwitch, schema: Schema | None = None,
                 program: str = "sa_atp_tna", ports: dict[int, dict] | None = None):
        self.switch, self.schema, self.program = switch, schema or Schema.load(), program
        self.subscribed: set[int] = set()
        self.bound: dict[str, int] = {}
        self.port_flaps: dict[int, int] = {}
        self.requests = 0        # write requests served (one per RPC)
        for port, settings in (ports or {}).items():   # what bf_switchd added itself
            self._port_add(port, settings)

    # -- sessions -------------------------------------------------------------------------------

    def subscribe(self, client_id: int) -> None:
        if client_id in self.subscribed:
            raise Refused("INVALID_ARGUMENT", "Can't have two clients with the same client id")
        self.subscribed.add(client_id)

    def leave(self, client_id: int) -> None:
        """The client's stream ended: it is gone, and its binding with it."""
        self.subscribed.discard(client_id)
        for program, owner in list(self.bound.items()):
            if owner == client_id:
                del self.bound[program]

    def bind(self, client_id: int, p4_name: str) -> None:
        if client_id not in self.subscribed:
            raise Refused("UNAVAILABLE", f"Unknown client. Client_id:{client_id}")
        if p4_name in self.bound:
            raise Refused("ALREADY_EXISTS", f"Client ID {client_id} trying to bind but Client ID "
                                            f"{self.bound[p4_name]} already owns this P4")
        if p4_name != self.program:
            raise Refused("NOT_FOUND", f"Failed to find BfRtInfo for program {p4_name}")
        self.bound[p4_name] = client_id

    def check_program(self, client_id: int, p4_name: str) -> None:
        """A read or write needs the program named, or bound by this (subscribed) client."""
        if p4_name:
            if p4_name != self.program:
                raise Refused("NOT_FOUND", f"Unable to obtain BF_RT info for ({p4_name})")
        elif client_id not in self.subscribed or self.bound.get(self.program) != client_id:
            raise Refused("UNKNOWN", "Unable to get bound_program")

    # -- entries --------------------------------------------------------------------------------

    def table(self, name: str) -> Table:
        return self.schema.tables[name]

    def write(self, op: str, table: Table, key: dict, data: dict, action: str | None,
              pipe: int) -> None:
        """One entry of a write request: ``op`` is insert, modify or delete."""
        self._check_key(table, key)
        if op != "delete":
            self._check_data(table, data, action, default=False)
        if table.type == "Register":
            return self._register_write(table, key, data, pipe)
        if table.type == "Counter":
            index = self._index(table, key)
            self.switch.counts[table.name][index] = [data.get("$COUNTER_SPEC_PKTS", 0),
                                                     data.get("$COUNTER_SPEC_BYTES", 0)]
            return self._log(op, table, key, data, action, pipe)
        if table.type == "PortConfigure":
            return self._port_write(op, key, data)
        if "ConstTable" in table.attributes:
            raise Refused("INVALID_ARGUMENT", f"{table.name} is a const table")
        entries = self.switch.entries[table.name]
        index = tuple(sorted(key.items()))
        if (index in entries) != (op != "insert"):
            raise Refused("ALREADY_EXISTS" if op == "insert" else "NOT_FOUND",
                          f"{table.name}: entry {key} "
                          f"{'exists' if op == 'insert' else 'not found'}")
        if op == "insert" and len(entries) >= table.size:
            raise Refused("RESOURCE_EXHAUSTED", f"{table.name} is full ({table.size})")
        self._log(op, table, key, data, action, pipe)
        if op == "delete":
            del entries[index]
        else:
            entries[index] = (action, dict(data))

    def write_default(self, table: Table, data: dict, action: str | None, pipe: int) -> None:
        if table.const_default:
            raise Refused("INVALID_ARGUMENT", f"{table.name}: its default action is const")
        self._check_data(table, data, action, default=True)
        self.switch.writes.append(("default", table.name, None, data, action, pipe))
        self.switch.defaults[table.name] = (action, dict(data))

    def read(self, table: Table, key: dict | None, pipe: int) -> list[tuple[dict, str | None,
                                                                          dict]]:
        """(key, action, data) of the entry with ``key``, or of every entry."""
        if key is not None:
            self._check_key(table, key)
        if table.type == "Register":
            return [(key, None, self._register_read(table, self._index(table, key), pipe))]
        if table.type == "Counter":
            packets, nbytes = self.switch.counter(table.name, self._index(table, key))
            return [(key, None, {"$COUNTER_SPEC_PKTS": packets, "$COUNTER_SPEC_BYTES": nbytes})]
        entries = self.switch.entries[table.name]
        if key is None:
            return [(dict(k), a, dict(d)) for k, (a, d) in sorted(entries.items())]
        found = entries.get(tuple(sorted(key.items())))
        if found is None:
            raise Refused("NOT_FOUND", f"Entry not found in table:{table.name}")
        return [(key, found[0], dict(found[1]))]

    def read_default(self, table: Table) -> tuple[str | None, dict]:
        action, data = self.switch.defaults[table.name]
        return action, dict(data)

    # -- checks ---------------------------------------------------------------------------------

    def _check_key(self, table: Table, key: dict) -> None:
        for name, value in key.items():
            spec = table.keys.get(name)
            if spec is None:
                raise Refused("INVALID_ARGUMENT", f"{table.name}: no key field {name}")
            ternary = isinstance(value, tuple)
            if ternary != (spec.match_type == "Ternary") or spec.match_type not in (
                    "Exact", "Ternary"):
                raise Refused("INVALID_ARGUMENT",
                              f"{table.name}: Incorrect key type provided for key field {name}, "
                              f"expected type: {spec.match_type}")
            for part in value if ternary else (value,):
                _fits(table, spec, part)

    def _check_data(self, table: Table, data: dict, action: str | None, default: bool) -> None:
        if table.actions and action not in table.actions:
            raise Refused("INVALID_ARGUMENT", f"{table.name}: no action {action}")
        if action is not None:
            scope = table.scopes[action]
            if scope == ("DefaultOnly" if not default else "TableOnly"):
                raise Refused("INVALID_ARGUMENT", f"{table.name}: {action} is {scope}")
        fields = table.action_fields(action)
        for name, value in data.items():
            spec = fields.get(name)
            if spec is None:
                raise Refused("INVALID_ARGUMENT", f"{table.name}: no data field {name}")
            if spec.read_only:
                raise Refused("INVALID_ARGUMENT", f"{table.name}: {name} is read-only")
            for part in value if spec.repeated else (value,):
                _fits(table, spec, part)

    def _index(self, table: Table, key: dict) -> int:
        (index,) = key.values()
        if not 0 <= index < table.size:
            raise Refused("INVALID_ARGUMENT", f"{table.name}: index {index} beyond {table.size}")
        return index

    def _log(self, op, table, key, data, action, pipe) -> None:
        self.switch.writes.append(({"insert": "add", "modify": "mod", "delete": "del"}[op],
                                   table.name, key, data, action, pipe))

    # -- registers ------------------------------------------------------------------------------

    def _pipes(self, pipe: int) -> range:
        if pipe == ALL_PIPES:
            return range(self.switch.pipes)
        if not 0 <= pipe < self.switch.pipes:
            raise Refused("INVALID_ARGUMENT", f"pipe {pipe} is not an active pipe")
        return range(pipe, pipe + 1)

    def _register_write(self, table: Table, key: dict, data: dict, pipe: int) -> None:
        index = self._index(table, key)
        self._log("modify", table, key, data, None, pipe)
        for p in self._pipes(pipe):
            cell = self.switch.register(table.name, p, index)
            self.switch.set_register(table.name, p, index, {**cell, **data})

    def _register_read(self, table: Table, index: int, pipe: int) -> dict:
        cells = [self.switch.register(table.name, p, index) for p in self._pipes(pipe)]
        return {f: tuple(c[f] for c in cells) for f in table.data}

    # -- ports ----------------------------------------------------------------------------------

    def _port_write(self, op: str, key: dict, data: dict) -> None:
        (port,) = key.values()
        ports = self.switch.entries["$PORT"]
        index = (("$DEV_PORT", port),)
        if op == "insert":
            if index in ports:
                raise Refused("ALREADY_EXISTS", f"port {port} exists")
            return self._port_add(port, data)
        if index not in ports:
            raise Refused("NOT_FOUND", f"port {port} not added")
        self._log(op, self.table("$PORT"), key, data, None, ALL_PIPES)
        if op == "delete":
            del ports[index]
            return
        settings = ports[index][1]
        if "$SPEED" in data:      # disable, delete, add again: the link goes down
            self.port_flaps[port] = self.port_flaps.get(port, 0) + 1
        settings.update(data)
        if "$FEC" in data:
            settings["$FEC"] = fec_read_back(data["$FEC"])

    def _port_add(self, port: int, data: dict) -> None:
        if "$SPEED" not in data or "$FEC" not in data:
            raise Refused("INVALID_ARGUMENT",
                          "Port Cfg table entry add require both speed and fec")
        self._log("insert", self.table("$PORT"), {"$DEV_PORT": port}, data, None, ALL_PIPES)
        settings = {**PORT_DEFAULTS, **data, "$FEC": fec_read_back(data["$FEC"])}
        self.switch.entries["$PORT"][(("$DEV_PORT", port),)] = (None, settings)


def _fits(table: Table, spec: Field, value) -> None:
    """The server's bounds check: the value within the field's bits, a string among its
    choices."""
    if spec.kind == "int":
        if not isinstance(value, int) or isinstance(value, bool) or not (
                0 <= value < 1 << spec.bits):
            raise Refused("INVALID_ARGUMENT", f"{table.name}: value {value!r} exceeds the "
                                              f"{spec.bits} bits of {spec.name}")
    elif spec.kind == "string" and spec.choices and value not in spec.choices:
        raise Refused("INVALID_ARGUMENT", f"{table.name}: {value!r} is no {spec.name}")
    elif spec.kind == "bool" and not isinstance(value, bool):
        raise Refused("INVALID_ARGUMENT", f"{table.name}: {spec.name} takes a bool")

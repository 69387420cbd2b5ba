"""One BF Runtime connection to one Tofino switch, over the SDE's ``bfrt_grpc`` client.

The client ships with Intel's SDE (``$SDE_INSTALL/lib/python3*/site-packages/tofino/bfrt_grpc``)
and is imported only when a connection is made, from the SDE named by ``SDE_INSTALL``; it is
never vendored. It targets the client of SDE 9.7 to 9.13 (the open-p4studio SDE is 9.13):
``ClientInterface``, ``bind_pipeline_config``, ``bfrt_info_get``, ``table_get``, ``make_key`` /
``make_data`` with ``KeyTuple`` / ``DataTuple``, ``entry_add/mod/del/get`` and
``default_entry_set/get``. Everything the controller writes goes through :class:`BfrtEntry`, a
plain value, so that reconciliation is a set difference as on the P4Runtime side.
"""

from __future__ import annotations

import glob
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import groupby

ALL_PIPES = 0xFFFF


class BfrtUnavailable(RuntimeError):
    """The SDE's bfrt_grpc client cannot be imported; the message says what to set."""


@dataclass(frozen=True)
class BfrtEntry:
    """One entry of a BF Runtime table: key fields (value, or (value, mask) for ternary) and
    data fields by name, the action for match-action tables."""

    table: str
    key: tuple[tuple[str, object], ...]
    data: tuple[tuple[str, object], ...] = ()
    action: str | None = None
    is_default: bool = False

    @classmethod
    def make(cls, table: str, key: dict, data: dict | None = None, action: str | None = None,
             is_default: bool = False) -> BfrtEntry:
        return cls(table, tuple(sorted(key.items())), tuple(sorted((data or {}).items())),
                   action, is_default)

    @property
    def ident(self) -> tuple:
        """What identifies the entry in its table."""
        return (self.table, self.key, self.is_default)


def import_bfrt_grpc():
    """``bfrt_grpc.client`` from the environment, or from the SDE under ``$SDE_INSTALL``."""
    try:
        import bfrt_grpc.client as client
        return client
    except ImportError:
        pass
    sde = os.environ.get("SDE_INSTALL")
    if not sde:
        raise BfrtUnavailable("the BF Runtime client (bfrt_grpc) comes with Intel's SDE: set "
                              "SDE_INSTALL to the SDE's install directory (docs/tofino.md)")
    for tofino in sorted(glob.glob(f"{sde}/lib/python3*/site-packages/tofino")):
        for path in (tofino, f"{tofino}/bfrt_grpc", os.path.dirname(tofino)):
            if path not in sys.path:
                sys.path.append(path)
    try:
        import bfrt_grpc.client as client
    except ImportError as exc:
        raise BfrtUnavailable(f"no usable bfrt_grpc under SDE_INSTALL={sde}: {exc}") from None
    return client


class BfrtError(RuntimeError):
    """The switch refused a request, or no session could be opened; the message says why."""


class BfrtConnection:
    """A BF Runtime client session with one program on one device.

    A writer subscribes under its own client id and binds the program: the server lets one
    client bind a program, so one writer at a time (a second is refused with a
    :class:`BfrtError` that says so). A reader neither subscribes nor binds: it names the
    program in every read, which the server requires of a client that has not bound it, and so
    runs beside the writer. A writer's changes are sent as few requests as their order allows:
    one per run of changes of one kind to one table (a register clear is one request per
    register).
    """

    def __init__(self, address: str, program: str, device_id: int = 0, client=None,
                 bind: bool = True, client_id: int | None = None):
        self.gc = client or import_bfrt_grpc()
        self.address = address
        self.device_id = device_id
        self.program = program
        self.writer = bind
        # Subscribed clients need ids of their own (the server refuses a second subscription
        # under one id); readers are "independent" clients, which may share an id.
        self.client_id = (os.getpid() & 0xFFFF) + 1 if client_id is None else client_id
        try:
            self._interface = self.gc.ClientInterface(
                grpc_addr=address, client_id=self.client_id if bind else 0, device_id=device_id,
                num_tries=2, perform_subscribe=bind)
        except RuntimeError:   # the client's own: it could not subscribe
            raise BfrtError(f"no BF Runtime session at {address}: subscribing as client "
                            f"{self.client_id} failed; is bf_switchd running there, and is no "
                            f"other client connected under this id?") from None
        try:
            if bind:
                self._bind()
            self.info = self._interface.bfrt_info_get(program)
        except BaseException:
            self.close()
            raise

    def _bind(self) -> None:
        try:
            self._interface.bind_pipeline_config(self.program)
        except self.gc.BfruntimeRpcException as exc:
            code = exc.grpc_error_get().code().name
            if code == "ALREADY_EXISTS":
                raise BfrtError(
                    f"another client is bound to {self.program} on {self.address} and writes to "
                    f"it: BF Runtime takes one writer at a time (docs/tofino.md, \"One writer at a "
                    f"time\"); stop it first, or use a read-only command (counters, slot, "
                    f"status, job list, metrics)") from None
            raise BfrtError(f"cannot bind {self.program} on {self.address} ({code}): is it the "
                            f"program bf_switchd runs?") from None

    def close(self) -> None:
        interface = getattr(self, "_interface", None)
        if interface is None:
            return
        if interface.is_independent:
            interface.channel.close()
        else:
            interface.tear_down_stream()
        self._interface = None

    def target(self, pipe: int = ALL_PIPES):
        return self.gc.Target(device_id=self.device_id, pipe_id=pipe)

    # -- entries ------------------------------------------------------------------------------

    def write(self, ops: Iterable[tuple[str, BfrtEntry]], pipe: int = ALL_PIPES) -> None:
        """Apply ("insert" | "modify" | "delete", entry) in order, in one pipe or all of them;
        a default entry is set. Consecutive changes of one kind to one table go as one
        request."""
        if not self.writer:
            raise BfrtError("a read-only BF Runtime session cannot write")
        target = self.target(pipe)
        for (op, name, is_default), run in groupby(
                ops, key=lambda o: (o[0], o[1].table, o[1].is_default)):
            entries = [entry for _, entry in run]
            table = self.info.table_get(name)
            try:
                if is_default:
                    for entry in entries:
                        table.default_entry_set(target, self._data(table, entry))
                elif op == "delete":
                    table.entry_del(target, [self._key(table, e) for e in entries])
                else:
                    write = table.entry_add if op == "insert" else table.entry_mod
                    write(target, [self._key(table, e) for e in entries],
                          [self._data(table, e) for e in entries])
            except self.gc.BfruntimeRpcException as exc:
                raise BfrtError(f"{op} of {len(entries)} entries of {name} refused: "
                                f"{_describe(exc)}") from None

    def read(self, table_name: str, pipe: int = ALL_PIPES, keys: list[dict] | None = None,
             from_hw: bool = False) -> list[BfrtEntry]:
        """The entries of a table (or those with the given keys), without its default."""
        table = self.info.table_get(table_name)
        key_list = None if keys is None else [
            table.make_key([self.gc.KeyTuple(n, v) for n, v in k.items()]) for k in keys]
        try:
            found = list(table.entry_get(self.target(pipe), key_list, {"from_hw": from_hw},
                                         p4_name=self.program))
        except self.gc.BfruntimeRpcException as exc:
            raise BfrtError(f"read of {table_name} refused: {_describe(exc)}") from None
        return [_entry(table_name, data.to_dict(), key.to_dict()) for data, key in found]

    def read_default(self, table_name: str) -> BfrtEntry | None:
        table = self.info.table_get(table_name)
        try:
            found = list(table.default_entry_get(self.target(), p4_name=self.program))
        except self.gc.BfruntimeRpcException as exc:
            raise BfrtError(f"read of {table_name}'s default entry refused: "
                            f"{_describe(exc)}") from None
        for data, _ in found:
            return _entry(table_name, data.to_dict(), {}, is_default=True)
        return None

    def _key(self, table, entry: BfrtEntry):
        fields = []
        for name, value in entry.key:
            if isinstance(value, tuple):
                fields.append(self.gc.KeyTuple(name, value[0], mask=value[1]))
            else:
                fields.append(self.gc.KeyTuple(name, value))
        return table.make_key(fields)

    def _data(self, table, entry: BfrtEntry):
        return table.make_data([self._data_tuple(n, v) for n, v in entry.data], entry.action)

    def _data_tuple(self, name: str, value):
        if isinstance(value, bool):
            return self.gc.DataTuple(name, bool_val=value)
        if isinstance(value, str):
            return self.gc.DataTuple(name, str_val=value)
        if isinstance(value, tuple) and all(isinstance(v, bool) for v in value) and value:
            return self.gc.DataTuple(name, bool_arr_val=list(value))
        if isinstance(value, tuple):
            return self.gc.DataTuple(name, int_arr_val=list(value))
        return self.gc.DataTuple(name, value)


def _describe(exc) -> str:
    """A refusal in words: the errors of the entries refused, or the request's status."""
    if exc.sub_errors_get():
        return " ".join(str(exc).split())
    error = exc.grpc_error_get()
    return f"{error.code().name}: {error.details()}"


def _entry(table: str, data: dict, key: dict, is_default: bool = False) -> BfrtEntry:
    """A BfrtEntry from the dicts bfrt_grpc's ``to_dict`` returns."""
    data = dict(data)
    action = data.pop("action_name", None)
    is_default = data.pop("is_default_entry", is_default)
    keys = {}
    for name, field in key.items():
        if "mask" in field:
            keys[name] = (field["value"], field["mask"])
        else:
            keys[name] = field["value"]
    values = {n: tuple(v) if isinstance(v, list) else v for n, v in data.items()}
    return BfrtEntry.make(table, keys, values, action, bool(is_default))

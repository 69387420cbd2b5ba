"""A fake of the SDE's ``bfrt_grpc.client`` module, for where no SDE is installed (CI).

:class:`FakeClient` is the module the controller imports, with the names of open-p4studio's
client (``ClientInterface``, ``Target``, ``KeyTuple``, ``DataTuple``, the three exception
classes) and its behaviour where the controller could tell: it refuses on the client side what
Intel's client refuses (a key field the table lacks: ``KeyError``; a key of another match type
or a value wider than its field: ``ValueError``; a mandatory key field left out:
``AssertionError``; an unknown data field: ``KeyError``), sends one request per call (every
call is counted), and passes every request to a ``bfrt_rules.BfrtDevice``, which refuses what
the server refuses; a refusal raises the exception class Intel's client raises, with the gRPC
status code (``grpc_error_get().code()``) and per-entry errors (``sub_errors_get()``).
Reads return register fields as lists and entries as ``(data, key)`` pairs whose ``to_dict``
has the client's shape. tests/tofino/test_real_client.py runs the same controller through
Intel's client, where an SDE is installed.
"""

from __future__ import annotations

from dataclasses import dataclass

import grpc

from tests.tofino.bfrt_rules import BfrtDevice, Refused
from tests.tofino.bfrt_schema import Table
from tests.tofino.fake_switch import ALL_PIPES, FakeSwitch


@dataclass(frozen=True)
class Error:
    """One entry's error, as the client unpacks it from the status details (bfruntime.proto's
    Error): ``canonical_code`` is the gRPC code's number."""

    canonical_code: int
    message: str

    @classmethod
    def of(cls, refusal: Refused) -> Error:
        return cls(grpc.StatusCode[refusal.code].value[0], refusal.message)


class BfruntimeRpcException(Exception):
    """Carries its gRPC error itself: ``code()`` and ``details()``, and per-entry errors as
    (index, Error) pairs."""

    def __init__(self, code: str, message: str, errors=()):
        super().__init__(message)
        self._code, self._details = grpc.StatusCode[code], message
        self.errors = [(i, Error.of(e)) for i, e in errors]

    def grpc_error_get(self):
        return self

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details

    def sub_errors_get(self):
        return self.errors

    def __str__(self) -> str:
        names = {c.value[0]: c.name for c in grpc.StatusCode}
        return "Error(s):\n" + "".join(
            f"\t* At index {i}: {names[e.canonical_code]}, '{e.message}'\n"
            for i, e in self.errors)


class BfruntimeForwardingRpcException(BfruntimeRpcException):
    pass


class BfruntimeReadWriteRpcException(BfruntimeRpcException):
    pass


class KeyTuple:
    def __init__(self, name, value=None, mask=None, prefix_len=None, low=None, high=None):
        self.name, self.value, self.mask = name, value, mask
        self.match_type = "Ternary" if mask is not None else "Exact"


class DataTuple:
    def __init__(self, name, val=None, float_val=None, str_val=None, int_arr_val=None,
                 bool_arr_val=None, bool_val=None):
        self.name = name
        for v in (val, str_val, int_arr_val, bool_arr_val, bool_val):
            if v is not None:
                self.value = tuple(v) if isinstance(v, list) else v
                break
        else:
            self.value = None


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
    def __init__(self, fields: dict, action: str | None, is_default: bool = False):
        self.fields, self.action, self.is_default = fields, action, is_default

    def to_dict(self) -> dict:
        out = {n: list(v) if isinstance(v, tuple) else v for n, v in self.fields.items()}
        return {**out, "action_name": self.action, "is_default_entry": self.is_default}


class _Table:
    def __init__(self, client: _Session, table: Table):
        self.client, self.info = client, table

    def make_key(self, fields: list[KeyTuple]) -> _Key:
        for f in fields:
            spec = self.info.keys.get(f.name)
            if spec is None:
                raise KeyError(f"The Key field name {f.name} doesn't exist in the Table "
                               f"{self.info.name}")
            if f.match_type != spec.match_type:
                raise ValueError(f"field:{f.name} Passed in type:{f.match_type} is not equal "
                                 f"to type of keyfield:{spec.match_type}")
        given = {f.name for f in fields}
        for name, spec in self.info.keys.items():
            assert not spec.mandatory or name in given, \
                f"{name} is mandatory and needs to be in input_list"
        return _Key({f.name: f.value if f.mask is None else (f.value, f.mask) for f in fields})

    def make_data(self, fields: list[DataTuple], action_name: str | None = None) -> _Data:
        specs = self.info.action_fields(action_name) if (
            action_name is None or action_name in self.info.actions) else None
        if specs is None:
            raise KeyError(f"{self.info.name} has no action {action_name}")
        for f in fields:
            if f.name not in specs:
                raise KeyError(f"{f.name} is no data field of {action_name or self.info.name}")
            if not specs[f.name].repeated:
                _fits_bytes(specs[f.name], f.value)
        return _Data({f.name: f.value for f in fields}, action_name)

    # -- writes: one request per call ---------------------------------------------------------

    def entry_add(self, target: Target, keys, datas, p4_name=None) -> None:
        self._write("insert", target, keys, datas, p4_name)

    def entry_mod(self, target: Target, keys, datas, p4_name=None) -> None:
        self._write("modify", target, keys, datas, p4_name)

    def entry_del(self, target: Target, keys, p4_name=None) -> None:
        self._write("delete", target, keys, [None] * len(keys), p4_name)

    def default_entry_set(self, target: Target, data: _Data, p4_name=None) -> None:
        device = self.client.request(p4_name, BfruntimeReadWriteRpcException)
        try:
            device.write_default(self.info, data.fields, data.action, target.pipe_id)
        except Refused as exc:
            raise BfruntimeReadWriteRpcException("UNKNOWN", "Write Error Status",
                                                 [(0, exc)]) from None

    def _write(self, op, target, keys, datas, p4_name) -> None:
        device = self.client.request(p4_name, BfruntimeReadWriteRpcException)
        errors = []
        for i, (key, data) in enumerate(zip(keys, datas, strict=True)):
            try:
                device.write(op, self.info, key.fields, data.fields if data else {},
                             data.action if data else None, target.pipe_id)
            except Refused as exc:   # the server goes on with the rest (CONTINUE_ON_ERROR)
                errors.append((i, exc))
        if errors:
            raise BfruntimeReadWriteRpcException("UNKNOWN", "Write Error Status", errors)

    # -- reads: generators, as the client's; a refusal surfaces when they are iterated ----------

    def entry_get(self, target: Target, keys=None, flags=None, required_data=None,
                  p4_name=None):
        device = self.client.request(p4_name, BfruntimeReadWriteRpcException, write=False)
        found = []
        for key in keys if keys is not None else [None]:
            try:
                found += device.read(self.info, None if key is None else key.fields,
                                     target.pipe_id)
            except Refused as exc:
                raise BfruntimeReadWriteRpcException("UNKNOWN", "Read Error Status",
                                                     [(0, exc)]) from None
        for key, action, data in found:
            yield _Data(data, action), _Key(key)

    def default_entry_get(self, target: Target, flags=None, p4_name=None):
        device = self.client.request(p4_name, BfruntimeReadWriteRpcException, write=False)
        action, data = device.read_default(self.info)
        yield _Data(data, action, is_default=True), None


def _fits_bytes(spec, value) -> None:
    """The client's size check of a data field: an integer must fit the field's bytes (the
    server checks its bits, and a key's width)."""
    if value is None or spec.kind != "int" or isinstance(value, bool):
        return
    if value >= 1 << (8 * spec.size):
        raise ValueError(f"expected {spec.size} len received {(value.bit_length() + 7) // 8} "
                         f"len for field {spec.name}")


class _Info:
    def __init__(self, client: _Session):
        self.client = client

    def table_get(self, name: str) -> _Table:
        return _Table(self.client, self.client.device.table(name))


class _Channel:
    def close(self) -> None:
        pass


class _Session:
    """One ClientInterface: a subscribed client, or an independent one (no stream)."""

    def __init__(self, device: BfrtDevice, client_id: int, subscribe: bool):
        self.device, self.client_id, self.is_independent = device, client_id, not subscribe
        self.channel = _Channel()
        if subscribe:
            try:
                device.subscribe(client_id)
            except Refused:
                raise RuntimeError("Failed to subscribe to server") from None

    def request(self, p4_name, error, write: bool = True) -> BfrtDevice:
        try:
            self.device.check_program(-1 if self.is_independent else self.client_id,
                                      p4_name or "")
        except Refused as exc:
            if exc.code == "UNKNOWN":   # the client looks for entry errors in an UNKNOWN
                raise RuntimeError("No binary details field") from None   # status: none here
            raise error(exc.code, exc.message) from None
        if write:
            self.device.requests += 1
        return self.device

    def bind_pipeline_config(self, p4_name: str) -> None:
        try:
            self.device.bind(self.client_id, p4_name)
        except Refused as exc:
            raise BfruntimeForwardingRpcException(exc.code, exc.message) from None

    def bfrt_info_get(self, p4_name=None) -> _Info:
        return _Info(self)

    def tear_down_stream(self) -> None:
        self.device.leave(self.client_id)
        self.is_independent = True


class FakeClient:
    """Stands for the ``bfrt_grpc.client`` module; serves switches by address (a FakeSwitch
    gets a BfrtDevice of its own, kept across connections)."""

    KeyTuple = KeyTuple
    DataTuple = DataTuple
    Target = Target
    BfruntimeRpcException = BfruntimeRpcException
    BfruntimeForwardingRpcException = BfruntimeForwardingRpcException
    BfruntimeReadWriteRpcException = BfruntimeReadWriteRpcException

    def __init__(self, switches: dict[str, FakeSwitch | BfrtDevice]):
        self.devices = {address: s if isinstance(s, BfrtDevice) else BfrtDevice(s)
                        for address, s in switches.items()}
        devices = self.devices

        def client_interface(grpc_addr, client_id, device_id=0, notifications=None, timeout=1,
                             num_tries=5, perform_subscribe=True):
            if grpc_addr not in devices:
                raise RuntimeError(f"Failed to subscribe to server at {grpc_addr}")
            return _Session(devices[grpc_addr], client_id, perform_subscribe)

        self.ClientInterface = client_interface

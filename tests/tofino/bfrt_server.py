"""A BF Runtime gRPC server for the tests: the service bf_switchd offers, on a
``bfrt_rules.BfrtDevice`` (whose switch state the reference model's packets change).

It speaks the protocol of the SDE's ``bfruntime.proto`` with the Python stubs generated from
it in the SDE install (``$SDE_INSTALL``, tests/tofino/sde.py): nothing of Intel's is in the
project, as with bmv2. It serves the committed p4src/tofino/compiled/bfrt.json as the
program's BF Runtime info and the SDE's fixed-table JSON (squashed, as the server squashes
them) as the non-P4 info, and answers as the server does: a subscription on the stream
channel, BIND, GetForwardingPipelineConfig, Write and Read, with per-entry errors packed into
the status details (``grpc-status-details-bin``) that Intel's client unpacks.
"""

from __future__ import annotations

import json
import threading
from concurrent import futures

import grpc
from google.rpc import status_pb2

from tests.tofino.bfrt_rules import BfrtDevice, Refused
from tests.tofino.bfrt_schema import PROGRAM_JSON, Field, Table


class BfrtServer:
    """Serves ``device`` on 127.0.0.1 at a free port (``address``) until :meth:`stop`."""

    def __init__(self, device: BfrtDevice, stubs):
        self.device, self.pb, self.lock = device, stubs.pb2, threading.Lock()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        stubs.pb2_grpc.add_BfRuntimeServicer_to_server(_Service(self), self.server)
        port = self.server.add_insecure_port("127.0.0.1:0")
        self.address = f"127.0.0.1:{port}"
        self.server.start()

    def stop(self) -> None:
        self.server.stop(grace=None)

    def config(self):
        pb = self.pb
        fixed = {"tables": [t for doc in self.device.schema.fixed_json for t in doc["tables"]]}
        return pb.GetForwardingPipelineConfigResponse(
            config=[pb.ForwardingPipelineConfig(p4_name=self.device.program,
                                                bfruntime_info=PROGRAM_JSON.read_bytes())],
            non_p4_config=pb.NonP4Config(bfruntime_info=json.dumps(fixed).encode()))


class _Service:
    """The BfRuntime service's five calls."""

    def __init__(self, server: BfrtServer):
        self.s = server

    def GetForwardingPipelineConfig(self, request, context):
        return self.s.config()

    def SetForwardingPipelineConfig(self, request, context):
        pb = self.s.pb
        if request.action != pb.SetForwardingPipelineConfigRequest.BIND:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "only BIND is served here")
        if len(request.config) != 1:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "Exactly one config message required.")
        try:
            with self.s.lock:
                self.s.device.bind(request.client_id, request.config[0].p4_name)
        except Refused as exc:
            context.abort(grpc.StatusCode[exc.code], exc.message)
        return pb.SetForwardingPipelineConfigResponse()

    def StreamChannel(self, requests, context):
        subscribed = None
        try:
            for request in requests:
                if request.WhichOneof("update") != "subscribe" or subscribed is not None:
                    continue
                try:
                    with self.s.lock:
                        self.s.device.subscribe(request.client_id)
                except Refused as exc:   # the stream ends with the error; no answer is sent
                    context.abort(grpc.StatusCode[exc.code], exc.message)
                subscribed = request.client_id
                answer = self.s.pb.StreamMessageResponse()
                answer.subscribe.status.code = 0
                yield answer
        finally:
            if subscribed is not None:
                with self.s.lock:
                    self.s.device.leave(subscribed)

    def Write(self, request, context):
        errors, device = [], self.s.device
        with self.s.lock:
            self._check_program(request, context)
            device.requests += 1
            ops = {1: "insert", 2: "modify", 4: "delete"}
            for update in request.updates:
                entry = update.entity.table_entry
                try:
                    table = _table(device, entry.table_id)
                    action, data = _decode_data(table, entry.data)
                    if entry.is_default_entry:
                        device.write_default(table, data, action, request.target.pipe_id)
                    elif update.type not in ops:
                        raise Refused("UNIMPLEMENTED", f"update type {update.type}")
                    else:
                        device.write(ops[update.type], table, _decode_key(table, entry.key),
                                     data, action, request.target.pipe_id)
                    errors.append(None)
                except Refused as exc:
                    errors.append(exc)
        _finish(self.s.pb, context, errors, "Write Error Status")
        return self.s.pb.WriteResponse()

    def Read(self, request, context):
        pb, device = self.s.pb, self.s.device
        response, errors = pb.ReadResponse(), []
        with self.s.lock:
            self._check_program(request, context)
            for entity in request.entities:
                entry = entity.table_entry
                try:
                    table = _table(device, entry.table_id)
                    if entry.is_default_entry:
                        action, data = device.read_default(table)
                        _encode(pb, response, table, None, action, data, default=True)
                    else:
                        key = _decode_key(table, entry.key) if entry.HasField("key") else None
                        for k, action, data in device.read(table, key, request.target.pipe_id):
                            _encode(pb, response, table, k, action, data)
                    errors.append(None)
                except Refused as exc:
                    errors.append(exc)
        yield response
        _finish(pb, context, errors, "Read Error Status")

    def _check_program(self, request, context) -> None:
        try:
            self.s.device.check_program(request.client_id, request.p4_name)
        except Refused as exc:
            context.abort(grpc.StatusCode[exc.code], exc.message)


def _finish(pb, context, errors: list, message: str) -> None:
    """The server's status for a request: OK, or UNKNOWN with one Error per entry (OK for
    those that succeeded) in the details."""
    if not any(errors):
        return
    status = status_pb2.Status(code=grpc.StatusCode.UNKNOWN.value[0], message=message)
    for error in errors:
        detail = pb.Error(canonical_code=0 if error is None else
                          grpc.StatusCode[error.code].value[0],
                          message="" if error is None else error.message)
        status.details.add().Pack(detail)
    context.set_trailing_metadata((("grpc-status-details-bin", status.SerializeToString()),))
    context.set_code(grpc.StatusCode.UNKNOWN)
    context.set_details(message)


def _table(device: BfrtDevice, table_id: int) -> Table:
    table = device.schema.by_id.get(table_id)
    if table is None:
        raise Refused("NOT_FOUND", f"Table not found for id {table_id}")
    return table


def _int(spec: Field, raw: bytes, table: Table) -> int:
    if len(raw) != spec.size:
        raise Refused("INVALID_ARGUMENT", f"{table.name}: {spec.name} is {spec.size} bytes, "
                                          f"not {len(raw)}")
    return int.from_bytes(raw, "big")


def _specs(table: Table, fields: dict[str, Field], found, what: str):
    """(spec, field) for each field of a request, by id; an unknown id is refused."""
    by_id = {f.id: f for f in fields.values()}
    for field in found:
        if field.field_id not in by_id:
            raise Refused("INVALID_ARGUMENT", f"{table.name}: no {what} field {field.field_id}")
        yield by_id[field.field_id], field


def _decode_key(table: Table, key) -> dict:
    out = {}
    for spec, field in _specs(table, table.keys, key.fields, "key"):
        kind = field.WhichOneof("match_type")
        if kind == "exact":
            out[spec.name] = (field.exact.value.decode() if spec.kind == "string"
                              else _int(spec, field.exact.value, table))
        elif kind == "ternary":
            out[spec.name] = (_int(spec, field.ternary.value, table),
                              _int(spec, field.ternary.mask, table))
        else:
            raise Refused("INVALID_ARGUMENT", f"{table.name}: {kind} match on {spec.name}")
    return out


def _decode_data(table: Table, data) -> tuple[str | None, dict]:
    action = table.action_name(data.action_id) if data.action_id else None
    out = {}
    for spec, field in _specs(table, table.action_fields(action), data.fields, "data"):
        kind = field.WhichOneof("value")
        if kind == "stream":
            out[spec.name] = _int(spec, field.stream, table)
        elif kind in ("int_arr_val", "bool_arr_val"):
            out[spec.name] = tuple(getattr(field, kind).val)
        else:
            out[spec.name] = getattr(field, kind)
    return action, out


def _encode(pb, response, table: Table, key: dict | None, action: str | None, data: dict,
            default: bool = False) -> None:
    entry = response.entities.add().table_entry
    entry.table_id, entry.is_default_entry = table.id, default
    for name, value in (key or {}).items():
        spec, field = table.keys[name], entry.key.fields.add()
        field.field_id = spec.id
        if isinstance(value, tuple):
            field.ternary.value = value[0].to_bytes(spec.size, "big")
            field.ternary.mask = value[1].to_bytes(spec.size, "big")
        else:
            field.exact.value = value.to_bytes(spec.size, "big")
    entry.data.SetInParent()     # present even with no fields, as the server sends it
    if action is not None:
        entry.data.action_id = table.actions[action][0]
    fields = table.action_fields(action)
    for name, value in data.items():
        spec = fields[name]
        for one in value if spec.register else (value,):   # a register: one field per pipe
            field = entry.data.fields.add()
            field.field_id = spec.id
            if spec.repeated:
                (field.bool_arr_val if spec.kind == "bool" else field.int_arr_val).val.extend(one)
            elif spec.kind == "int":
                field.stream = one.to_bytes(spec.size, "big")
            elif spec.kind == "bool":
                field.bool_val = one
            else:
                field.str_val = one


"""A bare P4Runtime client over the generated stubs, and the checks of what PI answers (the
status of a failed call, the per-update errors of a failed batch), for the P4Runtime server
tests (test_softswitch_p4runtime_*.py; their server and client fixtures are in conftest.py)."""

from __future__ import annotations

import queue
import threading

import grpc
import pytest
from google.protobuf import text_format
from google.rpc import status_pb2
from p4.v1 import p4runtime_pb2 as pb
from p4.v1 import p4runtime_pb2_grpc

from tests.softswitch.programs import p4info_text, program_json

SetAction = pb.SetForwardingPipelineConfigRequest


class Client:
    """A bare P4Runtime client over the generated stubs."""

    def __init__(self, port: int, device_id: int = 0):
        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        self.stub = p4runtime_pb2_grpc.P4RuntimeStub(self.channel)
        self.device_id = device_id
        self.election_id: int | None = None
        self.inbox: queue.Queue = queue.Queue()
        self._out: queue.Queue = queue.Queue()
        self._stream = None

    def connect(self, election_id: int, device_id: int | None = None) -> pb.StreamMessageResponse:
        self.election_id = election_id

        def requests():
            while True:
                item = self._out.get()
                if item is None:
                    return
                yield item

        self._stream = self.stub.StreamChannel(requests())
        threading.Thread(target=self._pump, daemon=True).start()
        self.arbitrate(election_id, device_id)
        return self.inbox.get(timeout=5)

    def arbitrate(self, election_id: int, device_id: int | None = None) -> None:
        self.election_id = election_id
        req = pb.StreamMessageRequest()
        req.arbitration.device_id = self.device_id if device_id is None else device_id
        req.arbitration.election_id.high = election_id >> 64
        req.arbitration.election_id.low = election_id & ((1 << 64) - 1)
        self._out.put(req)

    def _pump(self):
        try:
            for msg in self._stream:
                self.inbox.put(msg)
        except grpc.RpcError as exc:
            self.inbox.put(exc)

    def send(self, msg: pb.StreamMessageRequest) -> None:
        self._out.put(msg)

    def close(self):
        self._out.put(None)
        self.channel.close()

    def _election(self, req) -> None:
        if self.election_id is not None:
            req.election_id.high = self.election_id >> 64
            req.election_id.low = self.election_id & ((1 << 64) - 1)

    def set_pipeline(self, name: str, action=SetAction.VERIFY_AND_COMMIT, cookie=None,
                     device_config: bytes | None = None):
        req = pb.SetForwardingPipelineConfigRequest(device_id=self.device_id, action=action)
        self._election(req)
        text_format.Parse(p4info_text(name), req.config.p4info)
        req.config.p4_device_config = device_config if device_config is not None else \
            program_json(name).encode()
        if cookie is not None:
            req.config.cookie.cookie = cookie
        return self.stub.SetForwardingPipelineConfig(req)

    def write(self, *updates: pb.Update):
        req = pb.WriteRequest(device_id=self.device_id)
        self._election(req)
        req.updates.extend(updates)
        return self.stub.Write(req)

    def read(self, *entities: pb.Entity) -> list[pb.Entity]:
        req = pb.ReadRequest(device_id=self.device_id, entities=entities)
        out = []
        for resp in self.stub.Read(req):
            out.extend(resp.entities)
        return out


def status_of(exc: grpc.RpcError) -> status_pb2.Status | None:
    for key, value in exc.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            return status_pb2.Status.FromString(value)
    return None


def batch_errors(exc: grpc.RpcError) -> list[pb.Error]:
    status = status_of(exc)
    errors = []
    for d in status.details:
        e = pb.Error()
        d.Unpack(e)
        errors.append(e)
    return errors


def expect(code: grpc.StatusCode, call, *args, **kwargs) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as exc:
        call(*args, **kwargs)
    assert exc.value.code() == code, exc.value.details()
    return exc.value


def update(kind, entity_setter) -> pb.Update:
    u = pb.Update(type=kind)
    entity_setter(u.entity)
    return u

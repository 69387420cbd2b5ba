"""The P4Runtime server over real gRPC: pipeline configuration, every entity kind, arbitration,
packet I/O and the status codes / messages p4lang/PI gives for wrong requests."""

from __future__ import annotations

import queue
import struct
import threading

import grpc
import pytest
from google.protobuf import text_format
from google.rpc import code_pb2, status_pb2
from p4.v1 import p4runtime_pb2 as pb
from p4.v1 import p4runtime_pb2_grpc

from softswitch.dataplane import Dataplane
from softswitch.p4runtime_server import P4RuntimeServer
from tests.softswitch.frames import key_frame
from tests.softswitch.p4info import P4Info, exact_entry
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


@pytest.fixture
def server():
    dataplane = Dataplane(device_id=0, cpu_port=64)
    sent: list[tuple[int, bytes]] = []
    dataplane.set_transmit(lambda port, frame: sent.append((port, frame)))
    srv = P4RuntimeServer(dataplane, "127.0.0.1:0")
    srv.start()
    srv.sent = sent
    yield srv
    srv.stop(grace=None)


@pytest.fixture
def client(server):
    c = Client(server.port)
    yield c
    c.close()


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


# -- table entries ---------------------------------------------------------------------------------

T = "IngressImpl."


def test_pipeline_push_insert_forward_and_read_back(server, client):
    info = P4Info("tables")
    client.set_pipeline("tables", cookie=77)
    te = exact_entry(info, 0x0A000001, 80, 7, 3)
    te.controller_metadata = 12345
    te.metadata = b"opaque"
    client.write(update(pb.Update.INSERT, lambda e: e.table_entry.CopyFrom(te)))
    server.dataplane.receive(1, key_frame(addr=0x0A000001, port=80))
    assert server.sent[-1][0] == 3
    read = client.read(pb.Entity(table_entry=pb.TableEntry(table_id=te.table_id)))
    assert len(read) == 1
    got = read[0].table_entry
    assert got.controller_metadata == 12345 and got.metadata == b"opaque"
    # Values are returned in canonical form: no leading zero bytes.
    assert [m.exact.value for m in got.match] == [b"\x0a\x00\x00\x01", b"\x50"]
    assert [p.value for p in got.action.action.params] == [b"\x07", b"\x03"]
    cfg = client.stub.GetForwardingPipelineConfig(pb.GetForwardingPipelineConfigRequest(
        device_id=0, response_type=pb.GetForwardingPipelineConfigRequest.COOKIE_ONLY)).config
    assert cfg.cookie.cookie == 77 and not cfg.p4_device_config
    full = client.stub.GetForwardingPipelineConfig(pb.GetForwardingPipelineConfigRequest(
        device_id=0)).config
    assert full.p4_device_config == program_json("tables").encode()
    assert full.p4info.tables


def test_non_canonical_bytestrings_are_accepted(client):
    info = P4Info("tables")
    client.set_pipeline("tables")
    padded = exact_entry(info, 5, 6, 1, 2, encode=lambda x, n: x.to_bytes(n + 2, "big"))
    client.write(update(pb.Update.INSERT, lambda e: e.table_entry.CopyFrom(padded)))
    canonical = exact_entry(info, 5, 6, 1, 2, encode=lambda x, n: bytes([x]))
    e = expect(grpc.StatusCode.UNKNOWN, client.write,
               update(pb.Update.INSERT, lambda e: e.table_entry.CopyFrom(canonical)))
    assert batch_errors(e)[0].canonical_code == code_pb2.ALREADY_EXISTS


def test_every_match_kind_and_default_entry(server, client):
    info = P4Info("tables")
    client.set_pipeline("tables")
    tid = lambda n: info.table(T + n).preamble.id  # noqa: E731
    fid = info.field_id

    lpm = pb.TableEntry(table_id=tid("t_lpm"))
    lpm.match.add(field_id=fid(T + "t_lpm", "hdr.key.proto")).exact.value = b"\x06"
    m = lpm.match.add(field_id=fid(T + "t_lpm", "hdr.key.addr"))
    m.lpm.value, m.lpm.prefix_len = b"\x0a\x01\x00\x00", 16
    lpm.action.action.action_id = info.action_id(T + "set_lpm")
    lpm.action.action.params.add(param_id=1, value=b"\x02")

    tern = pb.TableEntry(table_id=tid("t_ternary"), priority=10)
    m = tern.match.add(field_id=fid(T + "t_ternary", "hdr.key.flags"))
    m.ternary.value, m.ternary.mask = b"\x01", b"\x01"
    tern.action.action.action_id = info.action_id(T + "set_tern")
    tern.action.action.params.add(param_id=1, value=b"\x03")

    rng = pb.TableEntry(table_id=tid("t_range"), priority=1)
    m = rng.match.add(field_id=fid(T + "t_range", "hdr.key.port"))
    m.range.low, m.range.high = (1000).to_bytes(2, "big"), (2000).to_bytes(2, "big")
    rng.match.add(field_id=fid(T + "t_range", "hdr.key.proto")).exact.value = b"\x06"
    rng.action.action.action_id = info.action_id(T + "set_range")
    rng.action.action.params.add(param_id=1, value=b"\x04")

    opt = pb.TableEntry(table_id=tid("t_optional"), priority=1)
    opt.match.add(field_id=fid(T + "t_optional", "hdr.key.proto")).optional.value = b"\x06"
    opt.action.action.action_id = info.action_id(T + "set_opt")
    opt.action.action.params.add(param_id=1, value=b"\x05")

    default = pb.TableEntry(table_id=tid("t_if"), is_default_action=True)
    default.action.action.action_id = info.action_id(T + "with_if")
    default.action.action.params.add(param_id=1, value=b"\x80")

    client.write(*[update(pb.Update.INSERT, lambda e, x=x: e.table_entry.CopyFrom(x))
                   for x in (lpm, tern, rng, opt)],
                 update(pb.Update.MODIFY, lambda e: e.table_entry.CopyFrom(default)))
    server.dataplane.receive(1, key_frame(addr=0x0A010203, port=1500, proto=6, flags=0x21))
    result = server.sent[-1][1][24:36]
    assert list(result[1:5]) == [2, 3, 4, 5]  # lpm, ternary, range, optional
    assert result[8] == 3  # flags 0x21 < new threshold 0x80

    for entry in (lpm, tern, rng, opt):
        read = client.read(pb.Entity(table_entry=pb.TableEntry(table_id=entry.table_id)))
        assert [r.table_entry for r in read] == [entry]
    read = client.read(pb.Entity(table_entry=pb.TableEntry(table_id=tid("t_if"),
                                                           is_default_action=True)))
    assert read[0].table_entry == default
    # Reading one entry by its key; a key with no entry reads nothing.
    one = pb.TableEntry(table_id=tern.table_id, priority=10)
    one.match.extend(tern.match)
    assert [r.table_entry for r in client.read(pb.Entity(table_entry=one))] == [tern]
    one.priority = 11
    assert client.read(pb.Entity(table_entry=one)) == []
    # Wildcard over all tables includes the const entries of t_const.
    everything = client.read(pb.Entity(table_entry=pb.TableEntry()))
    assert sum(e.table_entry.table_id == tid("t_const") for e in everything) == 4
    # Resetting the default entry.
    reset = pb.TableEntry(table_id=tid("t_if"), is_default_action=True)
    client.write(update(pb.Update.MODIFY, lambda e: e.table_entry.CopyFrom(reset)))
    read = client.read(pb.Entity(table_entry=reset))
    assert read[0].table_entry.action.action.params[0].value == b"\x10"


def test_write_errors_match_pi(client):
    info = P4Info("tables")
    client.set_pipeline("tables")
    good = exact_entry(info, 1, 2, 3, 4)

    def te(**changes):
        entry = pb.TableEntry()
        entry.CopyFrom(good)
        for k, v in changes.items():
            setattr(entry, k, v)
        return entry

    wrong_table = te(table_id=0x02FFFFFF)
    missing = te()
    del missing.match[1]
    unknown_field = te()
    unknown_field.match.add(field_id=99).exact.value = b"\x01"
    too_wide = te()
    too_wide.match[1].exact.value = b"\x01\x00\x00"
    priority = te(priority=5)
    no_action = te()
    no_action.ClearField("action")
    bad_param = te()
    del bad_param.action.action.params[1]
    wrong_action = te()
    wrong_action.action.action.action_id = info.action_id(T + "set_lpm")
    const_default = pb.TableEntry(table_id=info.table(T + "t_const").preamble.id,
                                  is_default_action=True)
    const_default.action.action.action_id = info.action_id(T + "set_const")
    const_default.action.action.params.add(param_id=1, value=b"\x01")
    const_insert = pb.TableEntry(table_id=info.table(T + "t_const").preamble.id, priority=1)
    const_insert.action.action.action_id = info.action_id(T + "set_const")
    const_insert.action.action.params.add(param_id=1, value=b"\x01")
    default_insert = te(is_default_action=True)
    del default_insert.match[:]

    cases = [
        (pb.Update.INSERT, good, code_pb2.OK, ""),
        (pb.Update.INSERT, good, code_pb2.ALREADY_EXISTS, "Match entry exists"),
        (pb.Update.INSERT, wrong_table, code_pb2.INVALID_ARGUMENT, "Invalid P4 id"),
        (pb.Update.INSERT, missing, code_pb2.INVALID_ARGUMENT, "Missing non-ternary field"),
        (pb.Update.INSERT, unknown_field, code_pb2.INVALID_ARGUMENT, "Too many fields"),
        (pb.Update.INSERT, too_wide, code_pb2.INVALID_ARGUMENT, "does not fit within 16 bits"),
        (pb.Update.INSERT, priority, code_pb2.INVALID_ARGUMENT, "Non-zero priority"),
        (pb.Update.INSERT, no_action, code_pb2.INVALID_ARGUMENT, "'action' field must be set"),
        (pb.Update.INSERT, bad_param, code_pb2.INVALID_ARGUMENT, "Unexpected number"),
        (pb.Update.INSERT, wrong_action, code_pb2.INVALID_ARGUMENT, "Invalid action for table"),
        (pb.Update.MODIFY, const_default, code_pb2.PERMISSION_DENIED, "const default action"),
        (pb.Update.INSERT, const_insert, code_pb2.UNKNOWN, "Error when adding match entry"),
        (pb.Update.INSERT, default_insert, code_pb2.INVALID_ARGUMENT, "Cannot use INSERT"),
        (pb.Update.DELETE, exact_entry(info, 9, 9, 1, 1), code_pb2.NOT_FOUND,
         "Cannot find match entry"),
        (pb.Update.UNSPECIFIED, good, code_pb2.INVALID_ARGUMENT, "Update type is not set"),
    ]
    err = expect(grpc.StatusCode.UNKNOWN, client.write,
                 *[update(kind, lambda e, x=x: e.table_entry.CopyFrom(x))
                   for kind, x, _, _ in cases])
    errors = batch_errors(err)
    assert len(errors) == len(cases)
    for (_, _, code, text), e in zip(cases, errors, strict=True):
        assert e.canonical_code == code, (text, e)
        assert text in e.message
        if code != code_pb2.OK:
            assert e.space == "ALL-sswitch-p4org"
    # The successful update of the batch was applied.
    assert len(client.read(pb.Entity(table_entry=pb.TableEntry(table_id=good.table_id)))) == 1


def test_ternary_and_lpm_value_checks(client):
    info = P4Info("tables")
    client.set_pipeline("tables")
    fid = info.field_id

    def tern(value, mask, priority=1):
        e = pb.TableEntry(table_id=info.table(T + "t_ternary").preamble.id, priority=priority)
        m = e.match.add(field_id=fid(T + "t_ternary", "hdr.key.flags"))
        m.ternary.value, m.ternary.mask = value, mask
        e.action.action.action_id = info.action_id(T + "set_tern")
        e.action.action.params.add(param_id=1, value=b"\x01")
        return e

    def lpm(value, plen):
        e = pb.TableEntry(table_id=info.table(T + "t_lpm").preamble.id)
        e.match.add(field_id=fid(T + "t_lpm", "hdr.key.proto")).exact.value = b"\x06"
        m = e.match.add(field_id=fid(T + "t_lpm", "hdr.key.addr"))
        m.lpm.value, m.lpm.prefix_len = value, plen
        e.action.action.action_id = info.action_id(T + "set_lpm")
        e.action.action.params.add(param_id=1, value=b"\x01")
        return e

    cases = [(tern(b"\x03", b"\x01"), "value & mask == value"),
             (tern(b"\x00", b"\x00"), "omit match field instead of using 0 mask"),
             (tern(b"\x01", b"\x01", priority=0), "Zero priority for ternary match"),
             (lpm(b"\x0a\x01\x00\x00", 8), "incorrect number of trailing zeros"),
             (lpm(b"\x0a\x00\x00\x00", 0), "prefix length of 0"),
             (lpm(b"\x0a\x00\x00\x00", 33), "Prefix length cannot be > bitwidth")]
    err = expect(grpc.StatusCode.UNKNOWN, client.write,
                 *[update(pb.Update.INSERT, lambda e, x=x: e.table_entry.CopyFrom(x))
                   for x, _ in cases])
    for (_, text), e in zip(cases, batch_errors(err), strict=True):
        assert e.canonical_code == code_pb2.INVALID_ARGUMENT and text in e.message


def test_requests_without_pipeline_and_request_level_errors(server, client):
    err = expect(grpc.StatusCode.FAILED_PRECONDITION, client.read,
                 pb.Entity(table_entry=pb.TableEntry()))
    assert "No forwarding pipeline config" in err.details()
    expect(grpc.StatusCode.FAILED_PRECONDITION, client.write)
    expect(grpc.StatusCode.FAILED_PRECONDITION, client.stub.GetForwardingPipelineConfig,
           pb.GetForwardingPipelineConfigRequest(device_id=0))
    expect(grpc.StatusCode.INVALID_ARGUMENT, client.set_pipeline, "tables",
           action=SetAction.UNSPECIFIED)
    err = expect(grpc.StatusCode.UNKNOWN, client.set_pipeline, "tables",
                 device_config=b'{"__meta__": {"version": [2, 23]}, "actions": [{"name": "a", '
                               b'"id": 0, "primitives": [{"op": "nope", "parameters": []}]}]}')
    assert "Error in first phase of device update" in err.details()
    assert "nope" in err.details()
    client.set_pipeline("tables")
    req = pb.WriteRequest(device_id=0, atomicity=pb.WriteRequest.DATAPLANE_ATOMIC)
    expect(grpc.StatusCode.UNIMPLEMENTED, client.stub.Write, req)
    other = Client(server.port, device_id=3)
    expect(grpc.StatusCode.FAILED_PRECONDITION, other.read, pb.Entity(table_entry=pb.TableEntry()))
    err = expect(grpc.StatusCode.UNKNOWN, other.set_pipeline, "tables")
    assert "assign device" in err.details()
    other.close()


def test_verify_save_commit_and_reconcile(server, client):
    info = P4Info("tables")
    client.set_pipeline("tables", action=SetAction.VERIFY)
    expect(grpc.StatusCode.FAILED_PRECONDITION, client.read, pb.Entity(table_entry=pb.TableEntry()))
    err = expect(grpc.StatusCode.UNKNOWN, client.set_pipeline, "tables",
                 action=SetAction.COMMIT)
    assert "second phase" in err.details()
    client.set_pipeline("tables", action=SetAction.VERIFY_AND_SAVE)
    client.set_pipeline("tables", action=SetAction.COMMIT)
    te = exact_entry(info, 1, 1, 1, 1)
    client.write(update(pb.Update.INSERT, lambda e: e.table_entry.CopyFrom(te)))
    server.dataplane.receive(1, key_frame(addr=1, port=1))
    client.set_pipeline("tables", action=SetAction.RECONCILE_AND_COMMIT)
    read = client.read(pb.Entity(table_entry=pb.TableEntry(table_id=te.table_id,
                                                           counter_data=pb.CounterData())))
    assert len(read) == 1 and read[0].table_entry.counter_data.packet_count == 1
    client.set_pipeline("tables", action=SetAction.VERIFY_AND_COMMIT)
    assert client.read(pb.Entity(table_entry=pb.TableEntry(table_id=te.table_id))) == []


# -- counters and registers ------------------------------------------------------------------------

def agg_frame(slot: int, op: int) -> bytes:
    return bytes(12) + b"\x88\xb7" + struct.pack("!HBB", slot, op, 0) + bytes(4 * 64 + 28)


def test_indirect_counter_read_write_delete(server, client):
    info = P4Info("stateful")
    client.set_pipeline("stateful")
    cid = info.counter_id("IngressImpl.op_counter")
    for _ in range(3):
        server.dataplane.receive(0, agg_frame(1, 2))
    size = len(agg_frame(1, 2))
    one = pb.CounterEntry(counter_id=cid)
    one.index.index = 2
    got = client.read(pb.Entity(counter_entry=one))[0].counter_entry
    assert (got.data.packet_count, got.data.byte_count) == (3, 3 * size)
    everything = client.read(pb.Entity(counter_entry=pb.CounterEntry(counter_id=cid)))
    assert [e.counter_entry.index.index for e in everything] == list(range(8))
    assert client.read(pb.Entity(counter_entry=pb.CounterEntry())) == everything
    write = pb.CounterEntry(counter_id=cid)
    write.index.index = 5
    write.data.packet_count, write.data.byte_count = 11, 22
    client.write(update(pb.Update.MODIFY, lambda e: e.counter_entry.CopyFrom(write)))
    assert server.dataplane.switch.counters["IngressImpl.op_counter"].read(5) == (11, 22)
    client.write(update(pb.Update.DELETE, lambda e: e.counter_entry.CopyFrom(one)))
    assert server.dataplane.switch.counters["IngressImpl.op_counter"].read(2) == (0, 0)
    err = expect(grpc.StatusCode.UNKNOWN, client.write,
                 update(pb.Update.INSERT, lambda e: e.counter_entry.CopyFrom(write)))
    assert "INSERT update type not supported" in batch_errors(err)[0].message
    bad = pb.CounterEntry(counter_id=cid)
    bad.index.index = 8
    expect(grpc.StatusCode.UNKNOWN, client.read, pb.Entity(counter_entry=bad))


def test_direct_counter_entries(server, client):
    info = P4Info("tables")
    client.set_pipeline("tables")
    te = exact_entry(info, 1, 1, 1, 1)
    client.write(update(pb.Update.INSERT, lambda e: e.table_entry.CopyFrom(te)))
    for _ in range(2):
        server.dataplane.receive(1, key_frame(addr=1, port=1))
    key = pb.TableEntry(table_id=te.table_id)
    key.match.extend(te.match)
    got = client.read(pb.Entity(direct_counter_entry=pb.DirectCounterEntry(table_entry=key)))
    assert got[0].direct_counter_entry.data.packet_count == 2
    wildcard = client.read(pb.Entity(direct_counter_entry=pb.DirectCounterEntry(
        table_entry=pb.TableEntry(table_id=te.table_id))))
    assert len(wildcard) == 1 and wildcard[0].direct_counter_entry.data.byte_count == \
        2 * len(key_frame())
    write = pb.DirectCounterEntry(table_entry=key)
    write.data.packet_count, write.data.byte_count = 100, 200
    client.write(update(pb.Update.MODIFY, lambda e: e.direct_counter_entry.CopyFrom(write)))
    got = client.read(pb.Entity(direct_counter_entry=pb.DirectCounterEntry(table_entry=key)))
    assert (got[0].direct_counter_entry.data.packet_count,
            got[0].direct_counter_entry.data.byte_count) == (100, 200)
    other = pb.TableEntry(table_id=info.table(T + "t_lpm").preamble.id)
    err = expect(grpc.StatusCode.INVALID_ARGUMENT, client.read,
                 pb.Entity(direct_counter_entry=pb.DirectCounterEntry(table_entry=other)))
    assert "no direct counters" in err.details()


def test_register_entries(server, client):
    info = P4Info("stateful")
    client.set_pipeline("stateful")
    rid = info.register_id("IngressImpl.r05")
    entry = pb.RegisterEntry(register_id=rid)
    entry.index.index = 3
    entry.data.bitstring = (0xFFFFFFFE).to_bytes(4, "big")
    client.write(update(pb.Update.MODIFY, lambda e: e.register_entry.CopyFrom(entry)))
    assert server.dataplane.switch.registers["IngressImpl.r05"].read(3) == 0xFFFFFFFE
    read = pb.RegisterEntry(register_id=rid)
    read.index.index = 3
    assert client.read(pb.Entity(register_entry=read))[0].register_entry.data.bitstring == \
        b"\xff\xff\xff\xfe"
    cells = client.read(pb.Entity(register_entry=pb.RegisterEntry(register_id=rid)))
    assert len(cells) == 16
    read.index.index = 16
    expect(grpc.StatusCode.OUT_OF_RANGE, client.read, pb.Entity(register_entry=read))


def test_register_access_can_be_turned_off_like_pi():
    dataplane = Dataplane()
    srv = P4RuntimeServer(dataplane, "127.0.0.1:0", register_access=False)
    srv.start()
    c = Client(srv.port)
    try:
        c.set_pipeline("stateful")
        err = expect(grpc.StatusCode.UNIMPLEMENTED, c.read,
                     pb.Entity(register_entry=pb.RegisterEntry()))
        assert "Register reads are not supported yet" in err.details()
    finally:
        c.close()
        srv.stop(grace=None)


# -- packet replication engine ---------------------------------------------------------------------

def mc_group(gid: int, replicas: list[tuple[int, int]], as_bytes: bool = False):
    g = pb.MulticastGroupEntry(multicast_group_id=gid)
    for port, rid in replicas:
        r = g.replicas.add(instance=rid)
        if as_bytes:
            r.port = port.to_bytes(2, "big")
        else:
            r.egress_port = port
    return g


def pre(kind, group=None, session=None) -> pb.Update:
    u = pb.Update(type=kind)
    if group is not None:
        u.entity.packet_replication_engine_entry.multicast_group_entry.CopyFrom(group)
    else:
        u.entity.packet_replication_engine_entry.clone_session_entry.CopyFrom(session)
    return u


def rep_frame(mode: int) -> bytes:
    return bytes.fromhex("0200000000020200000000010800") + bytes([mode]) + bytes(15) + b"p"


def test_multicast_groups(server, client):
    client.set_pipeline("replication")
    client.write(pre(pb.Update.INSERT, mc_group(5, [(3, 2), (1, 1), (2, 1)])))
    server.dataplane.receive(9, rep_frame(1))
    assert [p for p, _ in server.sent] == [1, 2, 3]
    read = client.read(pb.Entity(packet_replication_engine_entry=pb.PacketReplicationEngineEntry(
        multicast_group_entry=pb.MulticastGroupEntry(multicast_group_id=5))))
    group = read[0].packet_replication_engine_entry.multicast_group_entry
    assert [(r.egress_port, r.instance) for r in group.replicas] == [(1, 1), (2, 1), (3, 2)]
    client.write(pre(pb.Update.MODIFY, mc_group(5, [(7, 9)], as_bytes=True)))
    read = client.read(pb.Entity(packet_replication_engine_entry=pb.PacketReplicationEngineEntry(
        multicast_group_entry=pb.MulticastGroupEntry())))
    replicas = read[0].packet_replication_engine_entry.multicast_group_entry.replicas
    assert [(r.port, r.instance) for r in replicas] == [(b"\x00\x07", 9)]
    cases = [(pb.Update.INSERT, mc_group(5, [(1, 1)]), code_pb2.ALREADY_EXISTS),
             (pb.Update.INSERT, mc_group(0, [(1, 1)]), code_pb2.INVALID_ARGUMENT),
             (pb.Update.INSERT, mc_group(1 << 15, [(1, 1)]), code_pb2.OUT_OF_RANGE),
             (pb.Update.INSERT, mc_group(6, [(1, 1), (1, 1)]), code_pb2.INVALID_ARGUMENT),
             (pb.Update.DELETE, mc_group(8, []), code_pb2.NOT_FOUND),
             (pb.Update.DELETE, mc_group(5, []), code_pb2.OK)]
    err = expect(grpc.StatusCode.UNKNOWN, client.write, *[pre(k, g) for k, g, _ in cases])
    assert [e.canonical_code for e in batch_errors(err)] == [c for _, _, c in cases]
    expect(grpc.StatusCode.NOT_FOUND, client.read,
           pb.Entity(packet_replication_engine_entry=pb.PacketReplicationEngineEntry(
               multicast_group_entry=pb.MulticastGroupEntry(multicast_group_id=5))))


def test_clone_sessions(server, client):
    client.set_pipeline("replication")
    session = pb.CloneSessionEntry(session_id=7)
    session.replicas.add(egress_port=9, instance=1)
    session.replicas.add(egress_port=10, instance=2)
    client.write(pre(pb.Update.INSERT, session=session))
    server.dataplane.receive(4, rep_frame(2))
    assert [p for p, _ in server.sent] == [9, 10, 1]
    read = client.read(pb.Entity(packet_replication_engine_entry=pb.PacketReplicationEngineEntry(
        clone_session_entry=pb.CloneSessionEntry())))
    assert read[0].packet_replication_engine_entry.clone_session_entry == session
    # The group behind a session is not a user group.
    groups = client.read(pb.Entity(packet_replication_engine_entry=pb.PacketReplicationEngineEntry(
        multicast_group_entry=pb.MulticastGroupEntry())))
    assert groups == []
    cos = pb.CloneSessionEntry(session_id=8, class_of_service=1)
    trunc = pb.CloneSessionEntry(session_id=9, packet_length_bytes=64)
    cases = [(pb.Update.INSERT, session, code_pb2.ALREADY_EXISTS),
             (pb.Update.INSERT, pb.CloneSessionEntry(session_id=0), code_pb2.INVALID_ARGUMENT),
             (pb.Update.INSERT, pb.CloneSessionEntry(session_id=40000),
              code_pb2.INVALID_ARGUMENT),
             (pb.Update.INSERT, cos, code_pb2.UNIMPLEMENTED),
             (pb.Update.INSERT, trunc, code_pb2.UNKNOWN),
             (pb.Update.MODIFY, pb.CloneSessionEntry(session_id=11), code_pb2.NOT_FOUND),
             (pb.Update.DELETE, session, code_pb2.OK)]
    err = expect(grpc.StatusCode.UNKNOWN, client.write,
                 *[pre(k, session=s) for k, s, _ in cases])
    assert [e.canonical_code for e in batch_errors(err)] == [c for _, _, c in cases]
    server.sent.clear()
    server.dataplane.receive(4, rep_frame(2))
    assert [p for p, _ in server.sent] == [1]


# -- arbitration and packet I/O --------------------------------------------------------------------

def test_arbitration_primary_backup_and_failover(server):
    a, b = Client(server.port), Client(server.port)
    try:
        first = a.connect(1)
        assert first.arbitration.status.code == code_pb2.OK
        notice = b.connect(2)
        assert notice.arbitration.status.code == code_pb2.OK  # b is the new primary
        demoted = a.inbox.get(timeout=5)
        assert demoted.arbitration.status.code == code_pb2.ALREADY_EXISTS
        assert demoted.arbitration.election_id.low == 2
        err = expect(grpc.StatusCode.PERMISSION_DENIED, a.set_pipeline, "tables")
        assert err.details() == "Not primary"
        b.set_pipeline("tables")
        b.write()
        expect(grpc.StatusCode.PERMISSION_DENIED, a.write)
        assert a.read(pb.Entity(table_entry=pb.TableEntry(table_id=0))) is not None
        b.close()
        promoted = a.inbox.get(timeout=5)
        assert promoted.arbitration.status.code == code_pb2.OK
        a.write()
    finally:
        a.close()
        b.close()


def test_duplicate_election_id_and_no_connection_rules(server):
    a, b = Client(server.port), Client(server.port)
    try:
        a.connect(5)
        req = pb.StreamMessageRequest()
        req.arbitration.device_id = 0
        req.arbitration.election_id.low = 5
        b_stream = b.stub.StreamChannel(iter([req]))
        with pytest.raises(grpc.RpcError) as exc:
            list(b_stream)
        assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "Election id already exists" in exc.value.details()
    finally:
        a.close()
        b.close()
    lone = Client(server.port)
    try:
        lone.election_id = 1
        expect(grpc.StatusCode.PERMISSION_DENIED, lone.set_pipeline, "tables")
        lone.election_id = None
        lone.set_pipeline("tables")  # no connection and no election id: accepted, like PI
    finally:
        lone.close()


def test_packet_in_and_packet_out(server):
    c = Client(server.port)
    try:
        c.connect(1)
        c.set_pipeline("replication")
        info = P4Info("replication")
        meta_in = next(m for m in info.msg.controller_packet_metadata
                       if m.preamble.name == "packet_in")
        server.dataplane.receive(3, rep_frame(10))
        msg = c.inbox.get(timeout=5)
        assert msg.HasField("packet")
        values = {m.metadata_id: m.value for m in msg.packet.metadata}
        ids = {f.name: f.id for f in meta_in.metadata}
        assert values[ids["ingress_port"]] == b"\x03"
        assert values[ids["reason"]] == b"\x2a"
        assert msg.packet.payload[:14] == rep_frame(10)[:14]

        meta_out = next(m for m in info.msg.controller_packet_metadata
                        if m.preamble.name == "packet_out")
        out_ids = {f.name: f.id for f in meta_out.metadata}
        req = pb.StreamMessageRequest()
        req.packet.payload = rep_frame(0)
        req.packet.metadata.add(metadata_id=out_ids["egress_port"], value=b"\x06")
        req.packet.metadata.add(metadata_id=out_ids["tag"], value=b"\x77")
        c.send(req)
        for _ in range(100):
            if server.sent:
                break
            threading.Event().wait(0.02)
        assert server.sent[-1][0] == 6
        assert server.sent[-1][1][14 + 3] == 0x77
    finally:
        c.close()


def test_capabilities(client):
    assert client.stub.Capabilities(pb.CapabilitiesRequest()).p4runtime_api_version == "1.3.0"

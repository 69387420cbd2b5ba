"""The P4Runtime server over real gRPC: pipeline configuration and table entries, with the status
codes and messages p4lang/PI gives for wrong requests."""

from __future__ import annotations

import grpc
from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2 as pb

from tests.softswitch.frames import key_frame
from tests.softswitch.p4info import P4Info, exact_entry
from tests.softswitch.p4runtime_client import Client, SetAction, batch_errors, expect, update
from tests.softswitch.programs import program_json

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


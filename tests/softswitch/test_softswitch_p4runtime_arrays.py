"""The P4Runtime server over real gRPC: counter, direct counter and register entries, with the
status codes and messages p4lang/PI gives for wrong requests."""

from __future__ import annotations

import struct

import grpc
from p4.v1 import p4runtime_pb2 as pb

from softswitch.dataplane import Dataplane
from softswitch.p4runtime_server import P4RuntimeServer
from tests.softswitch.frames import key_frame
from tests.softswitch.p4info import P4Info, exact_entry
from tests.softswitch.p4runtime_client import Client, batch_errors, expect, update


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
    other = pb.TableEntry(table_id=info.table("IngressImpl.t_lpm").preamble.id)
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


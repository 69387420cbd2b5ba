"""The P4Runtime server over real gRPC: multicast group and clone session entries, with the
status codes and messages p4lang/PI gives for wrong requests."""

from __future__ import annotations

import grpc
from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2 as pb

from tests.softswitch.frames import replication_frame
from tests.softswitch.p4runtime_client import batch_errors, expect


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


def test_multicast_groups(server, client):
    client.set_pipeline("replication")
    client.write(pre(pb.Update.INSERT, mc_group(5, [(3, 2), (1, 1), (2, 1)])))
    server.dataplane.receive(9, replication_frame(1))
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
    server.dataplane.receive(4, replication_frame(2))
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
    server.dataplane.receive(4, replication_frame(2))
    assert [p for p, _ in server.sent] == [1]


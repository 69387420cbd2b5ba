"""The P4Runtime server over real gRPC: arbitration between connections, packet I/O and
capabilities, as p4lang/PI's server behaves."""

from __future__ import annotations

import threading

import grpc
import pytest
from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2 as pb

from tests.softswitch.frames import replication_frame
from tests.softswitch.p4info import P4Info
from tests.softswitch.p4runtime_client import Client, expect


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
        server.dataplane.receive(3, replication_frame(10))
        msg = c.inbox.get(timeout=5)
        assert msg.HasField("packet")
        values = {m.metadata_id: m.value for m in msg.packet.metadata}
        ids = {f.name: f.id for f in meta_in.metadata}
        assert values[ids["ingress_port"]] == b"\x03"
        assert values[ids["reason"]] == b"\x2a"
        assert msg.packet.payload[:14] == replication_frame(10)[:14]

        meta_out = next(m for m in info.msg.controller_packet_metadata
                        if m.preamble.name == "packet_out")
        out_ids = {f.name: f.id for f in meta_out.metadata}
        req = pb.StreamMessageRequest()
        req.packet.payload = replication_frame(0)
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

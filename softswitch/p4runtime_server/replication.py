"""P4Runtime's PacketReplicationEngineEntry: multicast groups and clone sessions, with the checks,
status codes and messages of PI's ``PreMcMgr`` and ``PreCloneMgr``, applied to the switch's
packet replication engine (softswitch/core/pre.py).

The entries are kept as the client wrote them, so reads give back the port kind it used
(``egress_port`` or ``port``), as PI does.  A clone session's replicas are a multicast group with
an id above the client's range, as in PI.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2 as pb

from .pipeline import check_update_type, failed, invalid

if TYPE_CHECKING:
    from ..dataplane import Dataplane

Update = pb.Update

FIRST_RESERVED_GROUP = 1 << 15  # PI keeps group ids above this for clone sessions
MAX_CLONE_SESSION = 32768


class ReplicationManager:
    """The multicast groups and clone sessions of one device."""

    def __init__(self, dataplane: Dataplane):
        self.dataplane = dataplane
        self._groups: dict[int, list[pb.Replica]] = {}
        self._sessions: dict[int, pb.CloneSessionEntry] = {}

    @property
    def _pre(self):
        return self.dataplane.switch.pre

    def clear(self) -> None:
        """Forget every entry (a new pipeline starts with an empty PRE)."""
        self._groups.clear()
        self._sessions.clear()

    def write(self, kind: int, entry: pb.PacketReplicationEngineEntry) -> None:
        which = entry.WhichOneof("type")
        if which == "multicast_group_entry":
            self._mc_write(kind, entry.multicast_group_entry)
        elif which == "clone_session_entry":
            self._clone_write(kind, entry.clone_session_entry)
        else:
            raise invalid("Invalid PRE operation")

    def read(self, request: pb.PacketReplicationEngineEntry) -> list[pb.Entity]:
        which = request.WhichOneof("type")
        out = []
        if which == "multicast_group_entry":
            gid = request.multicast_group_entry.multicast_group_id
            if gid >= FIRST_RESERVED_GROUP:
                raise failed(code_pb2.OUT_OF_RANGE, "Group id value is too high")
            if gid == 0:
                gids = sorted(self._groups)
            elif gid in self._groups:
                gids = [gid]
            else:
                raise failed(code_pb2.NOT_FOUND, "Multicast group does not exist")
            for g in gids:
                if g >= FIRST_RESERVED_GROUP:
                    continue
                entity = pb.Entity()
                msg = entity.packet_replication_engine_entry.multicast_group_entry
                msg.multicast_group_id = g
                msg.replicas.extend(_sorted_replicas(self._groups[g]))
                out.append(entity)
        elif which == "clone_session_entry":
            sid = request.clone_session_entry.session_id
            if sid == 0:
                sids = sorted(self._sessions)
            elif sid in self._sessions:
                sids = [sid]
            else:
                raise failed(code_pb2.NOT_FOUND, "Clone session id does not exist")
            for s in sids:
                entity = pb.Entity()
                msg = entity.packet_replication_engine_entry.clone_session_entry
                msg.CopyFrom(self._sessions[s])
                del msg.replicas[:]
                msg.replicas.extend(_sorted_replicas(self._groups[FIRST_RESERVED_GROUP + s]))
                out.append(entity)
        else:
            raise invalid("Invalid PRE operation")
        return out

    @staticmethod
    def _replica_ports(replicas) -> list[tuple[int, int]]:
        out, seen = [], set()
        for r in replicas:
            which = r.WhichOneof("port_kind")
            if which == "egress_port":
                port = r.egress_port
            elif which == "port":
                if not r.port:
                    raise invalid("Port must not be the empty string")
                if len(r.port) > 4:
                    raise failed(code_pb2.UNIMPLEMENTED,
                                 f"Got port of {len(r.port)} bytes, but only 4 bytes are "
                                 "supported")
                port = int.from_bytes(r.port, "big")
            else:
                raise invalid("Missing port in multicast group replica")
            key = (which, port, len(r.port) if which == "port" else 0, r.instance)
            if key in seen:
                raise invalid("Duplicate replica in multicast group")
            seen.add(key)
            out.append((port, r.instance))
        return out

    def _mc_write(self, kind: int, group: pb.MulticastGroupEntry) -> None:
        gid = group.multicast_group_id
        if gid == 0:
            raise invalid("0 is not a valid group id")
        if gid >= FIRST_RESERVED_GROUP:
            raise failed(code_pb2.OUT_OF_RANGE, "Group id value is too high")
        check_update_type(kind)
        self._group_update(kind, gid, group.replicas)

    def _group_update(self, kind: int, gid: int, replicas) -> None:
        if kind == Update.INSERT:
            if gid in self._groups:
                raise failed(code_pb2.ALREADY_EXISTS, "Multicast group already exists")
        elif gid not in self._groups:
            raise failed(code_pb2.NOT_FOUND, "Multicast group does not exist")
        if kind == Update.DELETE:
            self._pre.delete_group(gid)
            del self._groups[gid]
            return
        ports = self._replica_ports(replicas)
        self._pre.set_group(gid, ports)
        self._groups[gid] = [_copy(r) for r in replicas]

    def _clone_write(self, kind: int, session: pb.CloneSessionEntry) -> None:
        sid = session.session_id
        if sid == 0:
            raise invalid("0 is not a valid session id")
        check_update_type(kind)
        if not 1 <= sid < MAX_CLONE_SESSION:
            raise invalid("Clone session id out-of-range")
        if kind == Update.INSERT and sid in self._sessions:
            raise failed(code_pb2.ALREADY_EXISTS, "Clone session id already exists")
        if kind != Update.INSERT and sid not in self._sessions:
            raise failed(code_pb2.NOT_FOUND, "Clone session id does not exist")
        gid = FIRST_RESERVED_GROUP + sid
        if kind == Update.DELETE:
            self._pre.delete_clone_session(sid)
            self._group_update(Update.DELETE, gid, [])
            del self._sessions[sid]
            return
        if session.class_of_service != 0:
            raise failed(code_pb2.UNIMPLEMENTED, "COS for clone sessions not supported yet")
        if session.packet_length_bytes != 0:
            # bmv2 does not implement truncation of clones (NOT_IMPLEMENTED_BY_TARGET in PI).
            raise failed(code_pb2.UNKNOWN, "Error when creating clone session in target")
        self._group_update(Update.INSERT if kind == Update.INSERT else Update.MODIFY, gid,
                           session.replicas)
        self._pre.set_clone_session(sid, mgid=gid)
        saved = pb.CloneSessionEntry()
        saved.CopyFrom(session)
        self._sessions[sid] = saved


def _copy(replica: pb.Replica) -> pb.Replica:
    out = pb.Replica()
    out.CopyFrom(replica)
    return out


def _sorted_replicas(replicas: list[pb.Replica]) -> list[pb.Replica]:
    """PI returns replicas grouped by instance, ports in increasing order."""
    def key(r: pb.Replica):
        port = r.egress_port if r.WhichOneof("port_kind") == "egress_port" else \
            int.from_bytes(r.port, "big")
        return (r.instance, r.WhichOneof("port_kind") != "egress_port", port)
    return sorted(replicas, key=key)

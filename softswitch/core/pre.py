"""The packet replication engine: multicast groups and clone (mirroring) sessions.

A multicast group is a list of nodes, one per replication id (rid), each with a set of ports; a
packet multicast to the group gets one copy per (node, port), nodes in rid order and ports in
increasing order -- the layout simple_switch_grpc's PI layer creates from a P4Runtime group.
A clone session sends copies to an egress port and/or to a multicast group, like bmv2's
``MirroringSessionConfig``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass

from .errors import StateError

log = logging.getLogger("softswitch")

MAX_MIRROR_SESSION_ID = (1 << 15) - 1


@dataclass(frozen=True)
class CloneSession:
    egress_port: int | None = None
    mgid: int | None = None


class PacketReplicationEngine:
    def __init__(self, lock: threading.RLock):
        self._lock = lock
        self._groups: dict[int, list[tuple[int, int]]] = {}  # gid -> [(port, rid)] in order
        self._sessions: dict[int, CloneSession] = {}

    # -- multicast groups -----------------------------------------------------------------------

    def set_group(self, gid: int, replicas: Iterable[tuple[int, int]]) -> None:
        """Create or replace group ``gid`` with ``replicas``, a list of (port, rid)."""
        replicas = list(replicas)
        for port, rid in replicas:
            if port < 0 or not 0 <= rid < 1 << 16:
                raise StateError(f"invalid replica (port={port}, rid={rid})")
        if len(set(replicas)) != len(replicas):
            raise StateError(f"duplicate replica in multicast group {gid}")
        if not 0 <= gid < 1 << 16:
            raise StateError(f"invalid multicast group id {gid}")
        ordered = sorted(replicas, key=lambda r: (r[1], r[0]))
        with self._lock:
            self._groups[gid] = ordered

    def delete_group(self, gid: int) -> None:
        with self._lock:
            if self._groups.pop(gid, None) is None:
                raise StateError(f"multicast group {gid} does not exist")

    def group(self, gid: int) -> list[tuple[int, int]] | None:
        with self._lock:
            replicas = self._groups.get(gid)
            return None if replicas is None else list(replicas)

    def groups(self) -> dict[int, list[tuple[int, int]]]:
        with self._lock:
            return {gid: list(r) for gid, r in self._groups.items()}

    def replicate(self, gid: int) -> list[tuple[int, int]]:
        """(port, rid) copies for ``gid``; packet path, called with the switch lock held."""
        replicas = self._groups.get(gid)
        if replicas is None:
            log.warning("Replication requested for mgid %d, which is not known to the PRE", gid)
            return []
        return replicas

    # -- clone sessions -------------------------------------------------------------------------

    def set_clone_session(self, session_id: int, egress_port: int | None = None,
                          mgid: int | None = None) -> None:
        if not 0 <= session_id <= MAX_MIRROR_SESSION_ID:
            raise StateError(f"clone session id {session_id} is out of range "
                             f"[0, {MAX_MIRROR_SESSION_ID}]")
        with self._lock:
            self._sessions[session_id] = CloneSession(egress_port, mgid)

    def delete_clone_session(self, session_id: int) -> None:
        with self._lock:
            if self._sessions.pop(session_id, None) is None:
                raise StateError(f"clone session {session_id} does not exist")

    def clone_session(self, session_id: int) -> CloneSession | None:
        with self._lock:
            return self._sessions.get(session_id)

    def clone_sessions(self) -> dict[int, CloneSession]:
        with self._lock:
            return dict(self._sessions)

    def reset(self) -> None:
        with self._lock:
            self._groups.clear()
            self._sessions.clear()

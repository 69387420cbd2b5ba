"""The SA-ATP controller over P4Runtime (bmv2, the embedded target): holds the desired state of
one switch (pipeline, ports, hosts, jobs, drop simulator) and makes the switch match it.

Every change follows the same rule: validate and allocate first, write second, so a rejected
request leaves the switch untouched. :meth:`Controller.reconcile` re-pushes the whole desired
state after a switch restart or a reconnect; it computes the difference with what the switch
holds, so running it twice writes nothing the second time. The job API itself is
backend-neutral (``switch_controller.SwitchController``); this module is how it speaks
P4Runtime.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path

from p4.v1 import p4runtime_pb2

from control_plane import p4runtime_entries as p4rt
from control_plane.allocation import AdmittedJob, one_pipe
from control_plane.connection import SwitchConnection, Update
from control_plane.contracts import Write
from control_plane.controls.aggregator import Aggregator
from control_plane.controls.packet_stats import PacketStats
from control_plane.desired_state import DesiredState
from control_plane.entries import MulticastGroup, TableEntry
from control_plane.p4info import P4Info
from control_plane.switch_controller import SwitchController
from protocol.codec import mac_bytes, mac_str
from protocol.jobspec import JobSpec

log = logging.getLogger(__name__)

COMPILED = Path(__file__).resolve().parent.parent / "p4src" / "compiled"


@dataclass(frozen=True)
class Pipeline:
    """A compiled P4 program: bmv2 JSON and P4Info."""

    json_path: Path = COMPILED / "sa_atp.json"
    p4info_path: Path = COMPILED / "sa_atp.p4info.txtpb"

    def load(self) -> tuple[P4Info, bytes, int]:
        device_config = self.json_path.read_bytes()
        p4info_text = self.p4info_path.read_text()
        digest = hashlib.sha256(device_config + p4info_text.encode()).digest()
        return P4Info.from_text(p4info_text), device_config, int.from_bytes(digest[:8], "big")


class Controller(SwitchController):
    """Drives one switch over P4Runtime."""

    def __init__(self, address: str, ports, device_id: int = 0, election_id: int = 1,
                 pipeline: Pipeline | None = None, hosts: dict[str, int] | None = None,
                 timeout: float = 10.0):
        super().__init__(DesiredState(ports=tuple(sorted(set(ports))),
                                      hosts={mac_str(mac_bytes(m)): p
                                             for m, p in (hosts or {}).items()}))
        self.address = address
        self.device_id = device_id
        self.election_id = election_id
        self.timeout = timeout
        self.pipeline = pipeline or Pipeline()
        self.aggregator = Aggregator()
        self.ingress_stats = PacketStats("SaAtpIngress.stats")
        self.egress_stats = PacketStats("SaAtpEgress.stats")
        self.conn: SwitchConnection | None = None
        self._p4info, self._device_config, self._cookie = self.pipeline.load()

    # -- connection and pipeline -------------------------------------------------------------

    def connect(self, read_only: bool = False) -> Controller:
        """Open the P4Runtime session; ``read_only`` leaves the primary role to others."""
        self.close()
        self.conn = SwitchConnection(self.address, self.device_id, self.election_id,
                                     self.timeout, arbitrate=not read_only)
        self.conn.use_p4info(self._p4info)
        return self

    def load_pipeline(self, force: bool = False) -> bool:
        """Push the pipeline unless the switch already runs it; True if pushed (which resets
        every table, register and counter on the switch).

        Multicast groups are deleted first: bmv2's P4Runtime server forgets them on a pipeline
        push while bmv2 keeps replicating with them, so groups re-created afterwards would add
        their copies to the old ones and every result would arrive twice."""
        conn = self._connection()
        cookie = conn.pipeline_cookie()
        if not force and cookie == self._cookie:
            return False
        if cookie is not None:
            stale = self.read_groups().values()
            if stale:
                conn.write([p4rt.delete_group(g) for g in stale])
        conn.set_pipeline(self._p4info, self._device_config, self._cookie)
        log.info("%s: pipeline loaded", self.address)
        return True

    def admission_updates(self, spec: JobSpec) -> tuple[AdmittedJob, list[Update]]:
        """Validate and place a job, and return the updates that install it (its jobs entry
        last) without writing anything or recording the job; :meth:`admit` writes them, and
        tools that replay a controller's writes on another target use them directly."""
        job, writes = self._admission_writes(spec)
        return job, [self._update(kind, item) for kind, item in writes]

    def pipe_of(self, spec: JobSpec) -> int:
        """A v1model switch has one pipe."""
        return one_pipe(spec)

    # -- observation ------------------------------------------------------------------------

    def read_groups(self) -> dict[int, MulticastGroup]:
        entity = p4runtime_pb2.Entity()
        entity.packet_replication_engine_entry.multicast_group_entry.multicast_group_id = 0
        groups = (p4rt.read_group(e.packet_replication_engine_entry)
                  for e in self._connection().read(entity))
        return {g.group_id: g for g in groups}

    def status(self) -> dict:
        return {"switch": self.address, "device_id": self.device_id,
                "pipeline_loaded": self._connection().pipeline_cookie() == self._cookie,
                **super().status()}

    # -- the P4Runtime side of the backend ----------------------------------------------------

    def _write(self, writes: list[Write]) -> None:
        self._connection().write([self._update(kind, item) for kind, item in writes])

    def _update(self, kind: str, item: TableEntry | MulticastGroup) -> Update:
        if isinstance(item, MulticastGroup):
            return {"insert": p4rt.insert_group, "modify": p4rt.modify_group,
                    "delete": p4rt.delete_group}[kind](item)
        return {"insert": p4rt.insert, "modify": p4rt.modify,
                "delete": p4rt.delete}[kind](item, self._p4info)

    def _read_table(self, table: str) -> list[TableEntry]:
        conn = self._connection()
        entity = p4runtime_pb2.Entity()
        entity.table_entry.table_id = self._p4info.table(table).preamble.id
        default = p4runtime_pb2.Entity()
        default.table_entry.table_id = entity.table_entry.table_id
        default.table_entry.is_default_action = True
        found = [p4rt.read_table_entry(e.table_entry, self._p4info) for e in conn.read(entity)]
        found += [p4rt.read_table_entry(e.table_entry, self._p4info) for e in conn.read(default)]
        return found

"""The SA-ATP controller: holds the desired state of one switch (pipeline, ports, hosts, jobs,
drop simulator) and makes the switch match it.

Every change follows the same rule: validate and allocate first, write second, so a rejected
request leaves the switch untouched. :meth:`Controller.reconcile` re-pushes the whole desired
state after a switch restart or a reconnect; it computes the difference with what the switch
holds, so running it twice writes nothing the second time.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path

from p4.v1 import p4runtime_pb2

from control_plane.connection import SwitchConnection, Update
from control_plane.controls.aggregator import Aggregator, AggregatorState
from control_plane.controls.job_admission import JobConfig
from control_plane.controls.packet_stats import PacketStats
from control_plane.desired_state import DesiredState
from control_plane.entries import MulticastGroup, TableEntry
from control_plane.jobs import AdmittedJob, JobSpec, SpecError
from control_plane.p4info import P4Info
from control_plane.plan import Plan
from protocol.codec import mac_bytes, mac_str

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


class Controller:
    """Drives one switch over P4Runtime."""

    def __init__(self, address: str, ports, device_id: int = 0, election_id: int = 1,
                 pipeline: Pipeline | None = None, hosts: dict[str, int] | None = None):
        self.address = address
        self.device_id = device_id
        self.election_id = election_id
        self.pipeline = pipeline or Pipeline()
        self.plan = Plan(DesiredState(ports=tuple(sorted(set(ports))),
                                      hosts={mac_str(mac_bytes(m)): p
                                             for m, p in (hosts or {}).items()}))
        # the controls with tables, as the plan names them
        self.admission = self.plan.admission
        self.replica_rewrite = self.plan.replica_rewrite
        self.source_guard = self.plan.source_guard
        self.l2 = self.plan.l2
        self.ingress_drop_sim = self.plan.ingress_drop_sim
        self.egress_drop_sim = self.plan.egress_drop_sim
        self.aggregator = Aggregator()
        self.ingress_stats = PacketStats("SaAtpIngress.stats")
        self.egress_stats = PacketStats("SaAtpEgress.stats")
        self.conn: SwitchConnection | None = None
        self._p4info, self._device_config, self._cookie = self.pipeline.load()

    # -- connection and pipeline -------------------------------------------------------------

    def connect(self, timeout: float = 10.0) -> Controller:
        self.close()
        self.conn = SwitchConnection(self.address, self.device_id, self.election_id, timeout)
        self.conn.use_p4info(self._p4info)
        return self

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def __enter__(self) -> Controller:
        return self if self.conn else self.connect()

    def __exit__(self, *exc) -> None:
        self.close()

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
                conn.write([_delete_group(g) for g in stale])
        conn.set_pipeline(self._p4info, self._device_config, self._cookie)
        log.info("%s: pipeline loaded", self.address)
        return True

    # -- jobs -----------------------------------------------------------------------------------

    @property
    def desired(self) -> DesiredState:
        return self.plan.desired

    @desired.setter
    def desired(self, state: DesiredState) -> None:
        self.plan.desired = state

    @property
    def jobs(self) -> dict[int, AdmittedJob]:
        return self.plan.jobs

    def admit(self, spec: JobSpec) -> AdmittedJob:
        """Validate, allocate, then install a job: the aggregators of its range are cleared
        before its jobs entry, written last, lets its packets in."""
        job, updates = self.admission_updates(spec)
        conn = self._connection()
        self.aggregator.clear(conn, job.aggregator_range())
        conn.write(updates)
        self.desired.allocator.add(job)
        log.info("job %d admitted: slots %d..%d, %d workers", spec.id, job.slot_base,
                 job.slot_base + spec.slots - 1, len(spec.workers))
        return job

    def admission_updates(self, spec: JobSpec) -> tuple[AdmittedJob, list[Update]]:
        """Validate and place a job, and return the updates that install it (its jobs entry
        last) without writing anything or recording the job; :meth:`admit` writes them, and
        tools that replay a controller's writes on another target use them directly."""
        job, entries = self.plan.place(spec)
        return job, ([_insert_group(self.plan.group(job))]
                     + [_insert(e, self._p4info) for e in entries])

    def add_transit(self, job_id: int) -> None:
        """Forward job ``job_id``'s packets instead of aggregating them (the job is aggregated
        by another switch, e.g. the spine of a two-level topology)."""
        entry = self.plan.transit(job_id)
        if entry is not None:
            self._connection().write([_insert(entry, self._p4info)])

    def add_host(self, mac: str, port: int) -> None:
        """Forward frames for ``mac`` to ``port`` (hosts that are not workers of a job here)."""
        self.plan.add_host(mac, port)
        self._sync_tables(self.l2.tables, self.plan.desired_entries())

    def remove(self, job_id: int) -> None:
        """Stop a job's packets first (its jobs entry), then delete the rest and clear its
        aggregators, and free its range."""
        job = self.plan.job(job_id)
        conn = self._connection()
        conn.write([_delete(e, self._p4info) for e in self.plan.removal(job)]
                   + [_delete_group(self.plan.group(job))])
        self.desired.allocator.remove(job_id)
        self.aggregator.clear(conn, job.aggregator_range())
        log.info("job %d removed", job_id)

    def set_membership(self, job_id: int, fan_in: int | None = None,
                       expected: int | None = None) -> AdmittedJob:
        """Change a running job's fan-in and/or expected set; the next packet sees it."""
        changed = self.plan.membership(job_id, fan_in, expected)
        self._connection().write([_modify(self.admission.job_entry(changed), self._p4info)])
        self.desired.allocator.jobs[job_id] = changed
        return changed

    def set_loss(self, probability: float, port: int | None = None,
                 direction: str = "ingress") -> None:
        """Drop-simulator probability for one port, or for all ports without their own."""
        sim = self.plan.set_loss(probability, port, direction)
        self._sync_tables(sim.tables, self.plan.desired_entries())

    # -- observation ------------------------------------------------------------------------

    def read_jobs(self) -> dict[int, JobConfig]:
        """The jobs table as the switch holds it."""
        configs = map(self.admission.decode_job, self.read_entries(self.admission.jobs_table))
        return {c.job_id: c for c in configs if c is not None}

    def read_entries(self, table: str) -> list[TableEntry]:
        """A table's entries as the switch holds them, without its default entry."""
        return [e for e in self._read_table(table) if not e.is_default]

    def read_groups(self) -> dict[int, MulticastGroup]:
        entity = p4runtime_pb2.Entity()
        entity.packet_replication_engine_entry.multicast_group_entry.multicast_group_id = 0
        groups = (MulticastGroup.from_proto(e.packet_replication_engine_entry)
                  for e in self._connection().read(entity))
        return {g.group_id: g for g in groups}

    def counters(self, job_id: int | None = None) -> dict:
        """Packets and drops per op / reason, at ingress (received) and egress (sent), for a job
        plus its evictions; with None, for traffic that matched no job plus the controller's
        own management requests."""
        conn = self._connection()
        index = 0 if job_id is None else self.plan.job(job_id).job_index
        result = {"ingress": self.ingress_stats.read(conn, index),
                  "egress": self.egress_stats.read(conn, index)}
        if job_id is None:
            result["management"] = self.aggregator.management(conn)
        else:
            result["evictions"] = self.aggregator.evictions(conn, index)
        return result

    def read_slot(self, job_id: int, slot: int) -> tuple[AggregatorState, AggregatorState]:
        """Both shadow sets of one of a job's slots."""
        job = self.plan.job(job_id)
        if not 0 <= slot < job.spec.slots:
            raise SpecError(f"job {job_id} has slots 0..{job.spec.slots - 1}, not {slot}")
        index = 2 * (job.slot_base + slot)
        a, b = self.aggregator.read(self._connection(), [index, index + 1])
        return a, b

    def status(self) -> dict:
        return {"switch": self.address, "device_id": self.device_id,
                "pipeline_loaded": self._connection().pipeline_cookie() == self._cookie,
                "ports": list(self.desired.ports),
                "jobs": {jid: {"slots": [j.slot_base, j.slot_base + j.spec.slots - 1],
                               "workers": len(j.spec.workers), "fan_in": j.spec.effective_fan_in,
                               "expected": f"{j.spec.effective_expected:#x}"}
                         for jid, j in sorted(self.jobs.items())},
                "loss": {"ingress": self.desired.ingress_loss,
                         "egress": self.desired.egress_loss}}

    # -- reconciliation ---------------------------------------------------------------------

    def reconcile(self) -> dict[str, int]:
        """Make the switch hold exactly the desired state; returns how many writes it took.

        If the switch lost its pipeline (restart), the pipeline is pushed again (which also
        leaves every register cleared); tables and groups are then brought to the desired
        entries by difference, so an up-to-date switch gets no writes at all."""
        pushed = self.load_pipeline()
        desired = self.plan.desired_entries()
        counts = {"pipeline": int(pushed)}
        counts["groups"] = self._sync_groups()
        tables = {e.table for e in desired} | set(self.plan.tables())
        counts["entries"] = self._sync_tables(sorted(tables), desired)
        return counts

    def save_state(self, path: str | Path) -> None:
        Path(path).write_text(self.desired.to_json() + "\n")

    # -- internals --------------------------------------------------------------------------

    def _connection(self) -> SwitchConnection:
        if self.conn is None:
            raise RuntimeError("controller is not connected; call connect() first")
        return self.conn

    def _table_controls(self):
        return self.plan.table_controls()

    def _read_table(self, table: str) -> list[TableEntry]:
        conn = self._connection()
        entity = p4runtime_pb2.Entity()
        entity.table_entry.table_id = self._p4info.table(table).preamble.id
        default = p4runtime_pb2.Entity()
        default.table_entry.table_id = entity.table_entry.table_id
        default.table_entry.is_default_action = True
        found = [TableEntry.from_proto(e.table_entry, self._p4info) for e in conn.read(entity)]
        found += [TableEntry.from_proto(e.table_entry, self._p4info) for e in conn.read(default)]
        return found

    def _sync_tables(self, tables, desired: list[TableEntry]) -> int:
        updates = []
        for table in tables:
            want = {e.key: e for e in desired if e.table == table}
            have = {e.key: e for e in self._read_table(table)}
            for key, entry in want.items():
                if key not in have:
                    updates.append(_insert(entry, self._p4info))
                elif have[key] != entry:
                    updates.append(_modify(entry, self._p4info))
            updates += [_delete(e, self._p4info) for k, e in have.items()
                        if k not in want and not e.is_default]
        if updates:
            self._connection().write(updates)
        return len(updates)

    def _sync_groups(self) -> int:
        want = {g.group_id: g for g in self.plan.desired_groups()}
        have = self.read_groups()
        updates = [_insert_group(g) for gid, g in want.items() if gid not in have]
        updates += [_modify_group(g) for gid, g in want.items() if gid in have and have[gid] != g]
        updates += [_delete_group(g) for gid, g in have.items() if gid not in want]
        if updates:
            self._connection().write(updates)
        return len(updates)


def _update(kind, entity_setter) -> Update:
    update = Update(type=kind)
    entity_setter(update.entity)
    return update


def _insert(entry: TableEntry, p4info: P4Info) -> Update:
    return _table_update(Update.INSERT, entry, p4info)


def _modify(entry: TableEntry, p4info: P4Info) -> Update:
    return _table_update(Update.MODIFY, entry, p4info)


def _delete(entry: TableEntry, p4info: P4Info) -> Update:
    return _table_update(Update.DELETE, entry, p4info)


def _table_update(kind, entry: TableEntry, p4info: P4Info) -> Update:
    if entry.is_default:
        kind = Update.MODIFY  # a default entry always exists; it can only be modified
    return _update(kind, lambda e: e.table_entry.CopyFrom(entry.to_proto(p4info)))


def _insert_group(group: MulticastGroup) -> Update:
    return _update(Update.INSERT,
                   lambda e: e.packet_replication_engine_entry.CopyFrom(group.to_proto()))


def _modify_group(group: MulticastGroup) -> Update:
    return _update(Update.MODIFY,
                   lambda e: e.packet_replication_engine_entry.CopyFrom(group.to_proto()))


def _delete_group(group: MulticastGroup) -> Update:
    return _update(Update.DELETE,
                   lambda e: e.packet_replication_engine_entry.CopyFrom(group.to_proto()))

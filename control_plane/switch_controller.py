"""The controller's API, whatever the switch: admit and remove jobs, change their membership,
set the drop simulator, forward hosts, read back jobs, entries, groups, counters and slots, and
reconcile a restarted switch.

:class:`SwitchController` does all of it from the plan (``plan.py``) and a backend's few
primitives (``contracts.SwitchBackend``): write planned changes, read a table and the multicast
groups, reach the aggregators and counters. The P4Runtime backend (bmv2, the embedded target) is
``controller.Controller``; the BF Runtime backend (Tofino) is ``tofino.controller``.
"""

from __future__ import annotations

import logging
from pathlib import Path

from control_plane.allocation import AdmittedJob
from control_plane.contracts import AggregatorState, Write
from control_plane.controls.job_admission import JobConfig
from control_plane.desired_state import DesiredState
from control_plane.entries import TableEntry
from control_plane.plan import Plan
from protocol.jobspec import JobSpec, SpecError

log = logging.getLogger(__name__)


class SwitchController:
    """The job API over a backend: a subclass implements ``contracts.SwitchBackend`` (its
    aggregator and packet-stats controls, connect, load_pipeline, pipe_of, read_groups, _write and
    _read_table). The table controls are the plan's (``plan.admission``, ``plan.l2``, …)."""

    def __init__(self, desired: DesiredState):
        self.plan = Plan(desired)
        self.conn = None

    def resize_pool(self, pool_slots: int) -> None:
        """Reserve the switch's top ``pool_slots`` slots as the shared pool from which jobs
        borrow (docs/protocol.md §4.6)."""
        self.desired.allocator.resize_pool(pool_slots)

    # -- aggregators, in the job's pipe -------------------------------------------------------

    def _clear_aggregators(self, job: AdmittedJob, indices: list[int] | None = None) -> None:
        """The job's own range, or ``indices`` (pool aggregators it holds)."""
        self.aggregator.clear(self._connection(),
                              job.aggregator_range() if indices is None else indices,
                              self.pipe_of(job.spec))

    def _read_aggregators(self, job: AdmittedJob, indices: list[int]) -> list[AggregatorState]:
        return self.aggregator.read(self._connection(), indices, self.pipe_of(job.spec))

    def _release_pool(self, job: AdmittedJob) -> None:
        """Clear the pool lanes a removed job's chunks still hold: nothing else would ever
        free those held by a chunk it left aggregating."""
        if not job.spec.borrow:
            return
        own = job.aggregator_range()
        pool = list(self.desired.allocator.pool_range())
        held = [s.index for s in self._read_aggregators(job, pool) if s.held_by in own]
        if held:
            self._clear_aggregators(job, held)

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def _connection(self):
        if self.conn is None:
            raise RuntimeError("controller is not connected; call connect() first")
        return self.conn

    def __enter__(self):
        return self if self.conn else self.connect()

    def __exit__(self, *exc) -> None:
        self.close()

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
        job, writes = self._admission_writes(spec)
        self._clear_aggregators(job)
        self._write(writes)
        self.desired.allocator.add(job)
        log.info("job %d admitted: window at slots %d..%d, %d workers", spec.id, job.slot_base,
                 job.slot_base + spec.window - 1, len(spec.workers))
        return job

    def _admission_writes(self, spec: JobSpec) -> tuple[AdmittedJob, list[Write]]:
        job, entries = self.plan.place(spec, self.pipe_of)
        return job, [("insert", self.plan.group(job))] + [("insert", e) for e in entries]

    def add_transit(self, job_id: int) -> None:
        """Forward job ``job_id``'s packets instead of aggregating them (the job is aggregated
        by another switch, e.g. the spine of a two-level topology)."""
        entry = self.plan.transit(job_id)
        if entry is not None:
            self._write([("insert", entry)])

    def add_host(self, mac: str, port: int) -> None:
        """Forward frames for ``mac`` to ``port`` (hosts that are not workers of a job here)."""
        self.plan.add_host(mac, port)
        self._sync_tables(self.plan.l2.tables, self.plan.desired_entries())

    def remove(self, job_id: int) -> None:
        """Stop a job's packets first (its jobs entry), then delete the rest and clear its
        aggregators, and free its range."""
        job = self.plan.job(job_id)
        self._write([("delete", e) for e in self.plan.removal(job)]
                    + [("delete", self.plan.group(job))])
        self.desired.allocator.remove(job_id)
        self._clear_aggregators(job)
        self._release_pool(job)
        log.info("job %d removed", job_id)

    def set_membership(self, job_id: int, fan_in: int | None = None,
                       expected: int | None = None) -> AdmittedJob:
        """Change a running job's fan-in and/or expected set; the next packet sees it."""
        changed = self.plan.membership(job_id, fan_in, expected)
        self._write([("modify", self.plan.admission.job_entry(changed))])
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
        admission = self.plan.admission
        configs = map(admission.decode_job, self.read_entries(admission.jobs_table))
        return {c.job_id: c for c in configs if c is not None}

    def read_entries(self, table: str) -> list[TableEntry]:
        """A table's entries as the switch holds them, without its default entry."""
        return [e for e in self._read_table(table) if not e.is_default]

    def counters(self, job_id: int | None = None) -> dict:
        """Packets and drops per op / reason, at ingress (received) and egress (sent), for a job
        plus its evictions; with None, for traffic that matched no job plus the controller's
        own management requests."""
        index = 0 if job_id is None else self.plan.job(job_id).job_index
        return self._counters_at(index, job_id is not None)

    def all_counters(self) -> dict[int | None, dict]:
        """:meth:`counters` of every job the switch holds (read from its jobs table, whoever
        admitted them) and of traffic that matched no job (key None), zeros included."""
        indices = {None: 0, **{jid: c.job_index for jid, c in sorted(self.read_jobs().items())}}
        return {jid: self._counters_at(index, jid is not None, zeros=True)
                for jid, index in indices.items()}

    def _counters_at(self, index: int, of_job: bool, zeros: bool = False) -> dict:
        conn = self._connection()
        result = {"ingress": self.ingress_stats.read(conn, index, zeros),
                  "egress": self.egress_stats.read(conn, index, zeros)}
        if of_job:
            result["evictions"] = self.aggregator.evictions(conn, index)
        else:
            result["management"] = self.aggregator.management(conn)
        return result

    def read_slot(self, job_id: int, slot: int) -> tuple[AggregatorState, AggregatorState]:
        """Both shadow sets of one of a job's slots."""
        job = self.plan.job(job_id)
        if not 0 <= slot < job.spec.window:
            raise SpecError(f"job {job_id}'s window is slots 0..{job.spec.window - 1}, not {slot}")
        index = 2 * (job.slot_base + slot)
        a, b = self._read_aggregators(job, [index, index + 1])
        return a, b

    def status(self) -> dict:
        return {"ports": list(self.desired.ports),
                "jobs": {jid: {"window": [j.slot_base, j.slot_base + j.spec.window - 1],
                               "borrow": j.spec.borrow,
                               "workers": len(j.spec.workers), "fan_in": j.spec.effective_fan_in,
                               "expected": f"{j.spec.effective_expected:#x}"}
                         for jid, j in sorted(self.jobs.items())},
                "loss": {"ingress": self.desired.ingress_loss,
                         "egress": self.desired.egress_loss}}

    # -- reconciliation ---------------------------------------------------------------------

    def reconcile(self) -> dict[str, int]:
        """Make the switch hold exactly the desired state; returns how many writes it took.

        If the switch lost its pipeline (restart), the backend loads it again (which leaves
        every register cleared); tables and groups are then brought to the desired entries by
        difference, so an up-to-date switch gets no writes at all."""
        pushed = self.load_pipeline()
        desired = self.plan.desired_entries()
        counts = {"pipeline": int(pushed)}
        counts["groups"] = self._sync_groups()
        tables = {e.table for e in desired} | set(self.plan.tables())
        counts["entries"] = self._sync_tables(sorted(tables), desired)
        return counts

    def save_state(self, path: str | Path) -> None:
        Path(path).write_text(self.desired.to_json() + "\n")

    def _sync_tables(self, tables, desired: list[TableEntry]) -> int:
        writes: list[Write] = []
        for table in tables:
            want = {e.key: e for e in desired if e.table == table}
            have = {e.key: e for e in self._read_table(table)}
            for key, entry in want.items():
                if key not in have:
                    writes.append(("insert", entry))
                elif have[key] != entry:
                    writes.append(("modify", entry))
            writes += [("delete", e) for k, e in have.items()
                       if k not in want and not e.is_default]
        if writes:
            self._write(writes)
        return len(writes)

    def _sync_groups(self) -> int:
        want = {g.group_id: g for g in self.plan.desired_groups()}
        have = self.read_groups()
        writes: list[Write] = [("insert", g) for gid, g in want.items() if gid not in have]
        writes += [("modify", g) for gid, g in want.items() if gid in have and have[gid] != g]
        writes += [("delete", g) for gid, g in have.items() if gid not in want]
        if writes:
            self._write(writes)
        return len(writes)

"""What a controller's desired state asks of its switch, whatever the switch.

Table entries and multicast groups are planned here under the names of the v1model program
(docs/p4-program.md): the P4Runtime backend (``controller.py``) writes them as they are, the BF
Runtime backend (``tofino/``) translates them for the TNA program, whose tables have the same
names, keys and actions. Requests are validated and resources allocated here too, before either
backend writes anything, so a rejected request leaves the switch untouched.
"""

from __future__ import annotations

from collections.abc import Callable

from control_plane.allocation import AdmittedJob, one_pipe
from control_plane.controls.drop_simulator import DropSimulator
from control_plane.controls.forwarding import L2Forwarding
from control_plane.controls.job_admission import JobAdmission
from control_plane.controls.replica_rewrite import ReplicaRewrite
from control_plane.controls.source_guard import SourceGuard
from control_plane.desired_state import DesiredState
from control_plane.entries import MulticastGroup, TableEntry
from protocol.codec import mac_bytes, mac_str
from protocol.jobspec import JobSpec, SpecError


class Plan:
    def __init__(self, desired: DesiredState):
        self.desired = desired
        self.admission = JobAdmission()
        self.replica_rewrite = ReplicaRewrite()
        self.source_guard = SourceGuard()
        self.l2 = L2Forwarding()
        self.ingress_drop_sim = DropSimulator("SaAtpIngress.drop_sim")
        self.egress_drop_sim = DropSimulator("SaAtpEgress.drop_sim")

    @property
    def jobs(self) -> dict[int, AdmittedJob]:
        return self.desired.allocator.jobs

    def job(self, job_id: int) -> AdmittedJob:
        try:
            return self.jobs[job_id]
        except KeyError:
            raise SpecError(f"job {job_id} is not admitted") from None

    def table_controls(self):
        return (self.source_guard, self.admission, self.replica_rewrite, self.l2,
                self.ingress_drop_sim, self.egress_drop_sim)

    def tables(self) -> list[str]:
        return sorted(t for c in self.table_controls() for t in c.tables)

    def drop_sim(self, direction: str) -> tuple[DropSimulator, dict]:
        if direction not in ("ingress", "egress"):
            raise ValueError(f"direction must be 'ingress' or 'egress', got {direction!r}")
        if direction == "ingress":
            return self.ingress_drop_sim, self.desired.ingress_loss
        return self.egress_drop_sim, self.desired.egress_loss

    # -- requests: validate, then say what to write --------------------------------------------

    def place(self, spec: JobSpec, pipe_of: Callable[[JobSpec], int] = one_pipe
              ) -> tuple[AdmittedJob, list[TableEntry]]:
        """Validate and place a job (its slots among those of its pipe's jobs, ``pipe_of``);
        its group and the entries that install it, its jobs entry last. Nothing is recorded:
        :meth:`Plan.jobs` changes when the caller adds it."""
        spec.validate(known_ports=set(self.desired.ports))
        if spec.id in self.desired.transit_jobs:
            raise SpecError(f"job {spec.id} is marked transit on this switch")
        job = self.desired.allocator.allocate(spec, pipe_of)
        self.check_hosts(job)
        return job, (self.replica_rewrite.entries(job) + self.admission.worker_entries(job)
                     + self.new_host_entries(job) + self.new_guard_entries(job)
                     + [self.admission.job_entry(job)])

    def removal(self, job: AdmittedJob) -> list[TableEntry]:
        """The entries that go with a job, its jobs entry first (its packets stop first)."""
        remaining = set(self.l2.entries(self.hosts(excluding=job.spec.id)))
        stale_hosts = [e for e in self.host_entries() if e not in remaining]
        remaining = set(self.guard_entries(excluding=job.spec.id))
        stale_guards = [e for e in self.guard_entries() if e not in remaining]
        return ([self.admission.job_entry(job)] + self.admission.worker_entries(job)
                + self.replica_rewrite.entries(job) + stale_hosts + stale_guards)

    def membership(self, job_id: int, fan_in: int | None, expected: int | None) -> AdmittedJob:
        job = self.job(job_id)
        return AdmittedJob(job.spec.with_membership(fan_in, expected), job.job_index,
                           job.slot_base, job.pool_base)

    def transit(self, job_id: int) -> TableEntry | None:
        """The jobs entry that marks ``job_id`` transit, or None if it already is."""
        if job_id in self.jobs:
            raise SpecError(f"job {job_id} is aggregated here; remove it first")
        if job_id in self.desired.transit_jobs:
            return None
        self.desired.transit_jobs.add(job_id)
        return self.admission.transit_entry(job_id)

    def add_host(self, mac: str, port: int) -> None:
        self.check_port(port)
        self.desired.hosts[mac_str(mac_bytes(mac))] = port

    def set_loss(self, probability: float, port: int | None, direction: str) -> DropSimulator:
        """Record a drop probability; the simulator whose table must now be brought in line."""
        sim, config = self.drop_sim(direction)
        if port is not None:
            self.check_port(port)
        new = {"default": config["default"], "ports": dict(config["ports"])}
        if port is None:
            new["default"] = probability
        else:
            new["ports"][port] = probability
        sim.entries(new["default"], new["ports"])  # validates the probability
        config.update(new)
        return sim

    def check_port(self, port: int) -> None:
        if port not in self.desired.ports:
            raise SpecError(f"port {port} is not a port of the switch")

    # -- the whole desired state -------------------------------------------------------------

    def desired_entries(self) -> list[TableEntry]:
        entries = list(self.host_entries()) + self.guard_entries()
        entries += [self.admission.transit_entry(j) for j in sorted(self.desired.transit_jobs)]
        for job in self.jobs.values():
            entries.append(self.admission.job_entry(job))
            entries += self.admission.worker_entries(job)
            entries += self.replica_rewrite.entries(job)
        for direction in ("ingress", "egress"):
            sim, config = self.drop_sim(direction)
            entries += sim.entries(config["default"], config["ports"])
        return entries

    def desired_groups(self) -> list[MulticastGroup]:
        return ([L2Forwarding.flood_group(self.desired.ports)]
                + [self.group(j) for j in self.jobs.values()])

    @staticmethod
    def group(job: AdmittedJob) -> MulticastGroup:
        return MulticastGroup.make(job.group, ((w.port, w.id) for w in job.spec.workers))

    def hosts(self, excluding: int | None = None) -> dict[str, int]:
        """Static hosts plus every admitted worker's MAC, for L2 forwarding."""
        hosts = dict(self.desired.hosts)
        for job in self.jobs.values():
            if job.spec.id == excluding:
                continue
            for w in job.spec.workers:
                hosts[mac_str(mac_bytes(w.mac))] = w.port
        return hosts

    def check_hosts(self, job: AdmittedJob) -> None:
        hosts = self.hosts()
        for w in job.spec.workers:
            mac = mac_str(mac_bytes(w.mac))
            if hosts.get(mac, w.port) != w.port:
                raise SpecError(f"job {job.spec.id}: MAC {mac} is already on port {hosts[mac]}, "
                                f"not {w.port}")

    def host_entries(self) -> list[TableEntry]:
        return self.l2.entries(self.hosts())

    def new_host_entries(self, job: AdmittedJob) -> list[TableEntry]:
        have = set(self.host_entries())
        macs = {mac_str(mac_bytes(w.mac)): w.port for w in job.spec.workers}
        return [e for e in self.l2.entries(macs) if e not in have]

    def guard_entries(self, excluding: int | None = None) -> list[TableEntry]:
        """The switch addresses of the jobs aggregated here: no frame may come from them."""
        return self.source_guard.entries(j.spec.switch_mac for j in self.jobs.values()
                                         if j.spec.id != excluding)

    def new_guard_entries(self, job: AdmittedJob) -> list[TableEntry]:
        have = set(self.guard_entries())
        return [e for e in self.source_guard.entries([job.spec.switch_mac]) if e not in have]

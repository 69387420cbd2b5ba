"""control JobAdmission (p4src/job_admission.p4): tables ``jobs``, ``workers`` and
``worker_ports``."""

from __future__ import annotations

from dataclasses import dataclass

from control_plane.allocation import AdmittedJob
from control_plane.entries import TableEntry
from protocol.codec import Endpoint, mac_bytes


@dataclass(frozen=True)
class JobConfig:
    """What the switch's ``jobs`` entry says about a job (``set_job``'s parameters ``num_slots``
    and ``own_slots`` are its ``window`` and ``slots``, docs/protocol.md §4)."""

    job_id: int
    job_index: int
    slot_base: int
    window: int  # slots + borrow
    slots: int  # the slots it owns
    pool_base: int
    fan_in: int
    expected: int
    group: int
    inband_fanin: bool


class JobAdmission:
    """``set_job`` places a job's borrowed slots in the shared pool (docs/protocol.md §4.6)."""

    def __init__(self, path: str = "SaAtpIngress.admission"):
        self.jobs_table = f"{path}.jobs"
        self.workers_table = f"{path}.workers"
        self.set_job = f"{path}.set_job"
        self.set_worker = f"{path}.set_worker"
        self.transit = f"{path}.transit"
        self.ports_table = f"{path}.worker_ports"
        self.to_helper = f"{path}.to_helper"

    @property
    def tables(self) -> tuple[str, ...]:
        return (self.jobs_table, self.workers_table, self.ports_table)

    def job_entry(self, job: AdmittedJob) -> TableEntry:
        spec = job.spec
        return TableEntry.make(self.jobs_table, {"hdr.sa.job": spec.id}, self.set_job, {
            "job_index": job.job_index, "slot_base": job.slot_base, "num_slots": spec.window,
            "own_slots": spec.slots, "pool_base": job.pool_base,
            "fan_in": spec.effective_fan_in, "expected": spec.effective_expected,
            "group": job.group, "inband_fanin": int(spec.inband_fanin)})

    def transit_entry(self, job_id: int) -> TableEntry:
        """A job aggregated by another switch: this one forwards its packets."""
        return TableEntry.make(self.jobs_table, {"hdr.sa.job": job_id}, self.transit)

    def worker_entries(self, job: AdmittedJob) -> list[TableEntry]:
        return [TableEntry.make(self.workers_table, {
            "hdr.sa.job": job.spec.id, "hdr.sa.worker": w.id, "sm.ingress_port": w.port,
            "hdr.ethernet.src_addr": int.from_bytes(mac_bytes(Endpoint(w.mac, w.ip).mac), "big"),
            "hdr.ipv4.src_addr": int.from_bytes(Endpoint(w.mac, w.ip).ip_raw, "big"),
        }, self.set_worker, {"worker_bit": w.bit}) for w in job.spec.workers] + [
            TableEntry.make(self.ports_table, {"hdr.sa.job": job.spec.id, "hdr.sa.reason": w.id},
                            self.to_helper, {"port": w.port}) for w in job.spec.workers]

    def decode_job(self, entry: TableEntry) -> JobConfig | None:
        """The job an entry admits, or None for a transit entry."""
        if entry.action == self.transit:
            return None
        params = dict(entry.params)
        return JobConfig(job_id=dict(entry.match)["hdr.sa.job"], job_index=params["job_index"],
                         slot_base=params["slot_base"], window=params["num_slots"],
                         slots=params["own_slots"], pool_base=params["pool_base"],
                         fan_in=params["fan_in"], expected=params["expected"],
                         group=params["group"], inband_fanin=bool(params["inband_fanin"]))

"""What a controller wants its switch to hold (ports, static hosts, jobs, transit jobs, the drop
simulator's settings), kept apart from the switch so that it survives a switch restart and can be
saved between CLI invocations (``sa-atp-ctl --state``) and pushed again by reconciliation."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from control_plane.allocation import AdmittedJob, Allocator


@dataclass
class DesiredState:
    ports: tuple[int, ...] = ()
    hosts: dict[str, int] = field(default_factory=dict)  # static MAC -> port
    allocator: Allocator = field(default_factory=Allocator)
    transit_jobs: set[int] = field(default_factory=set)  # aggregated by another switch
    ingress_loss: dict = field(default_factory=lambda: {"default": 0.0, "ports": {}})
    egress_loss: dict = field(default_factory=lambda: {"default": 0.0, "ports": {}})

    def to_json(self) -> str:
        return json.dumps({
            "ports": list(self.ports), "hosts": self.hosts,
            "transit_jobs": sorted(self.transit_jobs), "pool_slots": self.allocator.pool_slots,
            "jobs": [j.to_dict() for j in self.allocator.jobs.values()],
            "ingress_loss": self.ingress_loss, "egress_loss": self.egress_loss}, indent=1)

    @classmethod
    def from_json(cls, text: str) -> DesiredState:
        d = json.loads(text)
        state = cls(ports=tuple(d["ports"]), hosts=d["hosts"],
                    transit_jobs=set(d.get("transit_jobs", ())),
                    ingress_loss=_loss_from_json(d["ingress_loss"]),
                    egress_loss=_loss_from_json(d["egress_loss"]))
        state.allocator.pool_slots = d.get("pool_slots", 0)
        for job in d["jobs"]:
            state.allocator.add(AdmittedJob.from_dict(job))
        return state


def _loss_from_json(d: dict) -> dict:
    return {"default": d["default"], "ports": {int(k): v for k, v in d["ports"].items()}}

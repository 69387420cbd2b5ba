"""Running jobs together on one simulated cluster."""

from __future__ import annotations

import simpy

from sim.aggregation import SlotPool, SwitchPipeline
from sim.job import Job, JobResult, JobSpec
from sim.network import Network, SwitchConfig


def simulate(specs: list[JobSpec], net: Network, switch: SwitchConfig,
             starts: list[float] | None = None) -> list[JobResult]:
    """Run every job to its last iteration; jobs share the switch: its pipeline (a single
    switch's; its rates bound all the jobs' packets together) and its aggregator pool, when
    ``switch.shared_pool`` is set."""
    env = simpy.Environment()
    pool = SlotPool(env, switch.shared_pool) if switch.shared_pool else None
    pipeline = SwitchPipeline()
    starts = starts or [0.0] * len(specs)
    jobs = [Job(env, spec, net, switch, pool, start, pipeline)
            for spec, start in zip(specs, starts, strict=True)]
    for job in jobs:
        env.process(job.process())
    env.run()
    return [job.result for job in jobs]

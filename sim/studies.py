"""The scale studies: every method on GPU clusters, one parameter varied at a time.

The base case: 32 workers (one H100 each, one 100 Gb/s link each to the switch), ResNet-50
at 64 samples per GPU, one worker in 32 three times slower throughout, a switch with 512
aggregators per job, GPU step-time jitter of 2 % (log-normal), 0.2 ms of step-time exchange per
iteration. Beyond 32 workers the job spans racks of 32 under a spine (sim/aggregation.py).

Methods: NCCL-style ring and a parameter server (synchronous), plain in-network aggregation
(``switch``: ATP/SwitchML with no straggler handling), and every policy through the switch.
Jobs sharing one switch compare SwitchML (the pool split into static per-job ranges), ATP (one
shared pool, first come first served, overflow to the job's parameter server) and SA-ATP on
its shared pool (overflow to the block's first sender, docs/protocol.md §4.6); one worker of
the first job is slowed by contention that comes and goes.

Each case runs ``iterations`` iterations; the first ``warmup`` (policies detecting and converging)
are left out of the means, and random scenarios are averaged over SEEDS runs. Time to accuracy is
relative: a method's mean iteration time over its statistical efficiency (sim/efficiency.py),
against plain in-network aggregation's.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from experiments.stragglers import SlowdownSchedule
from sim.efficiency import Efficiency
from sim.job import HostCosts, JobSpec
from sim.network import Network, SwitchConfig
from sim.run import simulate
from sim.stragglers import Contention, Stragglers, interleaved_classes, static
from sim.workloads import MODELS

NETWORK = Network(step_s=2e-6)  # 100 Gb/s; ring steps cost 2 us of software each
COSTS = HostCosts(plan_s=2e-4, claim_s=5e-5)  # a store round trip across the cluster
JITTER = 0.02
METHODS = {  # name: (communication, policy)
    "ring": ("ring", "synchronous"),
    "ps": ("ps", "synchronous"),
    "switch": ("switch", "synchronous"),
    "sa-atp-takeover": ("switch", "sa-atp-takeover"),
    "sa-atp": ("switch", "sa-atp"),
    "sa-atp-no-takeover": ("switch", "sa-atp-no-takeover"),
    "dpar": ("switch", "dpar"),
    "boa": ("switch", "boa"),
    "partial-reduce": ("switch", "partial-reduce"),
    "k-of-n": ("switch", "k-of-n"),
}
SHARING = {  # multi-job methods: (policy, shared pool: None, or what a block that meets none does)
    "switchml": ("synchronous", None),
    "atp": ("synchronous", "server"),
    "sa-atp-takeover": ("sa-atp-takeover", "sender"),
    "sa-atp": ("sa-atp", "sender"),
    "sa-atp-no-takeover": ("sa-atp-no-takeover", "sender"),
}
POOL_SLOTS = 1024  # aggregators of the switch shared by several jobs
JOB_WORKERS = 8
SEEDS = 3  # runs averaged for the scenarios drawn at random


@dataclass(frozen=True)
class Case:
    """One configuration: the base case with some fields changed."""

    study: str
    x: float | str
    method: str
    workers: int = 32
    model: str = "resnet50"
    scenario: str = "static"  # none, static, transient, heterogeneous, contention
    factor: float = 3.0
    fraction: float = 1 / 32
    bandwidth_bps: float = 100e9
    slots: int = 512
    jobs: int = 1

    def stragglers(self, n: int, seed: int) -> Stragglers:
        schedule, contention = SlowdownSchedule(seed=seed), None
        if self.scenario == "static":
            schedule = SlowdownSchedule(static=static(n, self.factor, self.fraction), seed=seed)
        elif self.scenario == "transient":
            schedule = SlowdownSchedule(transient_prob=0.03, seed=seed)
        elif self.scenario == "heterogeneous":
            schedule = SlowdownSchedule(static=interleaved_classes([1, 1.6, 2.5], n, 32))
        elif self.scenario == "contention":
            contention = Contention(frozenset(static(n, 2.5, 1 / 8)), 2.5, 0.3, 0.9, seed)
        return Stragglers(schedule, jitter=JITTER, contention=contention, seed=seed)


@dataclass
class Study:
    name: str
    title: str
    xlabel: str
    cases: list[Case] = field(default_factory=list)


def _sweep(name: str, title: str, xlabel: str, field_name: str, values,
           methods=tuple(METHODS), **base) -> Study:
    return Study(name, title, xlabel, [Case(name, v, m, **{field_name: v}, **base)
                                       for v in values for m in methods])


def studies(quick: bool = False) -> list[Study]:
    pick = (lambda full, fast: fast) if quick else (lambda full, fast: full)
    return [
        _sweep("workers", "Workers (one in 32 three times slower)", "workers", "workers",
               pick((8, 32, 128, 1024), (8, 128))),
        _sweep("scaling", "Workers, no straggler (VGG-16)", "workers", "workers",
               pick((8, 32, 128, 1024), (8, 128)),
               methods=("ring", "ps", "switch", "sa-atp", "sa-atp-no-takeover"),
               model="vgg16", scenario="none"),
        _sweep("factor", "Straggler slowdown (one worker of 32)", "slowdown", "factor",
               pick((1.0, 1.5, 2.0, 3.0, 4.0), (1.0, 3.0))),
        _sweep("fraction", "Share of straggling workers (3x, 32 workers)", "share straggling",
               "fraction", pick((1 / 32, 1 / 8, 1 / 4, 1 / 2), (1 / 32, 1 / 4))),
        _sweep("scenario", "Straggler scenarios (32 workers)", "scenario", "scenario",
               pick(("none", "static", "transient", "heterogeneous", "contention"),
                    ("transient", "contention"))),
        _sweep("model", "Models (32 workers, one 3x straggler)", "model", "model",
               pick(tuple(MODELS), ("vgg16", "gpt2-medium"))),
        _sweep("link", "Link speed (VGG-16, 32 workers, one 3x straggler)", "Gb/s",
               "bandwidth_bps", pick((25e9, 100e9, 400e9), (25e9, 400e9)), model="vgg16"),
        _sweep("memory", "Aggregators per job (VGG-16, 32 workers, one 3x straggler)",
               "aggregators", "slots", pick((16, 64, 256, 1024), (16, 256)), model="vgg16"),
        _sweep("jobs", f"Jobs of {JOB_WORKERS} workers sharing a switch of {POOL_SLOTS} "
               "aggregators (one worker of job 0 contended on and off)", "jobs", "jobs",
               pick((2, 4, 8), (2, 4)), methods=tuple(SHARING), workers=JOB_WORKERS,
               scenario="contention"),
    ]


def run_case(case: Case, iterations: int, warmup: int, seeds: int = SEEDS) -> dict:
    """One row: mean (and p99) iteration time after the warm-up, samples summed, staleness;
    for several jobs, the straggling job's and the others' means. Scenarios drawn at random
    (transient, contention) are averaged over ``seeds`` runs."""
    seeds = range(seeds) if case.scenario in ("transient", "contention") else [0]
    runs = [_simulate(case, iterations, seed) for seed in seeds]
    steady = [np.concatenate([r[j].iter_s[warmup:] for r in runs]) for j in range(case.jobs)]
    first = [r[0] for r in runs]
    row = {"study": case.study, "x": case.x, "method": case.method,
           "iter_ms": round(float(np.mean(steady[0])) * 1e3, 3),
           "p99_ms": round(float(np.percentile(steady[0], 99)) * 1e3, 3),
           "summed": round(float(np.mean([r.summed[warmup:] for r in first])), 4),
           "staleness": round(float(np.mean([r.staleness[warmup:] for r in first])), 4),
           "taken": sum(r.taken for r in first),
           "hosted": sum(r.hosted for r in first),
           "fallback": sum(job.fallback for r in runs for job in r)}
    if case.jobs > 1:
        row["others_ms"] = round(float(np.mean(np.concatenate(steady[1:]))) * 1e3, 3)
    return row


def _simulate(case: Case, iterations: int, seed: int):
    net = replace(NETWORK, bandwidth_bps=case.bandwidth_bps)
    model = MODELS[case.model]()
    if case.jobs == 1:
        comm, policy = METHODS[case.method]
        return simulate([JobSpec(model, case.workers, policy, comm,
                                 case.stragglers(case.workers, seed), iterations, COSTS,
                                 seed=seed)], net, SwitchConfig(slots=case.slots))
    policy, overflow = SHARING[case.method]
    switch = SwitchConfig(slots=case.slots if overflow else POOL_SLOTS // case.jobs,
                          shared_pool=POOL_SLOTS if overflow else None,
                          pool_overflow=overflow or "server")
    quiet = replace(case, scenario="none")
    return simulate([JobSpec(model, case.workers, policy, "switch",
                             (case if j == 0 else quiet).stragglers(case.workers, seed + j),
                             iterations, COSTS, seed=seed + j) for j in range(case.jobs)],
                    net, switch)


def add_speedups(rows: list[dict], eff: Efficiency, baseline: str) -> None:
    """Per row, its iteration time and time to accuracy relative to ``baseline``'s in the
    same study and x (its statistical efficiency from samples summed and staleness)."""
    base = {(r["study"], r["x"]): r for r in rows if r["method"] == baseline}
    for r in rows:
        b = base.get((r["study"], r["x"]))
        r["efficiency"] = round(eff.of(r["summed"], r["staleness"]), 4)
        if b is None:
            continue
        b_eff = eff.of(b["summed"], b["staleness"])
        r["iter_vs_base"] = round(r["iter_ms"] / b["iter_ms"] - 1, 4)
        r["tta_speedup"] = round((b["iter_ms"] / b_eff) / (r["iter_ms"] / r["efficiency"]), 3)

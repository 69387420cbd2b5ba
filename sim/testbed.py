"""The testbed, as the simulator sees it: the policy harness's job (experiments/harness.py) on the
2-core development machine, for replaying its scenarios.

Measured inputs (docs/results/testbed_rates.json, what make bench measured when the harness ran):
the embedded switch's packet rates (aggregating, and completing a slot with its multicast), the
host sender's packet rate, and how long the harness's padded allreduce took through a switch
process at 64 slots and at the slot budget's 8 (``harness_calls``). The pipeline's rates alone
are what the switch reaches with the machine to itself; in a call the workers' round loops and
the switch's ports share its two cores, so the replay's switch runs at the rates that make a
64-slot call last what it lasted (:func:`path_scale`), and its hosts take the time between a
window's results and its next chunks that makes an 8-slot call last what it lasted
(:func:`turnaround_s`). Compute is the harness's: the H100 ResNet-50 profile for each worker's
share, times the scenario's slowdowns (the same seeded schedule, experiments/stragglers.py).

Fitted inputs (:data:`FITTED`, by :func:`sim.calibration.fit` on the scenario without
stragglers only): the hosts' per-iteration software costs, the mean extra delay of an emulated
step (sleep overshoot and scheduling on two loaded cores). The four straggler scenarios are
then predictions.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

import numpy as np
import simpy

from experiments.emulated_link import LINK_GBPS
from experiments.harness import SCENARIOS, Scenario
from experiments.launch import METHODS
from experiments.stragglers import PROFILES, SlowdownSchedule
from host_lib.engine.quantize import num_blocks
from host_lib.engine.rto import RtoEstimator
from sim.aggregation import CallPlan, SwitchAggregation
from sim.job import HostCosts, JobSpec
from sim.network import Network, SwitchConfig
from sim.stragglers import Stragglers
from sim.workloads import Bucket, Workload, resnet50

ROOT = Path(__file__).resolve().parent.parent
# The packet rates measured when the committed harness results were taken (not bench's latest
# run: the host data path has changed since, and the calibration replays those runs).
RATES = ROOT / "docs" / "results" / "testbed_rates.json"
RESULTS = ROOT / "docs" / "results" / "results.csv"
WORKERS, GLOBAL_BATCH, ITERATIONS, SEED = 4, 256, 200, 0
DIGITS_PARAMS = 2410  # experiments/digits.py's MLP
LOOPBACK_LATENCY_S = 30e-6  # one way through a UDP tunnel on loopback
# The extra delay of an emulated step is gamma-distributed with this shape: with it, the spread
# of simulated iteration times without stragglers (p99 - p50, switch) is the testbed's, ~10 ms;
# an exponential (shape 1) gave ~26 ms and made a lone straggler's wait too short.
DELAY_SHAPE = 4.0
STORE_ROUND_TRIP_S = 25e-6  # an add on the torch.distributed store over loopback (measured)
# A call's chunks go through the replay's switch in blocks of half the job's slots, two to the
# window: the switch's one pipeline then takes the blocks of two jobs' calls in turn, as its
# packet loop takes their packets, where a call sent as one block would hold it whole.
WINDOW_BLOCKS = 2


@dataclass(frozen=True)
class Fitted:
    delay_s: float  # mean extra delay of an emulated step
    switch_s: float  # host software per iteration through the switch (DDP hook, exchange)
    gloo_s: float  # the same with gloo
    helper_s: float  # extra per call when the plan names helpers (the takeover timers)

    def costs(self, gloo: bool) -> HostCosts:
        """Split evenly before the compute, between compute and the first packet, and after
        the last result: only the sum shows in an iteration, the split in the communication
        times the policies read."""
        third = (self.gloo_s if gloo else self.switch_s) / 3
        return HostCosts(third, third, third, 0.0 if gloo else self.helper_s,
                         STORE_ROUND_TRIP_S)


FITTED = Fitted(delay_s=0.00278, switch_s=0.00276, gloo_s=0.0, helper_s=0.0)


@cache
def measured() -> dict:
    """The rates file, read once (the calls' replays in :func:`path_scale` and
    :func:`turnaround_s` ask for it at every step of their search)."""
    rates = json.loads(RATES.read_text())
    return {name: rates[name] for name in ("aggregating_pps", "complete_pps", "sender_pps",
                                           "harness_calls")}


def network() -> Network:
    """Loopback: the host's sender sets the packet rate, and the hosts take
    :func:`turnaround_s` a round trip of the window; gloo's per-step software cost is in its
    fitted per-iteration cost."""
    return _loopback(turnaround_s())


def switch(scenario: str) -> SwitchConfig:
    """The embedded switch with the scenario's job admitted (its slots, as the harness does)."""
    return _switch(SCENARIOS[scenario].slots, path_scale())


def _loopback(turnaround: float = 0.0) -> Network:
    return Network(bandwidth_bps=10e9, latency_s=LOOPBACK_LATENCY_S,
                   host_pps=measured()["sender_pps"], rto_s=RtoEstimator.minimum,
                   turnaround_s=turnaround)


def _switch(slots: int, scale: float) -> SwitchConfig:
    m = measured()
    return SwitchConfig(slots=slots, pipeline_pps=m["aggregating_pps"] / scale,
                        complete_pps=m["complete_pps"] / scale)


def call_s(slots: int, scale: float, turnaround: float) -> float:
    """How long the replay takes for one of bench's harness calls (every worker's gradient
    ready at once, all of them contributing) through a switch of ``slots`` aggregators whose
    rates are the pipeline's over ``scale``, with hosts that take ``turnaround`` a round
    trip."""
    calls = measured()["harness_calls"]
    n, net = calls["workers"], _loopback(turnaround)
    env = simpy.Environment()
    agg = SwitchAggregation(env, n, net, _switch(slots, scale), [calls["elements"] * 4],
                            np.random.default_rng(0),
                            max_blocks=max_blocks(calls["elements"], slots))
    plan = CallPlan(np.ones(n, bool), n)
    proc = env.process(agg.run(np.zeros((n, 1)), plan))
    env.run(proc)
    return float(proc.value.delivered.max())


def _solve(f, target: float, lo: float, hi: float) -> float:
    """The ``x`` in [lo, hi] at which the increasing ``f`` reaches ``target`` (lo where it
    is there already)."""
    if f(lo) >= target:
        return lo
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if f(mid) < target else (lo, mid)
    return (lo + hi) / 2


def max_blocks(elements: int, slots: int) -> int:
    """How many blocks a call of ``elements`` floats is cut into: blocks of at most half of
    ``slots`` chunks (:data:`WINDOW_BLOCKS`)."""
    chunks = num_blocks(elements)
    return max(1, -(-chunks * WINDOW_BLOCKS // slots))


@cache
def path_scale() -> float:
    """How many times slower than its pipeline alone the switch sums a call with the workers
    beside it: the factor that makes the replay's 64-slot call last the measured one."""
    measured_s = measured()["harness_calls"]["call_s"]["64"]
    return _solve(lambda x: call_s(64, x, 0.0), measured_s, 1.0, 100.0)


@cache
def turnaround_s() -> float:
    """The hosts' time a round trip of the window beyond latencies and packet times: what
    makes the replay's call at the smallest measured budget last the measured one."""
    budgets = measured()["harness_calls"]["call_s"]
    slots = min(budgets, key=int)
    return _solve(lambda t: call_s(int(slots), path_scale(), t), budgets[slots], 0.0, 0.1)


def workload(padding: int = 0) -> Workload:
    """The digits MLP's gradient (one DDP bucket, sent after the emulated compute ends; with
    the scenario's padding) with ResNet-50's H100 step times."""
    profile = resnet50().profile
    params = DIGITS_PARAMS + padding
    return Workload("digits-mlp as resnet50", profile, (Bucket(params * 4, 1.0),),
                    GLOBAL_BATCH // WORKERS, params)


def spec(scenario: str, method: str, fitted: Fitted = FITTED,
         iterations: int = ITERATIONS, train: bool = True) -> JobSpec:
    return _spec(SCENARIOS[scenario], method, fitted, iterations, train, SEED)


def neighbour(scenario: str, fitted: Fitted = FITTED, iterations: int = ITERATIONS
              ) -> JobSpec | None:
    """The second job of a scenario that has one (``Scenario.neighbour``): as many workers
    and aggregators and the same gradient, no straggler, plain in-network aggregation, its own
    seed (its accuracy is not replayed); None for the other scenarios."""
    s = SCENARIOS[scenario]
    if not s.neighbour:
        return None
    alone = replace(s, stragglers="", speed_classes="", transient_prob=0.0, neighbour=False)
    return _spec(alone, "switch", fitted, iterations, False, SEED + 1)


def _spec(s: Scenario, method: str, fitted: Fitted, iterations: int, train: bool,
          seed: int) -> JobSpec:
    m = METHODS[method]
    schedule = SlowdownSchedule.parse(s.stragglers, classes=s.speed_classes, n_workers=WORKERS,
                                      transient_prob=s.transient_prob, seed=seed)
    gloo = m.comm == "gloo"
    wire_s = s.wire_ms(PROFILES, "resnet50", GLOBAL_BATCH // WORKERS, LINK_GBPS) / 1e3
    return JobSpec(workload(s.pad_gradient), WORKERS, m.policy, "ring" if gloo else "switch",
                   Stragglers(schedule, delay_s=fitted.delay_s, delay_shape=DELAY_SHAPE,
                              seed=seed), iterations,
                   fitted.costs(gloo), GLOBAL_BATCH, train_digits=train,
                   max_blocks=max_blocks(DIGITS_PARAMS + s.pad_gradient, s.slots),
                   seed=seed, wire_s=wire_s)

"""SA-ATP's cost model (host_lib/scheduling/policies/cost_model.py): what it measures from the
history, and what it decides, driven by the simulator (sim/job.py runs the shipped policy on
simulated step times) against the plain and BOA runs of the same jobs as references."""

from __future__ import annotations

import numpy as np
import pytest
import simpy

from experiments.stragglers import SlowdownSchedule
from host_lib.scheduling.policies.base import StepHistory, even_shares
from host_lib.scheduling.policies.cost_model import (
    MIN_OVERLAP,
    CostModel,
    measured_kappa,
)
from host_lib.scheduling.policies.host_share import PROBE
from sim.job import HostCosts, Job, JobSpec
from sim.network import Network, SwitchConfig
from sim.stragglers import Stragglers
from sim.workloads import resnet50
from tests.policy_traces import A, C

N = 8


def history_of(times, samples, comm=None, **measured) -> StepHistory:
    h = StepHistory(len(times[0]))
    for i, (t, b) in enumerate(zip(times, samples, strict=True)):
        h.add(t, b, **{name: values[i] for name, values in measured.items()
                       if name in ("pass_s", "lead_s", "claim_s", "fixed_s")})
        if comm is not None and i:
            h.add_comm(comm[i - 1], **({"busy_s": measured["busy_s"][i - 1]}
                                       if "busy_s" in measured else {}))
    return h


def test_keep_is_the_gradients_communication_over_the_overlapping_share_of_a_pass():
    """G is the least of the workers' call times (busy_s), beta the overlapping share of a
    pass (lead_s / pass_s); where passes do not overlap, there is nothing to keep."""
    n, its = 3, 4
    times = [np.full(n, 0.03)] * its
    samples = [np.full(n, 10)] * its
    comm = [np.array([0.004, 0.002, 0.003])] * its
    busy = [np.array([0.015, 0.011, 0.012])] * its
    passes = [np.full(n, 0.03)] * its
    model = CostModel(("even",))
    h = history_of(times, samples, comm, pass_s=passes, lead_s=[p * 0.5 for p in passes],
                   busy_s=busy)
    assert model.keep_s(h) == pytest.approx(0.011 / 0.5)
    flat = history_of(times, samples, comm, pass_s=passes,
                      lead_s=[p * MIN_OVERLAP * 0.9 for p in passes], busy_s=busy)
    assert model.keep_s(flat) == 0.0
    assert model.keep_s(history_of(times[:1], samples[:1])) == 0.0  # nothing measured yet


def test_the_fixed_cost_in_samples_is_what_stealing_measured():
    times = [np.array([A * 20 + C, 2 * (A * 10 + C)]), np.array([A * 30 + C, 0.0])]
    samples = [np.array([20, 10]), np.array([30, 0])]
    fixed = [np.array([C, 2 * C]), np.array([C, np.nan])]
    h = history_of(times, samples, fixed_s=fixed)
    assert measured_kappa(h, 8) == pytest.approx(C / A)
    assert measured_kappa(history_of(times, samples), 8) is None  # no stealing: unknown


def test_on_a_tie_the_simpler_option_wins():
    """Equal predictions go to the first split and to no stealing."""
    model = CostModel(("even", "boa"))
    h = StepHistory(2)
    for _ in range(3):
        model.record({"even": (10, 10), "boa": (10, 10)}, False)
        h.add(np.array([0.02, 0.02]), np.array([10, 10]))
    model.measure(h)
    choice = model.choose(h)
    assert (choice.split, choice.steal) == ("even", False)


# -- decisions, driven by the simulator --------------------------------------------------------


def job(policy: str, schedule: SlowdownSchedule, iterations: int = 40, jitter: float = 0.02,
        seed: int = 0) -> JobSpec:
    return JobSpec(resnet50(), N, policy, stragglers=Stragglers(schedule, jitter=jitter,
                                                                seed=seed),
                   iterations=iterations, costs=HostCosts(plan_s=2e-4, claim_s=5e-5),
                   seed=seed)


def run(spec: JobSpec) -> tuple[list, np.ndarray]:
    env = simpy.Environment()
    j = Job(env, spec, Network(), SwitchConfig())
    plans = []
    plan = j.policy.plan
    j.policy.plan = lambda it, history: plans.append(plan(it, history)) or plans[-1]
    env.process(j.process())
    env.run()
    return plans, j.result.iter_s


def test_without_a_straggler_sa_atp_is_plain_aggregation():
    """Even shares and no stealing in every iteration: plain aggregation's, but for the rare
    iterations that try whether the helpers' hosts would sum part of the calls faster
    (host_share.py), within 1 % on the mean; without takeover (no helpers, no probes), the very
    iterations of plain aggregation."""
    plans, sa = run(job("sa-atp", SlowdownSchedule()))
    _, plain = run(job("synchronous", SlowdownSchedule()))
    assert all(p.shares == even_shares(256 * 2, N) and not p.steal for p in plans)
    shared = [p.iteration for p in plans if p.host_share > 0]
    trials = [it for it in shared if it - 1 not in shared]
    assert all(plans[it].host_share == PROBE for it in trials)
    # each trial dropped at its verdict (no gain without a straggler): the first lasts two
    # iterations, the verdict coming with the plan after next, the later ones one
    assert 0 < len(trials) <= 5 and len(shared) == len(trials) + 1
    assert sa[10:].mean() <= 1.01 * plain[10:].mean()
    plans, alone = run(job("sa-atp-no-takeover", SlowdownSchedule()))
    np.testing.assert_allclose(alone, plain)


def test_a_persistent_straggler_gets_boas_split_and_no_stealing_once_it_is_fitted():
    """A 3x straggler from the start: the plan right after its first iteration already cuts
    its share (the guard against the measured models' split reads the latest speeds), stealing
    answers the next ones (the choice comes from the replays, which lag an iteration), then
    BOA's split alone (stealing costs claims and finds nothing to take); SA-ATP ends within
    1 % of BOA."""
    schedule = SlowdownSchedule(static={5: 3.0})
    plans, sa = run(job("sa-atp", schedule, iterations=60))
    _, boa = run(job("boa", schedule, iterations=60))
    assert plans[1].shares[5] < plans[0].shares[5] / 2 and not plans[1].steal
    assert plans[2].steal  # the first plan with a replay: the straggler shows
    assert not any(p.steal for p in plans[45:])
    assert all(p.shares[5] < 12 for p in plans[45:])
    assert sa[45:].mean() <= 1.01 * boa[45:].mean()


def test_takeover_is_armed_in_the_jobs_own_slots_only_while_the_plan_leaves_a_straggler_late():
    """A 3x straggler from the start. With BOA's split it is on time, so nothing waits for the
    job's own slots and takeover is off there (inf); with even shares and no compute help
    (sa-atp-takeover) it stays late, and takeover is armed past the lag the plan expects.
    Without a flagged worker it is armed for any chunk that waits past jitter: a worker that
    slows down now is flagged only from the next iteration on."""
    schedule = SlowdownSchedule(static={5: 3.0})
    plans, _ = run(job("sa-atp", schedule, iterations=60))
    assert all(5 in p.stragglers for p in plans[45:])
    assert all(p.takeover_after == np.inf for p in plans[45:])
    plans, _ = run(job("sa-atp-takeover", schedule, iterations=60))
    assert all(5 in p.stragglers for p in plans[5:])
    assert all(0 < p.takeover_after < np.inf for p in plans[5:])
    plans, _ = run(job("sa-atp", SlowdownSchedule()))
    assert all(not p.stragglers and 0 < p.takeover_after < np.inf for p in plans[1:])


def test_transient_slowdowns_are_answered_by_stealing():
    """Slowdowns that come and go: SA-ATP steals, and its iterations are far shorter than
    BOA's, whose split always answers the iteration before."""
    schedule = SlowdownSchedule(transient_prob=0.05, seed=1)
    plans, sa = run(job("sa-atp", schedule, iterations=60))
    _, boa = run(job("boa", schedule, iterations=60))
    assert sum(p.steal for p in plans[10:]) >= 40
    assert sa[10:].mean() < 0.9 * boa[10:].mean()


def test_a_straggler_whose_fixed_cost_outlasts_the_step_gets_no_share():
    """At 4x, the straggler's fixed cost alone (41.6 ms) is longer than the others' whole
    step: it computes nothing (BOA still gives it a sample) but on its trials, contributes
    zeros, and SA-ATP beats BOA."""
    schedule = SlowdownSchedule(static={5: 4.0})
    plans, sa = run(job("sa-atp", schedule, iterations=60))
    _, boa = run(job("boa", schedule, iterations=60))
    zero = [p.shares[5] == 0 for p in plans[20:]]
    assert sum(zero) >= 30 and not all(zero)  # a trial now and then
    assert all(sum(p.shares) == 512 for p in plans)
    assert sa[20:].mean() < 0.95 * boa[20:].mean()


"""Simulated jobs (sim/job.py and what it drives): the shipped policies make the decisions from
simulated step times, the same ones they make on synthetic traces (tests/policy_traces.py);
plans of more than 32 workers map onto racks; slot takeover frees a shared pool; runs are
deterministic under a seed; workloads, straggler processes and the efficiency fit."""

from __future__ import annotations

import json

import numpy as np
import pytest
import simpy

from experiments.stragglers import SlowdownSchedule, StepTimeProfile
from host_lib.scheduling.policies.registry import make_policy
from sim.aggregation import CallPlan, SlotPool, SwitchAggregation
from sim.efficiency import Efficiency, fit
from sim.job import HostCosts, Job, JobSpec
from sim.network import Network, SwitchConfig
from sim.run import simulate
from sim.stragglers import Contention, Stragglers, static
from sim.workloads import PROFILES, Bucket, Workload, gpt2_medium, resnet50, vgg16
from tests.policy_traces import A, C, run_synchronous, straggler

NET = Network()


def trace_job(policy: str, factor: float = 3.0, iterations: int = 30) -> JobSpec:
    """4 workers, global batch 256, ResNet-50 step times, worker 3 slowed, no noise: the
    setting of tests/policy_traces.py."""
    work = Workload("traces", StepTimeProfile(A, C), (Bucket(1 << 20, 1.0),), 64, 1 << 18)
    return JobSpec(work, 4, policy, stragglers=Stragglers(SlowdownSchedule(static={3: factor})),
                   iterations=iterations, global_batch=256)


@pytest.mark.parametrize("policy", ["sa-atp-resplit", "boa"])
def test_policies_decide_on_simulated_step_times_as_on_traces(policy):
    """SA-ATP's re-split and BOA's shares depend on the step times only; driven by the
    simulator they make the same plans as on the synthetic traces of the policy tests (which
    have no work stealing: with it, the step times are the stealing's)."""
    env = simpy.Environment()
    job = Job(env, trace_job(policy), NET, SwitchConfig())
    plans = []
    plan = job.policy.plan
    job.policy.plan = lambda it, history: plans.append(plan(it, history)) or plans[-1]
    env.process(job.process())
    env.run()
    expected, _ = run_synchronous(make_policy(policy, 4, 256), straggler(3.0), 30)
    assert [p.shares for p in plans] == [p.shares for p in expected]
    assert type(job.policy) is type(make_policy(policy, 4, 256))


def test_dpar_leaves_a_slow_worker_out_of_the_sums():
    result = simulate([trace_job("dpar", iterations=40)], NET, SwitchConfig())[0]
    assert np.mean(result.summed[20:]) == pytest.approx(0.75, abs=0.05)
    plain = simulate([trace_job("synchronous", iterations=40)], NET, SwitchConfig())[0]
    assert result.iter_s[20:].mean() < 0.6 * plain.iter_s[20:].mean()


def test_plans_of_more_than_32_workers_map_onto_racks():
    """64 workers on two leaves: the contributors are what the plan says, rack by rack, and a
    k-of-n fan-in is split in proportion (16 of each rack's 32)."""
    n = 64
    contributors = np.ones(n, bool)
    contributors[5] = False
    engine = SwitchAggregation(simpy.Environment(), n, NET, SwitchConfig(), [1 << 22],
                               np.random.default_rng(0))
    ready = np.where(contributors[:, None], np.linspace(0, 1e-3, n)[:, None], np.nan)
    proc = engine.env.process(engine.run(ready, CallPlan(contributors, n - 1)))
    engine.env.run()
    np.testing.assert_array_equal(proc.value.summed, contributors)

    engine = SwitchAggregation(simpy.Environment(), n, NET, SwitchConfig(), [1 << 22],
                               np.random.default_rng(0))
    proc = engine.env.process(engine.run(np.linspace(0, 1e-3, n)[:, None],
                                         CallPlan(np.ones(n, bool), 32)))
    engine.env.run()
    summed = proc.value.summed
    assert summed[:32].sum() == summed[32:].sum() == 16
    assert summed[:16].all() and summed[32:48].all()  # the first to arrive in each rack


def test_a_128_worker_job_runs_one_policy_over_its_racks():
    spec = JobSpec(resnet50(), 128, "sa-atp", stragglers=Stragglers(
        SlowdownSchedule(static=static(128, 3.0, 1 / 32))), iterations=20)
    result = simulate([spec], NET, SwitchConfig())[0]
    plain = simulate([JobSpec(resnet50(), 128, "synchronous", stragglers=spec.stragglers,
                              iterations=20)], NET, SwitchConfig())[0]
    assert result.summed[-1] == 1.0  # compute help keeps every sample
    assert result.iter_s[-5:].mean() < 0.5 * plain.iter_s[-5:].mean()


def aggregation_with_pool(pool, helpers):
    """A 4-worker job whose worker 3 is 50 ms late; takeover after the minimum of 2 RTOs."""
    engine = SwitchAggregation(pool.env, 4, NET, SwitchConfig(slots=512), [1 << 20],
                               np.random.default_rng(0), pool, max_blocks=1)
    ready = np.array([[0.0], [0.0], [0.0], [0.05]])
    plan = CallPlan(np.ones(4, bool), 4, helpers, frozenset({3}) if helpers else frozenset())
    return pool.env.process(engine.run(ready, plan))


@pytest.mark.parametrize("helpers", [(), (0, 1, 2)])
def test_takeover_frees_a_shared_pool_for_the_next_job(helpers):
    """Two jobs share one window's worth of aggregators. Without takeover the straggling job
    holds them until its straggler sends, and the other job's block goes to its parameter
    server; with takeover a helper takes the block over after 2 RTOs and the other job finds
    the aggregators free. The straggling job's sum still holds every contribution."""
    env = simpy.Environment()
    pool = SlotPool(env, 512)
    first = aggregation_with_pool(pool, helpers)
    other = SwitchAggregation(env, 4, NET, SwitchConfig(slots=512), [1 << 20],
                              np.random.default_rng(1), pool, max_blocks=1)
    second = env.process(other.run(np.full((4, 1), 0.01), CallPlan(np.ones(4, bool), 4)))
    env.run()
    assert first.value.summed.all()
    assert first.value.delivered.min() > 0.05
    assert first.value.taken == (1 if helpers else 0)
    assert second.value.fallback == (0 if helpers else 1)
    assert pool.container.level == 512


def test_runs_are_deterministic_under_a_seed():
    def once(seed):
        spec = JobSpec(resnet50(), 16, "k-of-n", stragglers=Stragglers(
            SlowdownSchedule(transient_prob=0.05, seed=seed), jitter=0.05, seed=seed),
            iterations=15, costs=HostCosts(2e-4), seed=seed)
        return simulate([spec], Network(loss=1e-4), SwitchConfig())[0]

    a, b, c = once(3), once(3), once(4)
    assert a.ends == b.ends and a.summed == b.summed
    assert a.retransmissions == b.retransmissions
    assert a.ends != c.ends


def test_contention_stretches_work_by_the_time_spent_contended():
    """Free until 1 s, contended (3x slower) until 2 s, free after: 1.5 s of work started at
    0.5 s runs 0.5 s free, then 1 s at a third of the speed (1/3 s of work), then the rest."""
    contention = Contention(frozenset({0}), factor=3.0)
    contention._edges[0] = [1.0, 2.0, 1e9]
    assert contention.stretch(0, 0.0, 0.5) == pytest.approx(0.5)
    assert contention.stretch(0, 1.0, 0.25) == pytest.approx(0.75)
    assert contention.stretch(0, 0.5, 1.5) == pytest.approx(0.5 + 1.0 + (1.5 - 0.5 - 1 / 3))
    assert contention.stretch(1, 0.5, 1.5) == 1.5  # an unaffected worker


def test_stragglers_are_spread_over_the_racks():
    assert static(4, 3.0, 0.25) == {3: 3.0}  # the testbed's worker 3
    slow = static(1024, 3.0, 1 / 32)
    assert sorted(w // 32 for w in slow) == list(range(32))
    assert static(32, 1.0, 0.5) == {}


def test_workloads_have_the_measured_parameter_counts():
    measured = json.loads(PROFILES.read_text())["models"]
    assert resnet50().params == measured["resnet50"]["params"]
    assert vgg16().params == measured["vgg16"]["params"]
    assert gpt2_medium().params == 354_823_168  # GPT-2 medium's published size
    for work in (resnet50(), vgg16(), gpt2_medium()):
        assert work.grad_bytes == 4 * work.params
        ready = [b.ready for b in work.buckets]
        assert ready == sorted(ready) and ready[-1] == pytest.approx(1.0)
        assert ready[0] >= 1 / 3  # nothing before the forward pass ends


def test_the_efficiency_fit_recovers_a_known_model():
    truth = Efficiency(rho=0.4, sigma=0.3)
    points = [{"fraction": f, "mean_staleness": t, "stale": 0.0 if t == 0 else 0.5,
               "seed": 0, "iterations": 100 * float(truth.iterations(f, t))}
              for f, t in [(1, 0), (0.75, 0), (0.5, 0), (0.25, 0), (1, 0.5), (1, 1.0)]]
    got = fit(points)
    assert got.rho == pytest.approx(truth.rho, abs=1e-3)
    assert got.sigma == pytest.approx(truth.sigma, abs=1e-3)


def test_the_testbed_replay_runs_a_multi_job_scenario_with_its_neighbour():
    """sim.testbed.neighbour: only the multi-job scenario has a second job, with the same
    padded gradient, no straggler and plain aggregation; beside it the measured job's replay
    is slower than the same job alone (they share the switch's pipeline)."""
    from sim import calibration, testbed

    assert testbed.neighbour("slot-budget") is None
    other = testbed.neighbour("multi-job")
    alone = testbed.spec("slot-budget", "switch", train=False)
    assert other.workload.params == alone.workload.params
    assert other.policy == "synchronous" and other.comm == "switch"
    assert all(other.stragglers.schedule.factor(w, i) == 1.0
               for w in range(testbed.WORKERS) for i in range(50))
    beside = calibration.replay("multi-job", "switch", train=False).iter_s[1:].mean()
    by_itself = calibration.replay("slot-budget", "switch", train=False).iter_s[1:].mean()
    assert beside > 1.05 * by_itself


def test_the_testbed_replay_lasts_the_measured_harness_calls():
    """sim.testbed takes the switch's rates and the hosts' turnaround from bench's harness
    calls (docs/results/testbed_rates.json): the replay of one such call, at 64 slots and at
    the slot budget, lasts what the measured call lasted, where the pipeline's rates alone,
    with no turnaround, would have it faster."""
    from sim import testbed

    calls = testbed.measured()["harness_calls"]["call_s"]
    assert len(calls) >= 2
    for slots, measured in calls.items():
        replayed = testbed.call_s(int(slots), testbed.path_scale(), testbed.turnaround_s())
        assert replayed == pytest.approx(measured, rel=0.01)
        assert testbed.call_s(int(slots), 1.0, 0.0) < 0.9 * measured


@pytest.mark.parametrize("comm,factor", [("ring", 1.5), ("switch", 1.0)])
def test_emulated_links_end_each_call_a_wire_time_after_the_last_start(comm, factor):
    """The testbed's emulated links (experiments/emulated_link.py) replayed: with a wire time far
    above what the network takes, every iteration of a job with a 3x straggler lasts its
    compute (A 64 + C, three times over) plus the floor, 1.5 wire times for a ring of four and
    one for the switch; a tiny gradient leaves nothing else that long."""
    wire = 0.2
    spec = trace_job("synchronous", iterations=6)
    spec.workload = Workload("traces", StepTimeProfile(A, C), (Bucket(1 << 10, 1.0),), 64, 256)
    spec.comm, spec.wire_s = comm, wire
    iters = simulate([spec], NET, SwitchConfig())[0].iter_s
    assert iters == pytest.approx(np.full(6, 3 * (A * 64 + C) + factor * wire), abs=2e-3)
    spec.wire_s = 0.0
    assert simulate([spec], NET, SwitchConfig())[0].iter_s.max() < 3 * (A * 64 + C) + 0.01


@pytest.mark.parametrize("overflow", ["server", "sender"])
def test_a_block_that_meets_a_full_pool_is_summed_where_the_switch_sends_it(overflow):
    """The other job's block meets aggregators the straggling job holds: ATP's switch sends
    every contribution to the job's parameter server, SA-ATP's starts the block taken over by
    its first sender (worker 1 here, 1 ms ahead of the others), whose host receives the
    others' contributions and sums them (docs/protocol.md §4.6). Either way the result holds
    every contribution and comes after the last of them reached the switch."""
    env = simpy.Environment()
    pool = SlotPool(env, 512)
    aggregation_with_pool(pool, ())
    switch = SwitchConfig(slots=512, pool_overflow=overflow)
    other = SwitchAggregation(env, 4, NET, switch, [1 << 20], np.random.default_rng(1), pool,
                              max_blocks=1)
    ready = np.array([[0.011], [0.010], [0.011], [0.011]])
    second = env.process(other.run(ready, CallPlan(np.ones(4, bool), 4)))
    env.run()
    assert second.value.fallback == 1 and second.value.summed.all()
    last_in = 0.011 + (1 << 20) / NET.payload_bytes / NET.pps
    assert second.value.delivered.min() > last_in
    at_server = other.ps.down_free[0] > 0
    at_hosts = other.helper_links.down_free > 0
    assert at_server == (overflow == "server")
    assert at_hosts.tolist() == ([False] * 4 if overflow == "server"
                                 else [False, True, False, False])

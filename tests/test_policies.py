"""Straggler policies from the literature (DESIGN.md §4), decided on synthetic timing traces:
DPAR's exclusion and readmission, BOA's exact min-max split, Partial-Reduce's groups, k-of-n's
fan-in. The traces follow the emulated compute of the training runs: worker w takes
``slowdown(it, w) * (a b + c)`` seconds for b samples (the H100 ResNet-50 fit), and every
iteration costs a fixed communication time on top of its slowest contributor."""

from __future__ import annotations

import copy
import itertools

import numpy as np
import pytest

from host_lib.scheduling.policies.base import IterationPlan, StepHistory
from host_lib.scheduling.policies.boa import Boa, fit_line
from host_lib.scheduling.policies.dpar import Dpar
from host_lib.scheduling.policies.k_of_n import KOfN, sign_flips
from host_lib.scheduling.policies.minmax import fluid_makespan, makespan, min_max_split
from host_lib.scheduling.policies.partial_reduce import PartialReduce
from host_lib.scheduling.policies.registry import POLICIES, make_policy
from tests.policy_traces import COMM, A, B, C, N, run_delayed, run_synchronous, step_time, straggler


def excluded(plan: IterationPlan) -> frozenset[int]:
    return frozenset(w for w in range(plan.n_workers) if not plan.contributes(w))


# -- the interface ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_every_policy_plans_a_consistent_split(name):
    """Shares never exceed the global batch, weights are the contributors' (discounted)
    samples (0 for a contributor whose share is 0: SA-ATP's re-split may leave a worker
    nothing to compute, and it contributes zeros), and the in-band fan-in, when set, is the
    number of contributions the switch must wait for."""
    policy = make_policy(name, N, B)
    runner = run_delayed if policy.delays_gradients else run_synchronous
    plans, _ = runner(policy, straggler(3.0), 30)
    for plan in plans:
        assert len(plan.shares) == N and min(plan.shares) >= 0
        if not policy.delays_gradients:
            assert sum(plan.shares) <= B
        contributors = [w for w in range(N) if plan.contributes(w)]
        assert contributors
        weights = plan.weights()
        assert all(weights[w] > 0 or plan.shares[w] == 0 for w in contributors)
        assert all(weights[w] == 0 for w in range(N) if w not in contributors)
        assert 0 <= plan.fanin <= len(contributors)


def test_a_history_upto_earlier_sizes_is_the_history_as_it_was():
    """What SA-ATP prepares its plans on when the training loop did not ask it to: the rows of
    every series as they stood, one iteration of communication behind the steps."""
    history, rng = StepHistory(N), np.random.default_rng(0)
    snapshots = []
    for it in range(6):
        snapshots.append(copy.deepcopy(history))
        history.add(rng.random(N), rng.integers(1, 9, N), pass_s=rng.random(N))
        if it:
            history.add_comm(rng.random(N), busy_s=rng.random(N))
    for then in snapshots:
        now = history.upto(len(then), len(then.comm_s))
        assert (len(now), len(now.comm_s), now.least_comm_s) == (
            len(then), len(then.comm_s), then.least_comm_s)
        for name in ("pass_s", "claim_s", "busy_s", "host_s"):
            np.testing.assert_array_equal(now.series(name, 8), then.series(name, 8))
        for mine, theirs in ((now.window(8), then.window(8)),
                             (now.series("comm_s", 8), then.series("comm_s", 8))):
            np.testing.assert_array_equal(mine, theirs)


# -- DPAR ---------------------------------------------------------------------------------------


def test_dpar_excludes_a_3x_straggler_and_readmits_it_after_recovery_without_flapping():
    recovery = 100
    plans, lengths = run_synchronous(Dpar(N, B), straggler(3.0, start=10, stop=recovery), 200,
                                     jitter=0.03)
    out = [3 in excluded(p) for p in plans]
    first = out.index(True)
    assert 10 < first <= 16  # once the detector calls it persistent
    # Trials (one iteration back in) come after exclusions that double: 4, 8, 16, 32, ...
    trials = [i for i in range(first, recovery) if not out[i]]
    gaps = np.diff([first] + trials)
    assert list(gaps[:3]) == [4, 9, 17]  # period, then the trial iteration itself
    assert all(excluded(p) <= {3} for p in plans)
    # After the recovery it is back within one exclusion period, and stays.
    back = next(i for i in range(recovery, 200) if not out[i])
    assert back <= recovery + 64
    assert not any(out[back:])
    # Waiting for it was avoided: iterations while it is excluded run at the others' pace.
    fast = step_time(1.0, [64])[0] + COMM
    assert np.median(lengths[first:recovery][np.array(out[first:recovery])]) < 1.1 * fast


def test_dpar_normalises_by_the_contributors_and_shrinks_the_fanin():
    plans, _ = run_synchronous(Dpar(N, B), straggler(3.0), 20)
    plan = next(p for p in plans if excluded(p))
    assert plan.shares == (64, 64, 64, 0)
    assert plan.contributors == 0b0111 and plan.fanin == 3
    assert plan.weights() == [64.0, 64.0, 64.0, 0.0]


@pytest.mark.parametrize("jitter", [0.02, 0.05])
def test_dpar_excludes_nobody_without_a_straggler(jitter):
    plans, _ = run_synchronous(Dpar(N, B), straggler(1.0), 300, jitter=jitter, seed=3)
    assert not any(excluded(p) for p in plans)


def test_dpar_keeps_a_worker_whose_exclusion_would_cost_more_data_than_it_saves_time():
    """1.25x slower: waiting costs 20 % of the iteration, excluding costs 25 % of the data."""
    plans, _ = run_synchronous(Dpar(N, B), straggler(1.25), 100)
    assert not any(excluded(p) for p in plans)


def test_dpar_leaves_a_short_slowdown_alone():
    plans, _ = run_synchronous(Dpar(N, B), straggler(3.0, start=20, stop=22), 60)
    assert not any(excluded(p) for p in plans)


# -- BOA ----------------------------------------------------------------------------------------


def brute_force_makespan(a, c, total, lo, hi) -> float:
    best = np.inf
    for split in itertools.product(*(range(lo[i], hi[i] + 1) for i in range(len(a)))):
        if sum(split) == total:
            best = min(best, makespan(a, c, split))
    return best


@pytest.mark.parametrize("seed", range(40))
def test_min_max_split_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 5))
    total = int(rng.integers(n, 16))
    a = rng.uniform(0.1, 3.0, n)
    c = rng.uniform(0.0, 5.0, n) * rng.integers(0, 2, n)  # some intercepts zero
    if seed % 5 == 0:
        a[1] = a[0]  # ties
        c[1] = c[0]
    lo = rng.integers(0, 2, n)
    hi = np.maximum(lo, rng.integers(total // n, total + 1, n))
    if hi.sum() < total:
        hi[0] += total - hi.sum()
    split = min_max_split(a, c, total, lo, hi)
    assert sum(split) == total
    assert all(lo[i] <= split[i] <= hi[i] for i in range(n))
    assert makespan(a, c, split) == brute_force_makespan(a, c, total, lo, hi)


def greedy_split(a, c, total, lo) -> list[int]:
    """An independent exact reference for large instances: hand out samples one at a time,
    each to the worker whose time after taking it is smallest (optimal for a min-max of
    increasing costs, by an exchange argument)."""
    b = list(lo)
    for _ in range(total - sum(b)):
        i = min(range(len(a)), key=lambda i: (a[i] * (b[i] + 1) + c[i], i))
        b[i] += 1
    return b


@pytest.mark.parametrize("seed", range(10))
def test_min_max_split_matches_greedy_on_large_instances(seed):
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(3, 9))
    a, c = rng.uniform(1e-4, 1e-3, n), rng.uniform(0, 0.02, n)
    total = int(rng.integers(100, 2000))
    split = min_max_split(a, c, total, 1)
    assert sum(split) == total
    assert makespan(a, c, split) == makespan(a, c, greedy_split(a, c, total, [1] * n))


@pytest.mark.parametrize("seed", range(20))
def test_the_fluid_makespan_is_the_best_fractional_division(seed):
    rng = np.random.default_rng(200 + seed)
    n = int(rng.integers(2, 5))
    a, c = rng.uniform(0.1, 3.0, n), rng.uniform(0.0, 20.0, n) * rng.integers(0, 2, n)
    total = int(rng.integers(n, 16))
    bound = fluid_makespan(total, a, c)
    # every worker that computes pays its fixed cost: at the bound, the capacities add up
    assert np.maximum(0.0, (bound - c) / a).sum() == pytest.approx(total, rel=1e-9)
    # and no integer split does better, within any bounds
    zeros, full = np.zeros(n, np.int64), np.full(n, total)
    assert bound <= brute_force_makespan(a, c, total, zeros, full) + 1e-9
    assert bound <= makespan(a, c, min_max_split(a, c, total, 1)) + 1e-9


def test_min_max_split_rejects_impossible_bounds():
    with pytest.raises(ValueError):
        min_max_split([1.0, 1.0], [0.0, 0.0], 5, lo=[0, 0], hi=[2, 2])
    with pytest.raises(ValueError):
        min_max_split([1.0, 0.0], [0.0, 0.0], 5)


def test_fit_line_recovers_a_line_and_refuses_a_single_batch_size():
    b = np.array([10, 20, 40])
    assert fit_line(b, 0.5 * b + 3) == pytest.approx((0.5, 3.0))
    assert fit_line(np.array([32, 32]), np.array([1.0, 1.1])) is None


def optimum_for(speeds) -> float:
    a, c = A * np.asarray(speeds), C * np.asarray(speeds)
    return makespan(a, c, min_max_split(a, c, B, 1))


@pytest.mark.parametrize("factor", [2.0, 3.0])
def test_boa_reaches_the_exact_min_max_split_of_the_true_models(factor):
    speeds = np.array([1.0, 1.0, 1.0, factor])
    plans, lengths = run_synchronous(Boa(N, B), lambda it, w: speeds[w], 6)
    first, final = plans[1], plans[-1]
    assert first.shares[3] < first.shares[0]  # proportional from the start (c unknown yet)
    assert sum(final.shares) == B and final.contributors == 0b1111
    assert final.weights() == [float(s) for s in final.shares]  # divided by B
    assert makespan(A * speeds, C * speeds, final.shares) == pytest.approx(optimum_for(speeds))
    assert lengths[-1] - COMM == pytest.approx(optimum_for(speeds))


def test_boa_handles_three_speed_classes():
    speeds = np.array([1.0, 1.0, 1.6, 2.5])
    plans, _ = run_synchronous(Boa(N, B), lambda it, w: speeds[w], 8)
    assert makespan(A * speeds, C * speeds, plans[-1].shares) == pytest.approx(
        optimum_for(speeds))


def test_boa_re_solves_when_a_worker_recovers_and_not_for_jitter():
    plans, _ = run_synchronous(Boa(N, B), straggler(3.0, stop=30), 60, jitter=0.02)
    assert plans[25].shares[3] < 30
    assert max(plans[-1].shares) - min(plans[-1].shares) <= 6  # back to about even
    changes = sum(plans[i].shares != plans[i - 1].shares for i in range(40, 60))
    assert changes <= 2


def test_boa_keeps_even_shares_without_a_straggler():
    plans, _ = run_synchronous(Boa(N, B), straggler(1.0), 50, jitter=0.03, seed=1)
    assert all(max(p.shares) - min(p.shares) <= 4 for p in plans)


# -- Partial-Reduce -----------------------------------------------------------------------------


def deliveries(plans) -> dict[int, list[int]]:
    return {w: [p.iteration for p in plans if p.contributes(w)] for w in range(N)}


@pytest.mark.parametrize("speeds, kwargs", [
    ([1.0, 1.0, 1.0, 3.0], {}),
    ([1.0, 1.0, 1.0, 10.0], {}),
    ([1.0, 1.0, 1.6, 2.5], {}),
    ([1.0, 1.0, 1.0, 1.0], {"max_group": 2, "min_group": 1}),
    ([1.0, 1.2, 5.0, 10.0], {"max_group": 2, "min_group": 1, "max_staleness": 3}),
])
def test_partial_reduce_never_starves_a_worker(speeds, kwargs):
    policy = PartialReduce(N, B, **kwargs)
    plans, _ = run_delayed(policy, lambda it, w: speeds[w], 120)
    for w, its in deliveries(plans).items():
        gaps = np.diff([-1] + its + [len(plans)])
        assert gaps.max() <= policy.max_staleness + 1, f"worker {w} waited {gaps.max()}"
    for plan in plans:
        assert all(plan.discount(w) >= 1 / (1 + policy.max_staleness)
                   for w in range(N) if plan.contributes(w))


def test_partial_reduce_lets_the_fast_workers_run_at_their_pace():
    plans, lengths = run_delayed(PartialReduce(N, B), straggler(3.0), 60)
    fast = step_time(1.0, [64])[0] + COMM
    assert np.median(lengths[5:]) < 1.1 * fast
    slow = [p for p in plans[5:] if p.contributes(3)]
    assert 60 / 3 - 8 <= len(slow) <= 60 / 3 + 2  # about every third iteration
    assert all(p.discount(3) < 1 and p.fanin in (0, N) for p in slow)
    assert all(p.contributors == 0b0111 and p.fanin == 3 for p in plans[5:]
               if not p.contributes(3))


def test_partial_reduce_is_synchronous_for_equal_workers():
    plans, _ = run_delayed(PartialReduce(N, B), straggler(1.0), 20)
    assert all(p.contributors == 0b1111 and p.weights() == [64.0] * N for p in plans)


def test_partial_reduce_weights_are_discounted_samples():
    plans, _ = run_delayed(PartialReduce(N, B), straggler(3.0), 20)
    plan = next(p for p in plans[3:] if p.contributes(3))
    tau = 1 / plan.discount(3) - 1
    assert tau >= 1
    assert plan.weights()[3] == pytest.approx(64 / (1 + tau))
    assert plan.weights()[0] == 64.0


# -- k-of-n -------------------------------------------------------------------------------------


def test_k_of_n_waits_for_the_fastest_k_and_normalises_by_their_samples():
    plan = KOfN(N, B, k=3).plan(0, StepHistory(N))
    assert plan.fanin == 3 and plan.contributors == 0b1111
    weights = np.array(plan.weights())
    # The communicator divides each block by the weights of the workers its bitmap names:
    # with 3 of 4 summed, that is the mean over their 192 samples.
    for bitmap in (0b0111, 0b1011, 0b1110):
        bits = (bitmap >> np.arange(N)) & 1
        assert bits @ weights == 192.0


def test_k_of_n_grows_k_while_sign_flips_stay_high():
    policy = KOfN(N, B, k=2, patience=5, flip_threshold=0.4)
    rng = np.random.default_rng(0)
    g = rng.standard_normal(1000)
    for it in range(20):  # steady gradients: no flips
        policy.observe(it, g + 0.01 * rng.standard_normal(1000))
    assert policy.k == 2
    for it in range(20, 24):  # four noisy rounds (fewer than patience), then a calm one
        noise = rng.standard_normal(1000)
        policy.observe(it, noise)
    policy.observe(24, noise)
    assert policy.k == 2 and policy.noisy_rounds == 0
    for it in range(25, 60):  # pure noise: half the signs flip every round
        policy.observe(it, rng.standard_normal(1000))
    assert policy.k == N  # grew once per 5 noisy rounds, and stops at n
    assert policy.plan(60, StepHistory(N)).fanin == N


def test_sign_flips():
    assert sign_flips(np.array([1.0, -1.0, 0.0, 2.0]), np.array([1.0, 1.0, 3.0, -0.5])) == 2 / 3

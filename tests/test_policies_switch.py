"""Every registered policy's plans through the embedded switch, with real worker processes:
each worker calls ``allreduce`` with the plan's round plan and weights on known inputs (scaled by
its staleness discount, as the training loop does), and every worker, contributing or not, must get,
bit for bit, the sum of the quantized contributions of the workers the switch summed, divided by
their weights (to the last bit where a staleness discount makes a weight fractional): the plan's
contributors, or, for k-of-n, exactly k of them per block (checked against every k-subset). The
plans come from driving each policy over a synthetic
trace with a 3x straggler on worker 3 (tests/policy_traces.py)."""

from __future__ import annotations

import itertools
import multiprocessing

import numpy as np
import pytest

from host_lib.engine.quantize import DEFAULT_EXPONENT, qbits
from host_lib.scheduling.policies.registry import POLICIES, make_policy
from protocol import constants as P
from tests.policy_traces import B, N, run_delayed, run_synchronous, straggler
from tests.quant_reference import reference_quantize
from topologies.local import LocalCluster, local_job

ELEMENTS = 20 * P.LANES + 17  # 21 blocks, the last one partial
PLANS_PER_POLICY = 3
STRAGGLER = 3  # starts each k-of-n call once the others have its result: never summed


def representative_plans(name: str):
    """The last few distinct plans a policy makes over a trace with a 3x straggler."""
    policy = make_policy(name, N, B)
    runner = run_delayed if policy.delays_gradients else run_synchronous
    plans, _ = runner(policy, straggler(3.0), 30)
    distinct = {}
    for plan in plans:
        key = (plan.shares, plan.contributors, plan.fanin, plan.discounts, plan.helpers)
        distinct[key] = plan
    return list(distinct.values())[-PLANS_PER_POLICY:]


CALLS = [(name, i, plan) for name in sorted(POLICIES)
         for i, plan in enumerate(representative_plans(name))]


def call_input(name: str, index: int, worker: int, discount: float) -> np.ndarray:
    rng = np.random.default_rng([sorted(POLICIES).index(name), index, worker])
    return rng.uniform(-0.9, 0.9, ELEMENTS).astype(np.float32) * np.float32(discount)


def run_plans(comm, arg):
    """Every call of CALLS; for each k-of-n call (``others_done``: call number -> an event per
    other worker), the straggler waits until every other worker has the call's result."""
    calls, others_done = arg
    w = comm.config.worker
    out = []
    for k, (name, index, plan) in enumerate(calls):
        if k in others_done and w == STRAGGLER:
            assert all(done.wait(300) for done in others_done[k].values())
        x = call_input(name, index, w, plan.discount(w))
        out.append(comm.allreduce(x, weights=plan.weights(), tag=(name, index),
                                 plan=plan.round_plan(w)))
        if k in others_done and w != STRAGGLER:
            others_done[k][w].set()
    comm.close(linger=0.5)
    return out


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    mp = multiprocessing.get_context("spawn")
    others_done = {k: {w: mp.Event() for w in range(N) if w != STRAGGLER}
                   for k, (name, _, _) in enumerate(CALLS) if name == "k-of-n"}
    with LocalCluster([local_job(1, N, slots=16, inband_fanin=True)],
                      tmp_path_factory.mktemp("policies")) as cluster:
        return cluster.run_workers(run_plans, {1: [(CALLS, others_done)] * N}, timeout=300)


def expected_blocks(name: str, index: int, plan, subset) -> np.ndarray:
    """Per block, what the switch returns when it sums ``subset``: the exact integer sum of
    the quantized inputs (scale 2^0: no history, and |x| < 1), times 2^-j, over the subset's
    weights."""
    j = qbits(N)
    scales = np.full(-(-ELEMENTS // P.LANES), DEFAULT_EXPONENT + P.EXP_BIAS)
    total = sum(reference_quantize(call_input(name, index, w, plan.discount(w)), scales, j)
                for w in subset)
    divisor = sum(plan.weights()[w] for w in subset) or 1.0
    return (total.astype(np.float64) * (np.ldexp(1.0, -j) / divisor)).astype(np.float32)


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_policy_plans_give_every_worker_the_exact_normalised_sum(results, name):
    mine = [(k, call) for k, call in enumerate(CALLS) if call[0] == name]
    assert mine
    for k, (_, index, plan) in mine:
        got = results[(1, 0)][k]
        for w in range(1, N):
            np.testing.assert_array_equal(results[(1, w)][k], got, err_msg=f"worker {w}")
        contributors = [w for w in range(N) if plan.contributes(w)]
        blocks = np.zeros(-(-ELEMENTS // P.LANES) * P.LANES, np.float32)
        blocks[:ELEMENTS] = got
        blocks = blocks.reshape(-1, P.LANES)
        if name == "k-of-n":
            # Exactly k contributions per block, never the late worker's.
            candidates = [s for s in itertools.combinations(contributors, plan.fanin)
                          if STRAGGLER not in s]
        else:
            candidates = [tuple(contributors)]
        references = {s: expected_blocks(name, index, plan, s) for s in candidates}
        # Integer weights divide exactly; a fractional (staleness-discounted) weight makes the
        # divisor depend on the order of its summation, so the last bit may differ.
        rtol = 0.0 if all(float(x).is_integer() for x in plan.weights()) else 2.4e-7
        for b, block in enumerate(blocks):
            n_valid = min(P.LANES, ELEMENTS - b * P.LANES)
            matches = [s for s, ref in references.items()
                       if np.allclose(block[:n_valid], ref[b, :n_valid], rtol=rtol, atol=0)]
            assert matches, f"{name} plan {index} ({plan.note}): block {b} sums no admitted set"

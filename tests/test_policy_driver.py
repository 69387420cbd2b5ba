"""The policy driver plans the next iteration on a thread of its own while the current one's
gradient is aggregated, on one rank, which publishes its plans for the others: the plans every
rank gets must be those the policy makes when asked in order, from the same step times."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch.distributed as dist

from host_lib.scheduling.policies.base import StepHistory
from host_lib.scheduling.policies.driver import PolicyDriver
from host_lib.scheduling.policies.registry import make_policy
from host_lib.scheduling.sampling import GlobalBatchSampler

WORLD, BATCH, ITERATIONS = 3, 96, 24


def step_time(it: int, rank: int, samples: int) -> float:
    """A worker's compute time: rank 2 turns 3x slow from iteration 6 on."""
    slow = 3.0 if rank == 2 and it >= 6 else 1.0
    return slow * 1e-3 * (samples + 8) * (1 + 0.01 * ((it * 7 + rank * 3) % 5))


@pytest.fixture
def stores():
    server = dist.TCPStore("127.0.0.1", 0, WORLD, True, wait_for_workers=False)
    clients = [dist.TCPStore("127.0.0.1", server.port, WORLD, False) for _ in range(WORLD)]
    yield clients
    del clients, server


def run_rank(driver: PolicyDriver, rank: int, plans: list, ahead: list) -> None:
    for it in range(ITERATIONS):
        plan = driver.plan(it)
        plans.append(plan)
        samples = plan.shares[rank]
        driver.computed(it, step_time(it, rank, samples), samples)
        ahead.append(driver.ahead is not None and driver.ahead.iteration == it + 1)
        driver.communicated(0.002 + 1e-4 * rank)


@pytest.mark.parametrize("policy", ["sa-atp-resplit", "boa"])
def test_plans_made_ahead_are_the_plans_made_in_order(stores, policy):
    sampler = GlobalBatchSampler(10 * BATCH, BATCH)
    drivers = [PolicyDriver(make_policy(policy, WORLD, BATCH), r, WORLD, s, sampler)
               for r, s in enumerate(stores)]
    plans, ahead = [[] for _ in range(WORLD)], [[] for _ in range(WORLD)]
    threads = [threading.Thread(target=run_rank, args=(d, r, plans[r], ahead[r]))
               for r, d in enumerate(drivers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    assert all(all(a) for a in ahead)  # every next plan was under way before it was asked for
    # only the planner read the step times
    assert len(drivers[0].exchange.history) >= ITERATIONS - 1
    assert all(len(d.exchange.history) == 0 for d in drivers[1:])

    # The reference: the same policy asked in order, with the step times the ranks published.
    reference, history = make_policy(policy, WORLD, BATCH), StepHistory(WORLD)
    for it in range(ITERATIONS):
        expected = reference.plan(it, history)
        for r in range(WORLD):
            assert plans[r][it] == expected, (r, it)
        history.add([step_time(it, r, expected.shares[r]) for r in range(WORLD)],
                    list(expected.shares))
        if it:
            history.add_comm([0.002 + 1e-4 * r for r in range(WORLD)])
    # the slow rank's share shrank: the history the plans were made from was the real one
    assert plans[0][-1].shares[2] < plans[0][0].shares[2]
    np.testing.assert_equal(sum(plans[0][-1].shares), BATCH)

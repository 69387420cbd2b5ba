"""Step times, and the plans made from them, shared through a real torch.distributed TCPStore,
as the training loop does. The policy driver plans the next iteration on a thread of its own
while the current one's gradient is aggregated, on one rank, which publishes its plans for the
others: the plans every rank gets must be those the policy makes when asked in order, from the
same step times."""

from __future__ import annotations

import math
import threading

import numpy as np
import pytest
import torch.distributed as dist

from host_lib.scheduling.policies.base import StepHistory
from host_lib.scheduling.policies.driver import PolicyDriver
from host_lib.scheduling.policies.exchange import _KEEP, StepTimeExchange
from host_lib.scheduling.policies.registry import make_policy
from host_lib.scheduling.sampling import GlobalBatchSampler

WORLD = 3
BATCH, ITERATIONS = 96, 24  # the driver tests


@pytest.fixture
def stores():
    server = dist.TCPStore("127.0.0.1", 0, WORLD, True, wait_for_workers=False)
    clients = [dist.TCPStore("127.0.0.1", server.port, WORLD, False) for _ in range(WORLD)]
    yield clients
    del clients, server


def record(it: int, rank: int) -> tuple[float, int, float]:
    """What rank publishes for iteration it: compute time, samples, previous comm time."""
    return 0.01 * (it + 1) * (rank + 1), 10 * rank + it, (math.nan if it == 0 else it + rank / 10)


def test_every_worker_collects_the_same_history_and_old_records_go(stores):
    exchanges = [StepTimeExchange(s, r, WORLD) for r, s in enumerate(stores)]
    iterations = _KEEP + 4
    for it in range(iterations):
        for r, ex in enumerate(exchanges):
            ex.publish(it, *record(it, r))
        assert exchanges[0].finished(it) == WORLD
        for ex in exchanges:
            ex.collect(it)
    for ex in exchanges:
        h = ex.history
        assert len(h) == iterations and len(h.comm_s) == iterations - 1
        for it in range(iterations):
            expected = [record(it, r) for r in range(WORLD)]
            np.testing.assert_array_equal(h.compute_s[it], [e[0] for e in expected])
            np.testing.assert_array_equal(h.samples[it], [e[1] for e in expected])
            if it:  # the comm time published with `it` belongs to `it - 1`
                np.testing.assert_array_equal(h.comm_s[it - 1], [e[2] for e in expected])
    # records older than _KEEP iterations are deleted; recent ones remain
    assert not stores[0].check([exchanges[0]._key(0, r) for r in range(WORLD)])
    assert stores[0].check([exchanges[0]._key(iterations - 1, r) for r in range(WORLD)])


def test_collect_waits_for_a_late_record(stores):
    exchanges = [StepTimeExchange(s, r, WORLD) for r, s in enumerate(stores)]
    for r in range(WORLD - 1):
        exchanges[r].publish(0, *record(0, r))
    late = threading.Timer(0.2, exchanges[-1].publish, args=(0, *record(0, WORLD - 1)))
    late.start()
    history = exchanges[0].collect(0)
    late.join()
    assert history.samples[0].tolist() == [record(0, r)[1] for r in range(WORLD)]


def step_time(it: int, rank: int, samples: int) -> float:
    """A worker's compute time: rank 2 turns 3x slow from iteration 6 on."""
    slow = 3.0 if rank == 2 and it >= 6 else 1.0
    return slow * 1e-3 * (samples + 8) * (1 + 0.01 * ((it * 7 + rank * 3) % 5))


def run_rank(driver: PolicyDriver, rank: int, plans: list, ahead: list,
             events: list | None = None) -> None:
    log = events.append if events is not None else lambda event: None
    for it in range(ITERATIONS):
        log("plan")
        plan = driver.plan(it)
        plans.append(plan)
        samples = plan.shares[rank]
        driver.computed(it, step_time(it, rank, samples), samples)
        ahead.append(driver.ahead is not None and driver.ahead.iteration == it + 1)
        log("communicated")
        driver.communicated(0.002 + 1e-4 * rank)


@pytest.mark.parametrize("policy", ["sa-atp-resplit", "boa"])
def test_plans_made_ahead_are_the_plans_made_in_order(stores, policy):
    sampler = GlobalBatchSampler(10 * BATCH, BATCH)
    drivers = [PolicyDriver(make_policy(policy, WORLD, BATCH), r, WORLD, s, sampler)
               for r, s in enumerate(stores)]
    plans, ahead = [[] for _ in range(WORLD)], [[] for _ in range(WORLD)]
    events = []  # the planning rank's, with its requests to prepare
    prepare = drivers[0].planner.prepare
    drivers[0].planner.prepare = lambda: events.append("prepare") or prepare()
    threads = [threading.Thread(target=run_rank,
                                args=(d, r, plans[r], ahead[r], events if r == 0 else None))
               for r, d in enumerate(drivers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    assert all(all(a) for a in ahead)  # every next plan was under way before it was asked for
    # each preparation asked for once the next plan was, not while it was still being fetched
    assert events.count("prepare") == ITERATIONS - 1
    assert all(events[i - 1] == "plan" for i, e in enumerate(events) if e == "prepare")
    for d in drivers:  # the plans of the iteration after the last, before the store goes
        d.ahead.result()
        d.close()
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

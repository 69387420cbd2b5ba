"""Step times shared through a real torch.distributed TCPStore, as the training loop does."""

from __future__ import annotations

import math
import threading

import numpy as np
import pytest
import torch.distributed as dist

from host_lib.scheduling.policies.exchange import _KEEP, StepTimeExchange

WORLD = 3


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

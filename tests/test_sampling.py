"""The global batches every worker draws (host_lib/scheduling/sampling.py): the same whatever
order a worker asks for them in, disjoint within an epoch, and not changed by what a caller does
to one it was given (the sampler keeps each epoch's permutation)."""

from __future__ import annotations

import numpy as np

from host_lib.scheduling.sampling import GlobalBatchSampler

N, B = 1000, 64


def test_batches_do_not_depend_on_the_order_they_are_asked_for_in():
    in_order = GlobalBatchSampler(N, B, seed=5)
    expected = [in_order.batch(it) for it in range(4 * in_order.per_epoch)]
    shuffled = GlobalBatchSampler(N, B, seed=5)
    for it in np.random.default_rng(0).permutation(len(expected)):
        np.testing.assert_array_equal(shuffled.batch(int(it)), expected[it])


def test_an_epochs_batches_are_disjoint_and_the_epochs_differ():
    sampler = GlobalBatchSampler(N, B, seed=1)
    epochs = [np.concatenate([sampler.batch(e * sampler.per_epoch + s)
                              for s in range(sampler.per_epoch)]) for e in range(2)]
    for samples in epochs:
        assert len(np.unique(samples)) == sampler.per_epoch * B
        assert samples.min() >= 0 and samples.max() < N
    assert not np.array_equal(epochs[0], epochs[1])


def test_a_caller_changing_its_batch_changes_no_other():
    sampler = GlobalBatchSampler(N, B)
    first = sampler.batch(0)
    kept = first.copy()
    first[:] = -1
    np.testing.assert_array_equal(sampler.batch(0), kept)
    assert (sampler.batch(1) >= 0).all()

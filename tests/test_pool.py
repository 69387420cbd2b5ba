"""Two jobs that borrow from the switch's shared pool (docs/protocol.md §4.6), end to end
through the embedded switch: every call's sum equals numpy's while the other job holds the
pool's lanes for a straggler (a chunk that meets them is summed by a helper)."""

import multiprocessing
import time

import numpy as np
import pytest

from host_lib.engine.rounds import RoundPlan
from topologies.local import LocalCluster, local_job

CALLS = 3
ELEMENTS = 48 * 64  # 48 chunks: six times round a window of 2 own + 6 borrowed slots


def values(job: int, worker: int, call: int) -> np.ndarray:
    rng = np.random.default_rng([job, worker, call])
    return rng.integers(-(2**20), 2**20, ELEMENTS, dtype=np.int32)


def pooled_calls(comm, arg):
    """``CALLS`` sums; a worker given a ``straggle`` event sets it and sleeps before each call,
    one given a ``wait`` event waits for it first; returns the sums and the chunks that were
    taken over (found the lanes held, in this test)."""
    job, straggle, wait = arg
    outs, taken = [], 0
    for call in range(CALLS):
        if straggle is not None:
            straggle.set()
            time.sleep(0.4)
        if wait is not None and call == 0:
            assert wait.wait(60)
            time.sleep(0.1)  # the straggler's peers have sent by now
        outs.append(comm.allreduce_int(values(job, comm.config.worker, call)))
        taken += comm.last_stats.taken
    comm.close()
    return outs, taken


@pytest.mark.parametrize("loss", [0.0, 0.05])
def test_two_jobs_sharing_the_pool_get_exact_sums(tmp_path, loss):
    """Job 1's worker 2 straggles before every call, so its peers' chunks hold pool lanes
    that job 2's chunks then meet. Under loss, a chunk's first sender, which the switch names
    its helper when the chunk meets held lanes, may miss that news (this stalled a job before
    a forwarded contribution counted as the naming, tests/test_transport_rules.py)."""
    straggling = multiprocessing.get_context("spawn").Event()
    jobs = [local_job(1, 3, slots=2, borrow=6), local_job(2, 3, first_port=4, slots=2, borrow=6)]
    with LocalCluster(jobs, tmp_path, pool_slots=6) as cluster:
        args = {1: [(1, None, None), (1, None, None), (1, straggling, None)],
                2: [(2, None, straggling)] * 3}
        impairment = {"drop": loss} if loss else None
        results = cluster.run_workers(pooled_calls, args, timeout=300, impairment=impairment)
    for job in (1, 2):
        for call in range(CALLS):
            expected = sum(values(job, w, call).astype(np.int64) for w in range(3))
            for w in range(3):
                np.testing.assert_array_equal(results[(job, w)][0][call], expected)
    assert sum(results[(2, w)][1] for w in range(3)) > 0  # job 2 did meet held lanes


def fanin_calls(comm, arg):
    """A k-of-n job's calls (fan-in 2 of 3; worker 2 sits them out, and the others stay until
    it has its results, which it may have to ask them for) or, for the other job, the straggler
    pattern above; returns the sums and the chunks taken over."""
    job, straggle, wait = arg
    if job == 2:
        return pooled_calls(comm, arg)
    wait, finished = wait
    assert wait.wait(60)
    time.sleep(0.1)
    plan = RoundPlan(fanin=2, contribute=comm.config.worker != 2)
    outs, taken = [], 0
    for call in range(CALLS):
        outs.append(comm.allreduce_int(values(job, comm.config.worker, call), plan))
        taken += comm.last_stats.taken
    if comm.config.worker == 2:
        finished.set()
    else:
        assert finished.wait(60)  # the communicator answers peers between calls
    comm.close()
    return outs, taken


def test_a_chunk_summed_by_a_helper_completes_with_the_fan_in(tmp_path):
    """Job 1 completes each chunk with 2 of its 3 workers (worker 2 sits every call out, as an
    overtaken k-of-n worker does); its chunks that meet job 2's held lanes are summed by a
    helper, which must not wait for worker 2 (it waited for every worker, and the calls
    stalled)."""
    mp = multiprocessing.get_context("spawn")
    straggling, finished = mp.Event(), mp.Event()
    jobs = [local_job(1, 3, slots=2, borrow=6, inband_fanin=True),
            local_job(2, 3, first_port=4, slots=2, borrow=6)]
    with LocalCluster(jobs, tmp_path, pool_slots=6) as cluster:
        args = {1: [(1, None, (straggling, finished))] * 3,
                2: [(2, None, None), (2, None, None), (2, straggling, None)]}
        results = cluster.run_workers(fanin_calls, args, timeout=300, stall_timeout=10.0)
    for call in range(CALLS):
        expected = sum(values(1, w, call).astype(np.int64) for w in range(2))
        for w in range(3):
            np.testing.assert_array_equal(results[(1, w)][0][call], expected)
    assert sum(results[(1, w)][1] for w in range(3)) > 0

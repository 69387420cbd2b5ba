"""Two jobs that borrow from the switch's shared pool (docs/protocol.md §4.6), end to end
through the embedded switch: every call's sum equals numpy's while the other job holds the
pool's lanes for a straggler (a chunk that meets them is summed by a helper).

The lanes are held by construction: one job's straggler waits until the switch shows its peers'
chunks holding every lane set of the pool's first shadow set; only then does the other job run,
and the straggler goes on once that job has finished."""

import multiprocessing

import numpy as np
import pytest

from host_lib.engine.rounds import RoundPlan
from tests.switch_state import counted, held_pool_lanes, wait_for
from topologies.local import LocalCluster, local_job

CALLS = 3
SLOTS, BORROW = 2, 6
ELEMENTS = 48 * 64  # 48 chunks: six times round a window of 2 own + 6 borrowed slots
# Chunks that sum in the pool's lanes of shadow set 0, which the holding job's chunks 2-7 hold:
# per call, those of the borrowed slots (c mod 8 >= 2) in windows 0, 2 and 4 (set 0). Each
# starts taken over, and the switch multicasts its first sender's contribution as the partial.
MEETING_HELD_LANES = CALLS * 3 * BORROW


def values(job: int, worker: int, call: int) -> np.ndarray:
    rng = np.random.default_rng([job, worker, call])
    return rng.integers(-(2**20), 2**20, ELEMENTS, dtype=np.int32)


def pooled_calls(comm, arg):
    """``CALLS`` sums; a worker given a ``hold`` event waits for it before its first call (the
    straggler); returns the sums and the chunks that were taken over. Each worker stays until
    every worker of its job (the ``everyone`` barrier) has its sums: a peer that lost a result
    asks those that may have it, which answer between calls, until they close."""
    job, hold, everyone = arg
    outs, taken = [], 0
    for call in range(CALLS):
        if hold is not None and call == 0:
            assert hold.wait(600)
        outs.append(comm.allreduce_int(values(job, comm.config.worker, call)))
        taken += comm.last_stats.taken
    everyone.wait(600)
    comm.close()
    return outs, taken


def job_of_three(job: int, hold=None) -> list[tuple]:
    """pooled_calls' arguments for a job's three workers, worker 2 held by ``hold``."""
    everyone = multiprocessing.get_context("spawn").Barrier(3)
    return [(job, None, everyone), (job, None, everyone), (job, hold, everyone)]


def start_holding_job(cluster, job: int, hold, **options):
    """Job ``job``'s workers, its straggler (worker 2) held back; returns once its peers' chunks
    hold every lane set of the pool's shadow set 0 (a worker without helpers never gives up a
    chunk's lanes, and nothing else completes them without the straggler)."""
    group = cluster.start_workers(pooled_calls, {job: job_of_three(job, hold)},
                                  stall_timeout=600.0, **options)
    wait_for(lambda: held_pool_lanes(cluster, job) == BORROW,
             f"job {job}'s chunks hold the pool's lanes")
    return group


def expected_sum(job: int, call: int, workers) -> np.ndarray:
    return sum(values(job, w, call).astype(np.int64) for w in workers)


@pytest.mark.parametrize("loss", [0.0, 0.05])
def test_two_jobs_sharing_the_pool_get_exact_sums(tmp_path, loss):
    """Job 1's straggler holds the pool's lanes while job 2 runs every call, so job 2's chunks
    meet them. Under loss, a chunk's first sender, which the switch names its helper when the
    chunk meets held lanes, may miss that news (this stalled a job before a forwarded
    contribution counted as the naming, tests/test_transport_rules.py)."""
    hold = multiprocessing.get_context("spawn").Event()
    jobs = [local_job(1, 3, slots=SLOTS, borrow=BORROW),
            local_job(2, 3, first_port=4, slots=SLOTS, borrow=BORROW)]
    impairment = {"drop": loss} if loss else None
    with LocalCluster(jobs, tmp_path, pool_slots=BORROW) as cluster:
        holding = start_holding_job(cluster, 1, hold, impairment=impairment)
        results = cluster.run_workers(pooled_calls, {2: job_of_three(2)}, timeout=300,
                                      impairment=impairment)
        assert held_pool_lanes(cluster, 1) == BORROW   # held all along
        partials = counted(cluster, 2, "egress", "PARTIAL")
        hold.set()
        results |= holding.join(300)
    for job in (1, 2):
        for call in range(CALLS):
            for w in range(3):
                np.testing.assert_array_equal(results[(job, w)][0][call],
                                              expected_sum(job, call, range(3)))
    assert partials >= 3 * MEETING_HELD_LANES   # every one of them went to a helper
    assert sum(results[(2, w)][1] for w in range(3)) > 0


def fanin_calls(comm, arg):
    """A k-of-n job's calls: fan-in 2 of 3; worker 2 sits them out, and the others stay until
    it has its results, which it may have to ask them for. Returns the sums and the chunks
    taken over."""
    job, finished = arg
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
    hold, finished = mp.Event(), mp.Event()
    jobs = [local_job(1, 3, slots=SLOTS, borrow=BORROW, inband_fanin=True),
            local_job(2, 3, first_port=4, slots=SLOTS, borrow=BORROW)]
    with LocalCluster(jobs, tmp_path, pool_slots=BORROW) as cluster:
        holding = start_holding_job(cluster, 2, hold)
        results = cluster.run_workers(fanin_calls, {1: [(1, finished)] * 3}, timeout=300)
        assert held_pool_lanes(cluster, 2) == BORROW
        partials = counted(cluster, 1, "egress", "PARTIAL")
        hold.set()
        results |= holding.join(300)
    for call in range(CALLS):
        for w in range(3):
            np.testing.assert_array_equal(results[(1, w)][0][call],
                                          expected_sum(1, call, range(2)))
            np.testing.assert_array_equal(results[(2, w)][0][call],
                                          expected_sum(2, call, range(3)))
    assert partials >= 3 * MEETING_HELD_LANES
    assert sum(results[(1, w)][1] for w in range(3)) > 0

"""Random schedules of one aggregator's traffic, checked against sums computed independently:
every worker's contribution to a chunk is the same in every send, so every result, copy and
partial that leaves the switch must be the sum of the contributions its bitmap names. Used on
the model with answers held on the loop port (test_tna_loop.py) and on the twin
(test_tna_model.py)."""

from __future__ import annotations

import numpy as np

from protocol import constants as P
from tests.p4.packets import Job


def contribution(job_id: int, w: int, chunk: int) -> np.ndarray:
    """Worker w's lanes for a chunk of a job."""
    return np.random.default_rng((job_id, w, chunk)).integers(-2**20, 2**20, P.LANES,
                                                              dtype=np.int32)


def check_sums(outs, workers: int) -> int:
    """Every result, copy and partial in ``outs`` carries the sum of the contributions of the
    workers its bitmap names, for the job and chunk it names; the number of such answers."""
    checked = 0
    for _, f in outs:
        if f.header.op in (P.Op.RESULT, P.Op.PARTIAL):
            h = f.header
            want = np.sum([contribution(h.job, w, h.chunk) for w in range(workers)
                           if h.bitmap >> w & 1], axis=0, dtype=np.int32)
            np.testing.assert_array_equal(f.lanes, want, err_msg=str(h))
            checked += 1
    return checked


def random_schedule(jobs: list[Job], first: int, step: int, seed: int, steps: int = 80,
                    holder=None, passes_2: bool = False) -> int:
    """Random contributions, retransmissions, takeovers and helper results for chunks
    ``first``, ``first + step``, ... of each job (around the newest one sent), checking every
    answer. With ``holder`` (a target that holds what goes round its loop ports while its
    ``hold`` is set, and ``release``-s the ``index``-th of them), a third of the sends keep
    their answer on the loop; each is released later, in any order (a pipe may have several
    loop ports), or lost on the loop (a fifth of them: the hosts retransmit). With
    ``passes_2`` as well, a third of the sends are held before pass 2 (``hold_resubmit``) and
    released in any order or lost likewise, every one of them before a newer chunk of its job
    begins (resubmission does not hold a packet for a host round trip: docs/tofino.md,
    'Order-free sums'). Returns how many sums were checked."""
    rng = np.random.default_rng(seed)
    n = len(jobs[0].spec.workers)
    newest = {j.spec.id: 0 for j in jobs}
    checked = 0
    for _ in range(steps):
        if holder is not None and holder.model.looped and rng.random() < 0.3:
            index = int(rng.integers(len(holder.model.looped)))
            if rng.random() < 0.2:
                holder.model.looped.pop(index)
            else:
                checked += check_sums(holder.release(index), n)
            continue
        if passes_2 and holder.model.resubmitted and rng.random() < 0.3:
            checked += _release_a_pass_2(holder, rng, n)
            continue
        job = jobs[rng.integers(len(jobs))]
        k = max(0, newest[job.spec.id] + int(rng.integers(-1, 2)))
        if passes_2 and k > newest[job.spec.id]:
            while holder.model.resubmitted:
                checked += _release_a_pass_2(holder, rng, n)
        newest[job.spec.id] = max(newest[job.spec.id], k)
        chunk, w = first + step * k, int(rng.integers(n))
        action = rng.choice(["data", "data", "data", "takeover", "helper_result"])
        if holder is not None:
            holder.hold = bool(rng.random() < 0.3)
            holder.hold_resubmit = passes_2 and bool(rng.random() < 0.3)
        if action == "data":
            outs = job.data(w, chunk, contribution(job.spec.id, w, chunk))
        elif action == "takeover":
            outs = job.send(w, P.Op.TAKEOVER, chunk)
        else:
            total = np.sum([contribution(job.spec.id, v, chunk) for v in range(n)], axis=0,
                           dtype=np.int32)
            outs = job.send(w, P.Op.HELPER_RESULT, chunk, total, bitmap=(1 << n) - 1, count=n,
                            exp=0, scale=0x8000)
        if holder is not None:
            holder.hold = holder.hold_resubmit = False
        checked += check_sums(outs, n)
    while passes_2 and holder.model.resubmitted:
        checked += _release_a_pass_2(holder, rng, n)
    while holder is not None and holder.model.looped:
        checked += check_sums(holder.release(), n)
    return checked


def _release_a_pass_2(holder, rng, workers: int) -> int:
    """Any held pass 2, released (its answer may be held on the loop in turn) or lost."""
    index = int(rng.integers(len(holder.model.resubmitted)))
    if rng.random() < 0.2:
        holder.model.resubmitted.pop(index)
        return 0
    return check_sums(holder.release_pass_2(index), workers)

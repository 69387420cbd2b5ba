"""Work stealing within an iteration, as host_lib.scheduling.work_stealing runs it on the testbed,
in simulated time: each worker computes its own share's micro-batches from the head, then takes
micro-batches from the tail of the share with the most left, while some share has two or more
left.

A micro-batch of ``k`` samples costs a worker ``per_sample * k`` seconds of its own speed, and
its first micro-batch also the step's fixed cost, as experiments/train.py emulates it; each claim
costs one store round trip (``claim_s``); a thief that finds nothing left pays one more look.
"""

from __future__ import annotations

import heapq

import numpy as np

from host_lib.scheduling.work_stealing import WORTH_STEALING, micro_batches


def stealing_schedule(shares, pieces: int, fixed_s: float, per_sample_s: float,
                      slowness: np.ndarray, starts: np.ndarray, claim_s: float = 0.0
                      ) -> tuple[np.ndarray, np.ndarray, list[list[tuple[int, int]]]]:
    """Per worker: when its compute ends, how many samples it computed, and the micro-batches
    ``(owner, index)`` it computed. ``slowness`` multiplies each worker's compute times."""
    n = len(shares)
    cut = [[len(m) for m in micro_batches(np.arange(s), pieces)] for s in shares]
    head, tail = [0] * n, [0] * n
    left = np.array([len(c) for c in cut])  # micro-batches not yet claimed, per share
    ends = np.asarray(starts, np.float64).copy()
    samples = np.zeros(n, np.int64)
    done: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    ready = [(float(starts[w]), w) for w in range(n)]
    heapq.heapify(ready)
    while ready:
        t, w = heapq.heappop(ready)
        if left[w] > 0:
            owner, index = w, head[w]
            head[w] += 1
        else:
            owner = int(np.argmax(left))  # the most left; the lowest rank among equals
            if left[owner] < WORTH_STEALING:
                ends[w] = t + claim_s  # the claim or look that found nothing
                continue
            tail[owner] += 1
            index = len(cut[owner]) - tail[owner]
            t += claim_s  # the thief's look at the other shares
        left[owner] -= 1
        k = cut[owner][index]
        t += claim_s + slowness[w] * (per_sample_s * k + (0.0 if done[w] else fixed_s))
        samples[w] += k
        done[w].append((owner, index))
        heapq.heappush(ready, (t, w))
    return ends, samples, done

"""Work stealing within an iteration, as host_lib.work_stealing runs it on the testbed, in
simulated time: each worker claims its own share's first micro-batch, computes the others from
the head, then takes micro-batches from the tail of the share with the most left, while some
share has two or more left, and computes its first micro-batch last (through DDP).

A micro-batch of ``k`` samples costs a worker ``per_sample * k`` seconds of its own speed, and
its first micro-batch also the step's fixed cost, as examples/train.py emulates it; each claim
costs one store round trip (``claim_s``); a thief that finds nothing left pays one more look.
"""

from __future__ import annotations

import heapq

import numpy as np

from host_lib.work_stealing import WORTH_STEALING, micro_batches


def stealing_schedule(shares, pieces: int, fixed_s: float, per_sample_s: float,
                      slowness: np.ndarray, starts: np.ndarray, claim_s: float = 0.0
                      ) -> tuple[np.ndarray, np.ndarray, list[list[tuple[int, int]]], np.ndarray]:
    """Per worker: when its compute ends, how many samples it computed, the micro-batches
    ``(owner, index)`` it computed, and how long its last one took (the one whose backward
    pass runs through DDP, its buckets sent as they fill). ``slowness`` multiplies each
    worker's compute times."""
    n = len(shares)
    cut = [[len(m) for m in micro_batches(np.arange(s), pieces)] for s in shares]
    kept = [len(c) > 0 for c in cut]  # the first, claimed at once and computed last
    head, tail = [1] * n, [0] * n
    left = np.array([max(len(c) - 1, 0) for c in cut])  # not yet claimed, per share
    ends = np.asarray(starts, np.float64).copy()
    samples = np.zeros(n, np.int64)
    done: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    last = np.zeros(n)
    ready = [(float(starts[w]), w) for w in range(n)]
    heapq.heapify(ready)
    while ready:
        t, w = heapq.heappop(ready)
        if left[w] > 0:
            owner, index = w, head[w]
            head[w] += 1
            left[w] -= 1
        elif left.max() >= WORTH_STEALING:
            owner = int(np.argmax(left))  # the most left; the lowest rank among equals
            tail[owner] += 1
            index = len(cut[owner]) - tail[owner]
            left[owner] -= 1
            t += claim_s  # the thief's look at the other shares
        elif kept[w]:
            owner, index, kept[w] = w, 0, False
        else:
            ends[w] = t + claim_s  # the look that found nothing
            continue
        k = cut[owner][index]
        last[w] = slowness[w] * (per_sample_s * k + (0.0 if done[w] else fixed_s))
        t += claim_s + last[w]
        samples[w] += k
        done[w].append((owner, index))
        heapq.heappush(ready, (t, w))
    return ends, samples, done, last

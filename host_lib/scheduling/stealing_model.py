"""Work stealing as :mod:`host_lib.scheduling.work_stealing` runs it, in model time: who computes
which micro-batch and when each worker's compute ends, from each worker's compute speed.

SA-ATP's cost model (:mod:`host_lib.scheduling.policies.cost_model`) replays recent iterations
through it to tell whether stealing would have paid, and the simulator (``sim/job.py``) runs
each stealing iteration through it.

Each worker computes its own share's micro-batches from the head, one claim each; once what it
has left of its own would take no longer than ``keep_s`` (or only one micro-batch is left), it
reserves the rest in one claim
(:func:`~host_lib.scheduling.work_stealing.reserve_now`); it then takes micro-batches from the
tail of the share :func:`~host_lib.scheduling.work_stealing.worth_taking` picks (if it computed
some of its own), and ends with its reserve in one pass through DDP. A micro-batch of ``k``
samples costs a worker
``per_sample_s * k`` seconds, and the first it computes (its reserve, if it computed nothing
before) also ``fixed_s``, as experiments/train.py emulates it; each claim and each look at the
other shares costs one store round trip (``claim_s``). A worker knows its own speed once it
has computed a micro-batch; before, it goes by ``prior_s`` (the plan's ``per_sample_s``) if it
is a straggler there (:func:`~host_lib.scheduling.work_stealing.slow_prior`).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from host_lib.scheduling.work_stealing import (
    micro_batch_sizes,
    pick_owner,
    reserve_now,
    slow_priors,
)


@dataclass
class Schedule:
    ends: np.ndarray  # per worker, when its compute ends (its pass through DDP included)
    samples: np.ndarray  # per worker, the samples it computed
    done: list[list[tuple[int, int]]]  # per worker, the (owner, index) it computed, in order
    pass_s: np.ndarray  # per worker, how long its pass through DDP took


def schedule(shares, pieces: int, fixed_s, per_sample_s, starts, claim_s: float = 0.0,
             keep_s: float = 0.0, prior_s=None, kappa: float = 0.0) -> Schedule:
    """The iteration's stealing, for per-worker ``fixed_s``, ``per_sample_s`` and ``starts``;
    ``prior_s`` and ``kappa`` are what the plan expects (per-worker time per sample, None:
    unknown; the fixed cost in samples)."""
    n = len(shares)
    fixed = np.broadcast_to(np.asarray(fixed_s, np.float64), (n,))
    per = np.broadcast_to(np.asarray(per_sample_s, np.float64), (n,))
    prior = slow_priors(prior_s, n)
    cut = [micro_batch_sizes(int(s), pieces) for s in shares]
    shares_now = ShareClaims(cut, kappa, None if prior_s is None else np.asarray(prior_s, float))
    head, tail = shares_now.head, shares_now.tail
    left = np.array([len(c) for c in cut])  # micro-batches not yet claimed, per share
    reserve: list[list[int]] = [[] for _ in range(n)]
    stealing = [False] * n
    out = Schedule(np.asarray(starts, np.float64).copy(), np.zeros(n, np.int64),
                   [[] for _ in range(n)], np.zeros(n))
    start = np.asarray(starts, np.float64)
    ready = [(float(start[w]), w) for w in range(n)]
    heapq.heapify(ready)
    while ready:
        t, w = heapq.heappop(ready)
        computed = bool(out.done[w])
        if not stealing[w] and left[w] > 0:
            own = cut[w][head[w]:len(cut[w]) - tail[w]]
            t += claim_s
            if reserve_now(own, per[w] if computed else prior[w], keep_s):
                reserve[w] = list(range(int(head[w]), int(head[w]) + len(own)))
                head[w] += len(own)
                left[w] = 0
                stealing[w] = True
            else:
                k = cut[w][head[w]]
                out.done[w].append((w, int(head[w])))
                head[w] += 1
                left[w] -= 1
                t += per[w] * k + (0.0 if computed else fixed[w])
                out.samples[w] += k
            heapq.heappush(ready, (t, w))
            continue
        if not stealing[w]:  # its share is claimed; a claim finds the last ones taken
            stealing[w] = True
            heapq.heappush(ready, (t + (claim_s if tail[w] else 0.0), w))
            continue
        stealer = head[w] > len(reserve[w])  # it computed own ones: only such a worker steals
        owner = None
        if stealer:
            t += claim_s  # the look at the other shares
            owner = shares_now.pick(w, t - start[w], per[w] * sum(cut[w][i] for i in reserve[w]),
                                    float(per[w]))
        if owner is not None:
            tail[owner] += 1
            left[owner] -= 1
            index = int(len(cut[owner]) - tail[owner])
            k = cut[owner][index]
            out.done[w].append((owner, index))
            t += claim_s + per[w] * k + (0.0 if computed else fixed[w])
            out.samples[w] += k
            heapq.heappush(ready, (t, w))
            continue
        k = sum(cut[w][i] for i in reserve[w])  # the pass through DDP
        out.pass_s[w] = per[w] * k + (fixed[w] if k and not computed else 0.0)
        out.done[w] += [(w, i) for i in reserve[w]]
        out.samples[w] += k
        out.ends[w] = t + out.pass_s[w]
    return out


class ShareClaims:
    """Every share's micro-batches and how far its claims got (``head`` from the front by its
    owner, ``tail`` from the back by thieves), kept as arrays so that a thief's look at every
    share is one pass of numpy (:func:`~host_lib.scheduling.work_stealing.pick_owner`)."""

    def __init__(self, cut: list[list[int]], kappa: float, planned: np.ndarray | None):
        n = len(cut)
        self.length = np.array([len(c) for c in cut], np.int64)
        self.sizes = np.zeros((n, int(self.length.max(initial=0)) or 1))
        for v, c in enumerate(cut):
            self.sizes[v, :len(c)] = c
        self.cum = np.concatenate([np.zeros((n, 1)), np.cumsum(self.sizes, axis=1)], axis=1)
        self.head = np.zeros(n, np.int64)
        self.tail = np.zeros(n, np.int64)
        self.rows = np.arange(n)
        self.kappa, self.planned = kappa, planned

    def pick(self, thief: int, elapsed_s: float, reserved_s: float, per_sample_s: float
             ) -> int | None:
        """The owner ``thief`` takes its next micro-batch from, or None
        (:func:`~host_lib.scheduling.work_stealing.worth_taking`)."""
        rows, head = self.rows, self.head
        end = np.maximum(self.length - self.tail, head)  # past the last unclaimed one
        counts = end - head
        counts[thief] = 0  # not from its own share
        samples = self.cum[rows, end] - self.cum[rows, head]
        last = self.sizes[rows, np.maximum(end - 1, 0)]
        # progress(): those it finished, half the one it computes, the fixed cost once paid
        before = np.maximum(head - 1, 0)
        first = np.where(head == 1, self.kappa, 0.0)
        progress = np.where(head == 0, 0.0, self.cum[rows, before] + self.kappa - first
                            + (self.sizes[rows, before] + first) / 2)
        planned = (np.full(len(rows), per_sample_s) if self.planned is None else self.planned)
        return pick_owner(counts, samples, last, progress, planned, elapsed_s, reserved_s,
                          per_sample_s)

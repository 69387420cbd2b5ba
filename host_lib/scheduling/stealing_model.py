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
    Expectation,
    micro_batches,
    progress,
    reserve_now,
    slow_prior,
    worth_taking,
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
    expected = Expectation(None if prior_s is None else tuple(float(p) for p in prior_s),
                           kappa)
    fixed = np.broadcast_to(np.asarray(fixed_s, np.float64), (n,))
    per = np.broadcast_to(np.asarray(per_sample_s, np.float64), (n,))
    prior = [slow_prior(prior_s, w) for w in range(n)]
    cut = [[len(m) for m in micro_batches(np.arange(s), pieces)] for s in shares]
    head, tail = [0] * n, [0] * n
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
                reserve[w] = list(range(head[w], head[w] + len(own)))
                head[w] += len(own)
                left[w] = 0
                stealing[w] = True
            else:
                k = cut[w][head[w]]
                out.done[w].append((w, head[w]))
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
            others = [v for v in range(n) if v != w]
            pick = worth_taking(
                [np.array(cut[v][head[v]:len(cut[v]) - tail[v]]) for v in others],
                [progress(np.array(cut[v]), head[v], kappa) for v in others], expected,
                others, t - start[w], per[w] * sum(cut[w][i] for i in reserve[w]),
                float(per[w]))
            owner = None if pick is None else others[pick]
        if owner is not None:
            tail[owner] += 1
            left[owner] -= 1
            index = len(cut[owner]) - tail[owner]
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

"""The exact integer min-max batch split (BOA's program):

    minimise  max_i t_i(b_i)   over integers b_i,  t_i(b) = a_i b + c_i (b > 0),  t_i(0) = 0,
    subject to  sum_i b_i = B,  lo_i <= b_i <= hi_i.

Let cap_i(T) be the largest b_i in [lo_i, hi_i] with t_i(b_i) <= T; the optimal makespan T* is
the least T with sum_i cap_i(T) >= B. Bisection on T finds some feasible T >= T*; taking
b_i = cap_i(T) and then removing the surplus one sample at a time, always from the worker whose
t_i(b_i) is largest, is exact whatever T the bisection stopped at: every sample whose time
exceeds T* is among the largest, and there are at most sum_i cap_i(T) - sum_i cap_i(T*) <=
surplus of them, so all of them go and the makespan ends at T*. Bisection only shortens that
repair. Every comparison uses the same t_i, so floating point cannot make it pick a split that
is worse than another integer split by its own measure. The bisection starts from the
fluid split's makespan (:func:`fluid_makespan`), a lower bound of T*.
"""

from __future__ import annotations

import heapq

import numpy as np

# The repair makes the split exact wherever the bisection stops, so it stops once the bracket
# is narrower than the smallest per-sample time divided by the workers (about one sample to
# repair in all), or after _BISECTIONS halvings. Its bracket runs from the fluid split's
# makespan (a lower bound) to that plus one sample of the slowest worker where that is
# feasible: about one sample each, where [t(lo), t(hi)] spans the whole batch on one worker
# (24 halvings every time: 430 us a split of 4 workers, which the planner makes twice every
# iteration).
_BISECTIONS = 24


def min_max_split(a, c, total: int, lo=None, hi=None) -> tuple[int, ...]:
    """Integer batch sizes minimising the largest t_i(b_i); ``a`` must be positive."""
    a = np.asarray(a, np.float64)
    c = np.asarray(c, np.float64)
    n = len(a)
    lo = np.zeros(n, np.int64) if lo is None else np.broadcast_to(np.asarray(lo, np.int64), n)
    hi = np.full(n, total, np.int64) if hi is None else np.broadcast_to(np.asarray(hi, np.int64), n)
    if (a <= 0).any() or not np.isfinite(a).all() or not np.isfinite(c).all():
        raise ValueError(f"step-time slopes must be positive and finite, got a={a}, c={c}")
    if (lo > hi).any() or lo.sum() > total or hi.sum() < total:
        raise ValueError(f"no split of {total} samples within bounds {lo.tolist()}..{hi.tolist()}")

    def t(i: int, b: int) -> float:
        return float(a[i] * b + c[i]) if b > 0 else 0.0

    def capacity(limit: float) -> np.ndarray:
        """cap_i(limit) of every worker (the floor's rounding corrected both ways)."""
        b = np.clip(np.floor((limit - c) / a), lo, hi).astype(np.int64)
        while (up := (b < hi) & (a * (b + 1) + c <= limit)).any():
            b += up
        while (down := (b > lo) & (b > 0) & (a * b + c > limit)).any():
            b -= down
        return b

    def fits(limit: float) -> bool:
        return int(capacity(limit).sum()) >= total

    low = max(max(t(i, int(lo[i])) for i in range(n)), fluid_makespan(total, a, c))
    high = max(t(i, int(hi[i])) for i in range(n))
    fluid = (total + float(np.sum(c / a))) / float(np.sum(1 / a)) + float(a.max())
    if low < fluid < high and fits(fluid):
        high = fluid
    if fits(low):
        high = low
    resolution = float(a.min()) / n
    for _ in range(_BISECTIONS):
        mid = (low + high) / 2
        if not low < mid < high or high - low < resolution:
            break
        if fits(mid):
            high = mid
        else:
            low = mid
    b = capacity(high).tolist()
    heap = [(-t(i, b[i]), -i) for i in range(n) if b[i] > lo[i]]
    heapq.heapify(heap)
    for _ in range(sum(b) - total):
        _, neg = heapq.heappop(heap)
        i = -neg
        b[i] -= 1
        if b[i] > lo[i]:
            heapq.heappush(heap, (-t(i, b[i]), neg))
    return tuple(b)


def fluid_makespan(total: int, a, c) -> float:
    """The least makespan of any division of ``total`` samples into real-valued shares, a
    worker with a share paying its fixed cost ``c_i`` once: the T with sum_i max(0, (T - c_i)
    / a_i) = total, no later than any integer split's within any bounds. With the workers in
    order of their fixed cost, the first k take part, k the least for which T = (total +
    sum_{i<k} c_i / a_i) / sum_{i<k} 1 / a_i is no later than the next one's fixed cost."""
    a = np.asarray(a, np.float64)
    c = np.asarray(c, np.float64)
    order = np.argsort(c, kind="stable")
    t = ((total + np.cumsum(c[order] / a[order])) / np.cumsum(1.0 / a[order]))
    nxt = np.append(c[order][1:], np.inf)
    return float(t[np.flatnonzero(t <= nxt)[0]])


def makespan(a, c, shares) -> float:
    """max_i t_i(b_i) of a split."""
    return max((float(ai * b + ci) if b > 0 else 0.0) for ai, ci, b in zip(a, c, shares,
                                                                           strict=True))

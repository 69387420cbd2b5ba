"""BOA, batch orchestration (Yang, Kang, Youn, J. Supercomputing 2020).

**The paper's idea.** Heterogeneous GPUs (static stragglers) and dynamic slowdowns are handled
by giving each worker its own mini-batch size: from a performance model of each worker,
``t_i(b) = a_i b + c_i``, solve the min-max integer program ``min max_i t_i(b_i)`` subject to
``sum_i b_i = B`` and per-worker bounds, so that all workers finish together; the gradients
are summed and divided by B, so the update is the one of the global batch.

**Ours.** The models are fitted online, by least squares over each worker's recent (b, t) pairs (the
paper profiles them). While a worker's b has not varied, its slope and intercept cannot be told
apart; it then borrows the intercept-to-slope ratio c/a of the workers whose b did vary (a pooled,
hardware-agnostic shape, scaled to its own measured times), or c = 0 before anyone's b has varied,
which makes the first split proportional to speed; that split varies every b, and the fit is exact
from then on. The program is solved exactly (:mod:`host_lib.scheduling.policies.minmax`). The split
changes when a worker's measured time *drifts* from its model's prediction by more than ``drift``
(its old pairs are then dropped: it became another machine), or when the current models predict a
makespan shorter by more than ``min_gain``; jitter alone never reshuffles the shares. Each worker
gets at least ``min_share`` samples and at most ``max_share``.
"""

from __future__ import annotations

import numpy as np

from host_lib.scheduling.policies.base import IterationPlan, Policy, StepHistory, even_shares
from host_lib.scheduling.policies.minmax import makespan, min_max_split


def fit_line(b: np.ndarray, t: np.ndarray) -> tuple[float, float] | None:
    """Least-squares (a, c) of t = a b + c, or None without two distinct b or with a <= 0. A
    negative intercept is clipped to 0 (refitting the slope through the origin)."""
    b = np.asarray(b, np.float64)
    t = np.asarray(t, np.float64)
    if len(b) < 2 or np.ptp(b) == 0:
        return None
    db = b - b.mean()
    a = float((db * (t - t.mean())).sum() / (db * db).sum())
    c = float(t.mean() - a * b.mean())
    if c < 0:
        a, c = float((b * t).sum() / (b * b).sum()), 0.0
    return (a, c) if a > 0 else None


class Boa(Policy):
    name = "boa"

    def __init__(self, n_workers: int, global_batch: int, window: int = 20, drift: float = 0.15,
                 min_gain: float = 0.02, min_share: int = 1, max_share: int | None = None):
        super().__init__(n_workers, global_batch)
        self.window = window
        self.drift = drift
        self.min_gain = min_gain
        self.min_share = min_share
        self.max_share = max_share or global_batch
        self.since = np.zeros(n_workers, np.int64)  # first iteration of each worker's pairs
        self.shares = even_shares(global_batch, n_workers)
        self.models: tuple[np.ndarray, np.ndarray] | None = None  # the latest fit (a, c)

    def plan(self, iteration: int, history: StepHistory) -> IterationPlan:
        note = ""
        if len(history):
            drifted = self._drifted(history)
            self.since[drifted] = len(history) - 1
            a, c = self.models = self.fit(history)
            candidate = min_max_split(a, c, self.global_batch, self.min_share, self.max_share)
            gain = 1 - makespan(a, c, candidate) / makespan(a, c, self.shares)
            if drifted.any() or gain > self.min_gain:
                self.shares = candidate
                note = (f"re-solved (drift {np.nonzero(drifted)[0].tolist()}, gain {gain:.1%}): "
                        f"predicted {makespan(a, c, candidate) * 1e3:.1f} ms")
        return IterationPlan(iteration, self.shares, (1 << self.n_workers) - 1, note=note)

    def fit(self, history: StepHistory) -> tuple[np.ndarray, np.ndarray]:
        """Per worker (a_i, c_i) from its pairs since its last drift (borrowing a pooled
        shape where its b never varied)."""
        times, samples = history.window(self.window)
        first = len(history) - len(times)
        pairs = []
        for w in range(self.n_workers):
            keep = (np.arange(first, len(history)) >= self.since[w]) & (samples[:, w] > 0)
            pairs.append((samples[keep, w], times[keep, w]))
        fits = [fit_line(b, t) for b, t in pairs]
        ratios = [c / a for fit in fits if fit is not None for a, c in [fit]]
        shape = float(np.median(ratios)) if ratios else 0.0
        a, c = np.empty(self.n_workers), np.empty(self.n_workers)
        for w, (fit, (b, t)) in enumerate(zip(fits, pairs, strict=True)):
            if fit is None and not len(b):  # no pairs (it computed nothing): as it was
                fit = (None if self.models is None
                       else (float(self.models[0][w]), float(self.models[1][w])))
            if fit is None:  # t = a (b + shape), fitted to its own times
                fit_a = float(t.mean() / (b.mean() + shape)) if len(b) else 1.0
                fit = (fit_a, fit_a * shape)
            a[w], c[w] = fit
        return a, c

    def _drifted(self, history: StepHistory) -> np.ndarray:
        """Workers whose last measured time is off the prediction of the previous fit by more
        than ``drift``."""
        if self.models is None:
            return np.zeros(self.n_workers, bool)
        a, c = self.models
        t, b = history.compute_s[-1], history.samples[-1]
        predicted = a * b + c
        return (b > 0) & (np.abs(t - predicted) > self.drift * predicted)

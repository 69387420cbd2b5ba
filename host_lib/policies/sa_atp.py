"""SA-ATP: leading workers lend their spare resources to stragglers.

* **Slot takeover** (spare storage): every iteration, the workers not flagged as stragglers are
  the helpers; when a chunk has waited longer than normal jitter explains and only stragglers
  are missing, its helper takes the slot over through the switch, so the leading workers keep
  streaming (host_lib.transport, host_lib.takeover). This needs no forecast, so it also covers a
  transient straggler within the iteration it appears in.
* **Work stealing** (spare compute, within the iteration): shares are computed in
  micro-batches, and a worker that has finished its own takes micro-batches from the tail of a
  lagging worker's share (host_lib.work_stealing), so a worker that slows down is helped in the
  iteration it slows down in, whether or not it has been seen before.
* **Compute help** (spare compute, across iterations): for persistent stragglers, the global
  batch is re-split every iteration so that the workers' compute times equalise: each share is
  scaled by the mean compute time over the worker's own (``b <- b * mean_t / t_i``, damped, at
  least one sample), so leading workers compute part of the straggler's samples and stealing
  has little left to do. The controller needs no model of step time: a fixed per-step cost,
  which makes a proportional-to-throughput split leave the straggler behind, is simply
  measured away. Splitting the *global* batch keeps the gradient exactly the sum over the
  global batch divided by its size.
"""

from __future__ import annotations

import numpy as np

from host_lib.policies.base import (
    IterationPlan,
    Policy,
    StepHistory,
    even_shares,
    proportional_shares,
)
from host_lib.policies.detection import StragglerDetector


class SaAtp(Policy):
    def __init__(self, n_workers: int, global_batch: int, takeover: bool = True,
                 compute_help: bool = True, work_stealing: bool = True,
                 detector: StragglerDetector | None = None, speed_window: int = 3,
                 damping: float | None = None):
        super().__init__(n_workers, global_batch)
        self.takeover = takeover
        self.compute_help = compute_help
        self.steals_work = compute_help and work_stealing
        self.detector = detector or StragglerDetector()
        self.speed_window = speed_window
        # With stealing, the samples each worker computed move by whole micro-batches from
        # one iteration to the next, and stealing absorbs what changes within one: the re-split
        # follows only what persists.
        self.damping = damping if damping is not None else 0.3 if self.steals_work else 0.7
        self.name = ("sa-atp-takeover" if not compute_help else
                     "sa-atp" if self.steals_work else "sa-atp-resplit")

    def plan(self, iteration: int, history: StepHistory) -> IterationPlan:
        if not len(history):
            plan = self.everyone(iteration)
            if self.takeover:
                plan = IterationPlan(iteration, plan.shares, plan.contributors,
                                     helpers=tuple(range(self.n_workers)))
            return plan
        det = self.detector.assess(history)
        shares = even_shares(self.global_batch, self.n_workers)
        if self.compute_help and det.persistent:
            shares = self._balanced_shares(history)
        helpers = ()
        after = 0.0
        if self.takeover:
            helpers = tuple(w for w in range(self.n_workers) if w not in det.flagged)
            # Call a worker late only past the lag the plan itself expects, plus normal jitter.
            predicted = self._per_sample_time(history) * np.asarray(shares)
            after = float(predicted.max() - predicted.min()
                          + np.median(predicted) * (np.exp(det.threshold) - 1))
        note = (f"stragglers {sorted(det.flagged)} (persistent {sorted(det.persistent)}), "
                f"slowness {np.round(det.slowness, 2).tolist()}")
        return IterationPlan(iteration, shares, (1 << self.n_workers) - 1, helpers=helpers,
                             stragglers=det.flagged, takeover_after=after, note=note)

    def _balanced_shares(self, history: StepHistory) -> tuple[int, ...]:
        """Shares that equalise compute times, from the last iteration's times and shares."""
        times, samples = history.window(1)
        t, b = times[-1], samples[-1].astype(np.float64)
        target = b * t.mean() / np.maximum(t, 1e-9)
        target *= self.global_batch / target.sum()
        shares = np.array(proportional_shares(self.global_batch, self.damping * target
                                              + (1 - self.damping) * b))
        # A damped move smaller than half a sample rounds back to the same shares and would
        # stall short of the balance: move one sample while a worker is half a sample or more
        # from its target.
        gap = target - b
        if (shares == b).all() and np.abs(gap).max() >= 0.5 and shares[gap.argmin()] > 1:
            shares[gap.argmax()] += 1
            shares[gap.argmin()] -= 1
        return tuple(int(s) for s in shares)

    def _speeds(self, history: StepHistory) -> np.ndarray:
        """Samples per second of each worker over the last iterations."""
        times, samples = history.window(self.speed_window)
        return samples.sum(axis=0) / np.maximum(times.sum(axis=0), 1e-9)

    def _per_sample_time(self, history: StepHistory) -> np.ndarray:
        return 1.0 / np.maximum(self._speeds(history), 1e-9)

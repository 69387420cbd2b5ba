"""SA-ATP: leading workers lend their spare resources to stragglers.

* **Slot takeover** (spare storage): every iteration, the workers not flagged as stragglers are
  the helpers; when a chunk has waited longer than normal jitter explains and only stragglers are
  missing, its helper takes the slot over through the switch, so the leading workers keep streaming
  (host_lib.engine.transport, host_lib.engine.takeover). This needs no forecast, so it also covers a
  transient straggler within the iteration it appears in.
* **Work stealing** (spare compute, within the iteration): shares are computed in
  micro-batches, and a worker that has finished its own takes micro-batches from the tail of a
  lagging worker's share (host_lib.scheduling.work_stealing), so a worker that slows down is helped
  in the iteration it slows down in, whether or not it has been seen before.
* **Compute help** (spare compute, across iterations): the global batch is re-split every
  iteration by BOA's planner (:mod:`host_lib.scheduling.policies.boa`): a step-time model
  ``t_i(b) = a_i b + c_i`` per worker, fitted online from the samples each worker computed
  (stolen micro-batches included) and its compute time, and the min-max split of the global
  batch under it, re-solved when a worker drifts from its model. So leading workers compute
  part of a persistent straggler's samples from the iteration after it shows, with the fixed
  per-step cost accounted for, and stealing has little left to do. Splitting the *global*
  batch keeps the gradient exactly the sum over the global batch divided by its size.

The straggler detector drives takeover only: which workers may be called late and who helps.
"""

from __future__ import annotations

import numpy as np

from host_lib.scheduling.policies.base import IterationPlan, Policy, StepHistory, even_shares
from host_lib.scheduling.policies.boa import Boa
from host_lib.scheduling.policies.detection import StragglerDetector


class SaAtp(Policy):
    def __init__(self, n_workers: int, global_batch: int, takeover: bool = True,
                 compute_help: bool = True, work_stealing: bool = True,
                 detector: StragglerDetector | None = None, speed_window: int = 3):
        super().__init__(n_workers, global_batch)
        self.takeover = takeover
        self.compute_help = compute_help
        self.steals_work = compute_help and work_stealing
        self.detector = detector or StragglerDetector()
        self.speed_window = speed_window
        self.balancer = Boa(n_workers, global_batch) if compute_help else None
        self.name = ("sa-atp-takeover" if not compute_help else
                     "sa-atp" if self.steals_work else "sa-atp-resplit")

    def plan(self, iteration: int, history: StepHistory) -> IterationPlan:
        shares = (self.balancer.plan(iteration, history).shares if self.balancer is not None
                  else even_shares(self.global_batch, self.n_workers))
        everyone = (1 << self.n_workers) - 1
        if not len(history):
            helpers = tuple(range(self.n_workers)) if self.takeover else ()
            return IterationPlan(iteration, shares, everyone, helpers=helpers)
        det = self.detector.assess(history)
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
        return IterationPlan(iteration, shares, everyone, helpers=helpers,
                             stragglers=det.flagged, takeover_after=after, note=note)

    def _speeds(self, history: StepHistory) -> np.ndarray:
        """Samples per second of each worker over the last iterations."""
        times, samples = history.window(self.speed_window)
        return samples.sum(axis=0) / np.maximum(times.sum(axis=0), 1e-9)

    def _per_sample_time(self, history: StepHistory) -> np.ndarray:
        return 1.0 / np.maximum(self._speeds(history), 1e-9)

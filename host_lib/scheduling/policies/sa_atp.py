"""SA-ATP: leading workers lend their spare resources to stragglers, where that pays.

* **Slot takeover** (spare storage): every iteration, the workers not flagged as stragglers are
  the helpers; when a chunk has waited longer than normal jitter explains and only stragglers are
  missing, its helper takes the slot over through the switch, so the leading workers keep
  streaming (host_lib.engine.transport, host_lib.engine.takeover): in the job's own slots where
  the plan leaves a flagged worker late or flags nobody, in slots borrowed from a shared pool
  whenever a chunk is late. The helpers also sum on their hosts the part of each call the
  switch's aggregators cannot keep up with, or, where even that is slower than the hosts' own
  ring allreduce, have the calls go through the ring
  (:mod:`host_lib.scheduling.policies.host_share`).
* **Work stealing** (spare compute, within the iteration): shares are computed in
  micro-batches, and a worker that has finished its own takes micro-batches from the tail of a
  lagging worker's share (host_lib.scheduling.work_stealing), so a worker that slows down is helped
  in the iteration it slows down in, whether or not it has been seen before. Each worker ends with
  a pass through DDP long enough for its backward to hide the gradient's communication.
* **Compute help** (spare compute, across iterations): the global batch is re-split by BOA's
  planner (:mod:`host_lib.scheduling.policies.boa`): a step-time model ``t_i(b) = a_i b + c_i``
  per worker, fitted online by least squares from the samples each worker computed (stolen
  micro-batches included) and its compute time, and the min-max split of the global batch under
  it; or by the same program over the models the cost model measures (``t_i(b) = r_i (b +
  kappa)``: each worker's typical time per effective sample and the fixed cost in samples that
  stealing measures, robust where stealing moves a worker's samples by too little for a least
  squares slope), with shares of 0 allowed, which gives a worker whose fixed cost alone outlasts
  the others' step nothing to compute (it contributes zeros; every sample is still summed once,
  by the others). A worker left without a share is given one again after 4, 8, ... 64
  iterations, to measure whether it recovered. Splitting the *global* batch keeps the gradient
  exactly the sum over the global batch divided by its size.

**Deciding.** Every iteration the cost model (:mod:`host_lib.scheduling.policies.cost_model`)
replays the recent iterations' measured speeds under each split (even, BOA's, the measured
models') with and without stealing and picks the fastest, the simplest on a tie: so SA-ATP is
plain aggregation where no straggler slows it, a re-split where a straggler persists, and
stealing where slowdowns come and go faster than a split can follow. The replays run between
plans (:meth:`SaAtp.prepare`), while the workers compute, so the choice lags an iteration: the
plan of iteration i picks its split and whether to steal from the replays of iterations up to
i - 2, and takes that split's shares from the speeds of i - 1. Replaying in the plan itself, on
the testbed's 2 cores, took 1.1 ms of CPU from the gradient's communication every iteration
(docs/policies.md §8); one iteration more hardly moves a choice that needs several slow ones to
rise above the replays' noise.

The straggler detector drives takeover only: which workers may be called late and who helps.
"""

from __future__ import annotations

import numpy as np

from host_lib.scheduling.policies.base import IterationPlan, Policy, StepHistory, even_shares
from host_lib.scheduling.policies.boa import Boa
from host_lib.scheduling.policies.cost_model import Choice, CostModel
from host_lib.scheduling.policies.detection import Detection, StragglerDetector
from host_lib.scheduling.policies.host_share import HostShare
from host_lib.scheduling.policies.minmax import makespan, min_max_split

SPLITS = ("even", "boa", "measured")  # in order of preference on a tie
FIRST_TRIAL, LAST_TRIAL = 4, 64  # iterations a worker goes without a share before it gets one
GUARD = 1.05  # how much longer than the measured models' split a chosen split may look


class SaAtp(Policy):
    def __init__(self, n_workers: int, global_batch: int, takeover: bool = True,
                 compute_help: bool = True, work_stealing: bool = True,
                 detector: StragglerDetector | None = None, speed_window: int = 3,
                 micro_batches: int = 8):
        super().__init__(n_workers, global_batch)
        self.takeover = takeover
        self.compute_help = compute_help
        self.steals_work = compute_help and work_stealing
        self.detector = detector or StragglerDetector()
        self.speed_window = speed_window
        self.balancer = Boa(n_workers, global_batch) if compute_help else None
        self.model = CostModel(SPLITS, micro_batches) if compute_help else None
        self.hosts = HostShare() if takeover else None  # what the helpers sum on their hosts
        self.planned: list[np.ndarray] = []  # the shares of every iteration planned so far
        self.view = StepHistory(n_workers)  # the history as BOA's planner sees it
        self.unshared = np.full(n_workers, -1)  # iteration since which a worker has no share
        self.trial_after = np.full(n_workers, FIRST_TRIAL)
        # The cost model's choice for the next plan, and the history (iterations, rows of
        # communication) it was prepared on, which must be the one the last plan saw.
        self.choice = Choice(SPLITS[0], False, 0.0, {})
        self.prepared = self.seen = (0, 0)
        self.name = ("sa-atp-takeover" if not compute_help else
                     "sa-atp-resplit" if not self.steals_work else
                     "sa-atp" if takeover else "sa-atp-no-takeover")

    def plan(self, iteration: int, history: StepHistory) -> IterationPlan:
        shares, choice, why = self._compute_help(iteration, history)
        everyone = (1 << self.n_workers) - 1
        stealing = {} if choice is None else {"steal": choice.steal, "keep_s": choice.keep_s,
                                              "per_sample_s": self._typical_speed(),
                                              "kappa": self.model.kappa}
        host_share, ring = self.hosts.plan(iteration, history) if self.hosts else (0.0, False)
        if not len(history):
            helpers = tuple(range(self.n_workers)) if self.takeover else ()
            return IterationPlan(iteration, shares, everyone, helpers=helpers, note=why,
                                 takeover_after=np.inf, host_share=host_share, ring=ring,
                                 **stealing)
        det = self.detector.assess(history)
        helpers = ()
        after = 0.0
        if self.takeover:
            helpers = tuple(w for w in range(self.n_workers) if w not in det.flagged)
            after = self._takeover_after(history, shares, det)
        note = (f"{why}; stragglers {sorted(det.flagged)} (persistent {sorted(det.persistent)}), "
                f"slowness {np.round(det.slowness, 2).tolist()}")
        if ring:
            note += "; the calls go through the hosts' ring"
        elif host_share:
            note += f"; helpers sum {host_share:.0%} of each call on their hosts"
        return IterationPlan(iteration, shares, everyone, helpers=helpers,
                             stragglers=det.flagged, takeover_after=after, note=note,
                             host_share=host_share, ring=ring, **stealing)

    def prepare(self, history: StepHistory) -> None:
        """The cost model's replays and choice for the next plan, on the history the last
        plan saw: the training loop runs this once the iteration's communication is over
        (:meth:`Policy.prepare`); a plan that finds it not done does it first."""
        sizes = (len(history), len(history.comm_s))
        if self.model is not None and sizes != self.prepared:
            self.choice = self.model.choose(history, self.steals_work)
            self.prepared = sizes

    def _takeover_after(self, history: StepHistory, shares: tuple[int, ...],
                        det: Detection) -> float:
        """How long a chunk in the job's own slots waits before its helper takes it over: past
        the lag the plan itself expects, plus normal jitter, where the plan leaves a flagged
        worker late or flags nobody (a worker that slows down now is flagged only from the next
        iteration on); never (inf) where every flagged worker is on time. A taken-over chunk
        still needs the straggler's contribution: what takeover frees is slots, and once the
        split has every flagged worker on time nobody waits for them, while a chunk late by the
        machine's jitter costs the helpers' host path (docs/policies.md §6 and §8: 20-247
        takeovers a run with the straggler on time). Chunks in slots borrowed from a shared
        pool, which other jobs wait for, are taken over whenever they are late
        (host_lib.engine.takeover)."""
        predicted = self._per_sample_time(history) * np.asarray(shares)
        typical = float(np.median(predicted))
        allowance = typical * (np.exp(det.threshold) - 1)
        late = [w for w in det.flagged if predicted[w] > typical + allowance]
        if det.flagged and not late:
            return np.inf
        return float(predicted.max() - predicted.min() + allowance)

    def _compute_help(self, iteration: int, history: StepHistory
                      ) -> tuple[tuple[int, ...], Choice | None, str]:
        """The shares, the cost model's choice (None without compute help), and why."""
        even = even_shares(self.global_batch, self.n_workers)
        if not self.compute_help:
            return even, None, "even shares"
        if self.prepared != self.seen:
            self.prepare(history.upto(*self.seen))
        self.seen = (len(history), len(history.comm_s))
        choice = self.choice
        self.model.measure(history, self._shape())
        boa = self.balancer.plan(iteration, self._planned_view(history)).shares
        proposals = {"even": even, "boa": boa, "measured": self._measured(iteration, boa)}
        self.model.record(proposals, choice.steal)
        split = self._guard(choice.split, proposals)
        shares = proposals[split]
        self.planned.append(np.asarray(shares))
        self._track_unshared(iteration, shares)
        why = (f"{split}{' with stealing' if choice.steal else ''}, keep "
               f"{choice.keep_s * 1e3:.1f} ms")
        return shares, choice, why

    def _guard(self, split: str, proposals: dict[str, tuple[int, ...]]) -> str:
        """The chosen split, unless its shares for this iteration would take GUARD longer than
        the measured models' under the speeds the workers have now: the replay judges how
        each split did, and a split that re-solves on a bad fit can propose much worse shares
        than it ever did before."""
        speed, kappa = self.model.typical_speed(), self.model.kappa
        if speed is None:
            return split
        span = {name: makespan(speed, speed * kappa, shares)
                for name, shares in proposals.items()}
        return split if span[split] <= GUARD * span["measured"] else "measured"

    def _planned_view(self, history: StepHistory) -> StepHistory:
        """The history as BOA's planner sees it: a stealing iteration as if each worker had
        computed its planned share at the speed it measured (``r (b + kappa)``), as a BOA job
        would have; stealing moves a worker's samples by a micro-batch now and then, too little
        for a least-squares slope and just enough to throw it (BOA borrows a pooled shape for
        a worker whose samples never varied)."""
        kappa = self.model.kappa
        while len(self.view) < len(history):
            k = len(self.view)
            times, samples = history.compute_s[k], history.samples[k]
            if self.model.stole[k]:
                planned = self.planned[k]
                with np.errstate(divide="ignore", invalid="ignore"):
                    speed = np.where(samples > 0, times / (samples + kappa), np.nan)
                known = (planned > 0) & np.isfinite(speed)
                times = np.where(known, speed * (planned + kappa), 0.0)
                samples = np.where(known, planned, 0)
            self.view.add(times, samples)
        return self.view

    def _measured(self, iteration: int, boa: tuple[int, ...]) -> tuple[int, ...]:
        """BOA's program over the models the cost model measures, shares of 0 allowed (module
        docstring): per worker ``t(b) = r (b + kappa)``, r its typical time per effective
        sample, kappa the fixed cost in samples; a worker due for a trial keeps at least one
        sample. BOA's own split until the cost model has measured speeds."""
        speed = self.model.typical_speed()
        if speed is None:
            return boa
        trial = (self.unshared >= 0) & (iteration - self.unshared >= self.trial_after)
        return min_max_split(speed, speed * self.model.kappa, self.global_batch,
                             np.where(trial, 1, 0), self.global_batch)

    def _track_unshared(self, iteration: int, shares: tuple[int, ...]) -> None:
        """Trial periods: a worker given a share on trial and left without one again waits
        twice as long for the next (at most LAST_TRIAL); one that keeps its share starts over."""
        shares = np.asarray(shares)
        for w in np.flatnonzero(shares == 0):
            if self.unshared[w] < 0:
                self.unshared[w] = iteration
        back = (self.unshared >= 0) & (shares > 0)
        on_trial = back & (iteration - self.unshared >= self.trial_after)
        self.trial_after[on_trial] = np.minimum(self.trial_after[on_trial] * 2, LAST_TRIAL)
        self.unshared[on_trial] = iteration + 1  # without a share again from the next one
        recovered = back & ~on_trial
        self.unshared[recovered] = -1
        self.trial_after[recovered] = FIRST_TRIAL

    def _typical_speed(self) -> tuple[float, ...] | None:
        speed = self.model.typical_speed()
        return None if speed is None else tuple(speed.tolist())

    def _shape(self) -> float:
        """c / a of the fitted models (median): the fixed cost in samples, as BOA sees it."""
        if self.balancer.models is None:
            return 0.0
        a, c = self.balancer.models
        return float(np.median(c / a))

    def _speeds(self, history: StepHistory) -> np.ndarray:
        """Samples per second of each worker over the last iterations."""
        times, samples = history.window(self.speed_window)
        return samples.sum(axis=0) / np.maximum(times.sum(axis=0), 1e-9)

    def _per_sample_time(self, history: StepHistory) -> np.ndarray:
        return 1.0 / np.maximum(self._speeds(history), 1e-9)

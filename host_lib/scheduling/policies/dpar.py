"""DPAR, Dynamic Partial All-Reduce (Kim et al., ICCE 2023).

**The paper's idea.** Training stays synchronous, but a worker detected as a straggler is
excluded from the global communication: the others reduce among themselves and update without
it, and it rejoins when its speed recovers. Whether to exclude weighs the speed lost to waiting
for the straggler against the compute and data lost by leaving one GPU out.

**Ours.** An excluded worker *sits out*: share 0, so it computes nothing, its transport sends
only probes and receives the others' aggregate (the switch multicasts every result to the whole
job), and it applies the same update, so its model never diverges. The switch's in-band fan-in
shrinks to the contributors, and the aggregate is divided by the contributors' samples. Like
DPAR, the other workers keep their shares, so the global batch shrinks by the excluded share
(re-splitting it over the others would make this a rebalancing policy; that is BOA's and
SA-ATP's compute help).

**Cost model.** With per-iteration compute times t_i at the (even) shares b_i, and C the
communication time of an iteration (measured: the time after the last compute ends), the
training throughput of a set S of contributors is

    R(S) = sum_{i in S} b_i / (max_{i in S} t_i + C)        samples per second.

Excluding worker s saves everyone the wait ``max_S t - max_{S - s} t`` each iteration and loses
its ``b_s`` samples of compute and data; it pays when R(S - s) > (1 + margin) R(S). The
slowest worker goes first, then the next, while it pays and at least ``min_members`` remain.

**Detection and readmission.** A worker is excluded once the straggler detector flags it as
persistent (so a one-off slowdown never is) and the cost model agrees. An excluded worker
computes nothing, so nothing says when it recovers: after ``first_exclusion`` iterations it is
readmitted *on trial* for one iteration, contributing as usual. If its measured time still makes
exclusion pay, it is excluded again for twice as long as before; otherwise it stays, and its next
exclusion starts from the first period again. A persistent straggler thus costs one slow
iteration per doubling period, a recovered worker is back within one period, and nothing flaps:
a readmitted worker has to be flagged as persistent again before it can leave.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from host_lib.scheduling.policies.base import IterationPlan, Policy, StepHistory, even_shares
from host_lib.scheduling.policies.detection import StragglerDetector


@dataclass
class _Exclusion:
    until: int  # first iteration of the next trial
    period: int  # iterations of this exclusion


class Dpar(Policy):
    name = "dpar"

    def __init__(self, n_workers: int, global_batch: int, margin: float = 0.1,
                 first_exclusion: int = 4, max_exclusion: int = 64, window: int = 5,
                 min_members: int | None = None, detector: StragglerDetector | None = None):
        super().__init__(n_workers, global_batch)
        self.margin = margin
        self.first_exclusion = first_exclusion
        self.max_exclusion = max_exclusion
        self.window = window
        self.min_members = min_members or (n_workers + 1) // 2
        self.detector = detector or StragglerDetector()
        self.shares = even_shares(global_batch, n_workers)
        self.excluded: dict[int, _Exclusion] = {}
        self.on_trial: dict[int, int] = {}  # worker -> period of the exclusion it is trying out

    def plan(self, iteration: int, history: StepHistory) -> IterationPlan:
        if len(history):
            self._judge_trials(iteration, history)
            self._exclude(iteration, history)
        for w, ex in list(self.excluded.items()):
            if iteration >= ex.until:
                del self.excluded[w]
                self.on_trial[w] = ex.period
        out = frozenset(self.excluded)
        members = [w for w in range(self.n_workers) if w not in out]
        contributors = sum(1 << w for w in members)
        shares = tuple(0 if w in out else s for w, s in enumerate(self.shares))
        note = (f"excluded {sorted(out)}, on trial {sorted(self.on_trial)}" if out or self.on_trial
                else "")
        return IterationPlan(iteration, shares, contributors,
                             fanin=len(members) if out else 0, stragglers=out, note=note)

    # -- decisions ------------------------------------------------------------------------------

    def _judge_trials(self, iteration: int, history: StepHistory) -> None:
        """A worker back on trial last iteration is excluded again, for twice as long, if its
        measured time still makes exclusion pay; otherwise it stays."""
        times = self._recent_times(history)
        for w, period in list(self.on_trial.items()):
            del self.on_trial[w]
            members = [v for v in range(self.n_workers) if v not in self.excluded]
            if self._exclusion_pays(w, members, times, history):
                longer = min(2 * period, self.max_exclusion)
                self.excluded[w] = _Exclusion(iteration + longer, longer)

    def _exclude(self, iteration: int, history: StepHistory) -> None:
        """Exclude persistent stragglers, slowest first, while the cost model says it pays."""
        det = self.detector.assess(history)
        times = self._recent_times(history)
        members = [w for w in range(self.n_workers) if w not in self.excluded]
        for w in sorted(det.persistent, key=lambda v: -times[v]):
            if w in members and self._exclusion_pays(w, members, times, history):
                members.remove(w)
                self.excluded[w] = _Exclusion(iteration + self.first_exclusion,
                                              self.first_exclusion)

    def _exclusion_pays(self, worker: int, members: list[int], times: np.ndarray,
                        history: StepHistory) -> bool:
        """R(members - worker) > (1 + margin) R(members), the cost model above."""
        rest = [w for w in members if w != worker]
        if len(rest) < self.min_members:
            return False
        overhead = history.comm_overhead()
        return (self._throughput(rest, times, overhead)
                > (1 + self.margin) * self._throughput(members, times, overhead))

    def _throughput(self, members: list[int], times: np.ndarray, overhead: float) -> float:
        return sum(self.shares[w] for w in members) / (max(times[w] for w in members) + overhead)

    def _recent_times(self, history: StepHistory) -> np.ndarray:
        """Per worker, the median compute time over the last iterations it computed in (a
        trial's single iteration, for a worker just back)."""
        times, samples = history.window(self.window)
        out = np.zeros(self.n_workers)
        for w in range(self.n_workers):
            computed = times[samples[:, w] > 0, w]
            if w in self.on_trial and len(computed):
                out[w] = computed[-1]
            elif len(computed):
                out[w] = float(np.median(computed))
        return out

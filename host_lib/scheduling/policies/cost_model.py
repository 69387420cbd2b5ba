"""SA-ATP's cost model: which of its kinds of compute help pays, decided every iteration from
what the workers measured.

SA-ATP holds several ways to split the global batch (even shares as plain aggregation has
them, BOA's min-max split, and that split with workers whose fixed cost alone is longer than
the others' whole step left out) and may have the shares computed with work stealing or as one
step each. Which pays depends on what the stragglers do and on what the communication costs, so
the model *replays* the last iterations: each iteration's measured per-worker speed, applied to
the shares every split proposed for it before it started (their out-of-sample proposals: a split
fitted to an iteration's own noise would look better than it is), with and without stealing
(:mod:`host_lib.scheduling.stealing_model`), plus the communication that each way leaves after
the last compute, as measured in recent iterations of that way. The option with the shortest
mean predicted iteration wins; ties go to the simpler option (even shares over a split, no
stealing over stealing), so without a straggler SA-ATP is plain aggregation.

A worker's speed in an iteration is its compute time per *effective* sample, ``t / (b +
kappa)``, where ``kappa = c / a`` is the step's fixed cost in samples: a worker pays the fixed
cost once per step, whoever's samples it computes. Stealing iterations measure it (the first
micro-batch a worker computes takes the fixed cost beyond its samples: ``fixed_s`` against
the time per sample of the others); before there was one, the split's fitted models' shape
stands in (their c / a: a worker's time against its samples confounds its samples with its
speed when the two change together, as they do under a re-split).

The pass through DDP that stealing ends with (:mod:`host_lib.scheduling.work_stealing`) should
be long enough for its backward to hide the gradient's communication: ``keep_s = G / beta``,
where ``G`` is the gradient's communication time (how long a worker's calls took, ``busy_s``,
at the least: a worker's calls also wait for its peers' contributions, except the one whose
buckets come last) and ``beta`` the share of a pass during which its buckets are on their way
(``lead_s / pass_s``).
Where nothing overlaps (``beta`` under ``MIN_OVERLAP``: the testbed, whose backward runs after
the emulated compute), ``keep_s`` is 0.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from dataclasses import dataclass

import numpy as np

from host_lib.scheduling.policies.base import StepHistory
from host_lib.scheduling.policies.minmax import fluid_makespan
from host_lib.scheduling.stealing_model import schedule

MIN_OVERLAP = 0.1  # a smaller share of a pass overlapping its communication is no overlap


@dataclass(frozen=True)
class Choice:
    split: str  # the name of the split whose current shares to use
    steal: bool
    keep_s: float
    predicted_s: dict[tuple[str, bool], float]  # the mean replayed time of every option


class CostModel:
    """Remembers what each split proposed for each iteration, measures each worker's speed in
    it once its step times are in (:meth:`measure`), replays it (:meth:`choose`) and picks the
    option that would have been fastest over the last ``window`` of them. Measuring is cheap
    and feeds the next plan's shares; the replays are not, and SA-ATP runs them between plans
    (:meth:`~host_lib.scheduling.policies.sa_atp.SaAtp.prepare`).

    ``splits`` names the candidate splits in order of preference (the simplest first);
    ``pieces`` is the stealing's micro-batches per share; ``tolerance`` the relative margin by
    which an option must beat a simpler one. A split must also beat the one before it by more
    than twice the standard error of their replayed differences: a split fitted to jitter wins
    some replays and loses others. The window is long (32 iterations) because slowdowns that
    come and go are rare events that stealing pays for in advance: a short one would turn
    stealing off between two of them."""

    def __init__(self, splits: tuple[str, ...], pieces: int = 8, window: int = 32,
                 tolerance: float = 0.002, recent: int = 8):
        self.splits, self.pieces, self.window = splits, pieces, window
        self.tolerance, self.recent = tolerance, recent
        self.proposed: deque[dict[str, tuple[int, ...]]] = deque()  # not yet measured
        # measured, not yet replayed: the proposals, the speeds, the ones before and kappa
        self.unreplayed: deque[tuple[dict, np.ndarray, np.ndarray | None, float]] = deque()
        self.replayed: deque[dict[tuple[str, bool], float]] = deque(maxlen=window)
        self.stole: list[bool] = []  # per iteration so far, whether it was a stealing one
        self.speed: np.ndarray | None = None  # the latest iteration's speeds
        self.speeds: deque[np.ndarray] = deque(maxlen=3)  # and the ones before
        self._typical: np.ndarray | None = None  # their median, once asked for
        self.kappa = 0.0  # the step's fixed cost in samples, as used last
        self.measured: float | None = None  # and as stealing last measured it

    def record(self, proposals: dict[str, tuple[int, ...]], steal: bool) -> None:
        """What every split proposed for the iteration being planned, and whether it steals."""
        self.proposed.append(proposals)
        self.stole.append(steal)

    def measure(self, history: StepHistory, shape: float = 0.0) -> None:
        """Each worker's speed in every iteration measured since the last call, and the fixed
        cost in samples they are measured against (``shape``, the fitted models' c / a, until
        stealing has measured it): what :meth:`typical_speed` and ``kappa`` give the plan of
        the next iteration. The iterations wait for :meth:`choose` to replay them."""
        kappa = measured_kappa(history, self.recent)
        if kappa is not None:
            self.measured = kappa
        kappa = self.kappa = shape if self.measured is None else self.measured
        first = len(self.stole) - len(self.proposed)  # the iteration proposed[0] was for
        while self.proposed and first < len(history):
            prior = self.speed
            self.speed = _speeds(history.compute_s[first], history.samples[first], kappa,
                                 self.speed)
            self.speeds.append(self.speed)
            self._typical = None
            self.unreplayed.append((self.proposed.popleft(), self.speed, prior, kappa))
            first += 1

    def choose(self, history: StepHistory, steal_allowed: bool = True) -> Choice:
        """The option that would have been fastest over the replayed iterations, once those
        :meth:`measure` has measured since the last call are replayed too."""
        keep_s = self.keep_s(history)
        options = [(s, st) for st in ((False, True) if steal_allowed else (False,))
                   for s in self.splits]
        claim_s = _recent_median(history.series("claim_s", self.recent)) or 0.0
        while self.unreplayed:
            proposals, speed, prior, kappa = self.unreplayed.popleft()
            keys = {(split, steal): (tuple(proposals[split]), steal) for split, steal in options}
            computed = {key: self._compute(np.asarray(key[0]), speed, prior, kappa, key[1],
                                           claim_s, keep_s)
                        for key in set(keys.values())}  # splits often agree
            self.replayed.append({option: computed[key] for option, key in keys.items()})
        if not self.replayed:
            return Choice(self.splits[0], False, keep_s, {})
        tails = self._tails(history)
        replays = {o: np.array([r[o] for r in self.replayed]) for o in options}
        predicted = {}
        for split, steal in options:
            tail = tails[steal] if tails[steal] is not None else tails[not steal] or 0.0
            predicted[(split, steal)] = float(replays[(split, steal)].mean()) + tail
        # Per way of computing, the split: a later one only if it beats the one before it by
        # more than the tolerance and than the replay's noise can explain.
        split = {mode: self.splits[0] for mode in (False, True)}
        for mode in {steal for _, steal in options}:
            for candidate in self.splits[1:]:
                gain = replays[(split[mode], mode)] - replays[(candidate, mode)]
                noise = 2 * gain.std() / np.sqrt(len(gain))
                if gain.mean() > max(noise, self.tolerance * predicted[(split[mode], mode)]):
                    split[mode] = candidate
        steal = (steal_allowed and predicted[(split[True], True)]
                 < predicted[(split[False], False)] * (1 - self.tolerance))
        return Choice(split[steal], steal, keep_s, predicted)

    def typical_speed(self) -> np.ndarray | None:
        """Each worker's time per effective sample, median of the last three iterations (one
        slow step is not a slow worker); None before any."""
        if self._typical is None and self.speeds:
            self._typical = np.median(np.stack(self.speeds), axis=0)
        return self._typical

    def _compute(self, shares, speed, prior, kappa, steal, claim_s, keep_s) -> float:
        """Predicted compute makespan of ``shares`` at per-worker ``speed``."""
        plain = float(np.max(np.where(shares > 0, speed * (shares + kappa), 0.0)))
        if not steal:
            return plain
        if plain <= fluid_makespan(shares.sum(), speed, speed * kappa) * (1 + self.tolerance):
            return plain + (self.pieces + 2) * claim_s  # nothing to take; claims cost
        s = schedule(shares, self.pieces, speed * kappa, speed, np.zeros(len(shares)),
                     claim_s, keep_s, prior, kappa)
        return float(s.ends.max())

    def _tails(self, history: StepHistory) -> dict[bool, float | None]:
        """Per way of computing (stealing or not), the median communication time after the
        last compute of its recent iterations; None if there were none."""
        least = history.least_comm_s[-4 * self.recent:]
        first = len(history.least_comm_s) - len(least)
        tails: dict[bool, list[float]] = {False: [], True: []}
        for i, t in enumerate(least):
            if not math.isnan(t):
                tails[self.stole[first + i]].append(t)
        return {mode: statistics.median(t[-self.recent:]) if t else None
                for mode, t in tails.items()}

    def keep_s(self, history: StepHistory) -> float:
        """How long the pass through DDP should last for its backward to hide the gradient's
        communication (module docstring); 0 where nothing overlaps."""
        m = len(history.comm_s)  # the iterations whose communication is known
        first = max(0, m - self.recent)
        if m == first:
            return 0.0
        busy = history.series("busy_s", m - first)
        lead, passes = (np.stack(history.measured[name][first:m])
                        for name in ("lead_s", "pass_s"))
        with np.errstate(divide="ignore", invalid="ignore"):
            beta = _recent_median(np.where(passes > 0, lead / passes, np.nan))
        if beta is None or beta < MIN_OVERLAP:
            return 0.0
        least = [float(np.nanmin(b)) for b in busy if np.isfinite(b).any()]
        return float(np.median(least)) / beta if least else 0.0


def _speeds(times: np.ndarray, samples: np.ndarray, kappa: float,
            before: np.ndarray | None) -> np.ndarray:
    """Per worker, compute time per effective sample in one iteration; a worker that computed
    nothing keeps its speed ``before`` (or the iteration's median, without one)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        speed = np.where(samples > 0, times / (samples + kappa), np.nan)
    unknown = np.isnan(speed)
    if unknown.any() and before is not None:
        speed[unknown] = before[unknown]
    speed[np.isnan(speed)] = np.nanmedian(speed) if np.isfinite(speed).any() else 1.0
    return speed


def measured_kappa(history: StepHistory, k: int) -> float | None:
    """The fixed cost in samples as the stealing iterations among the last ``k`` measured it:
    per worker, ``fixed_s`` over its time per sample beyond it (median); None without one."""
    fixed = history.series("fixed_s", k)
    times, samples = history.window(len(fixed))
    with np.errstate(divide="ignore", invalid="ignore"):
        per_sample = (times - fixed) / samples
        ratio = np.where((samples > 0) & (per_sample > 0), fixed / per_sample, np.nan)
    return _recent_median(ratio)


def _recent_median(values: np.ndarray) -> float | None:
    finite = values[np.isfinite(values)]
    return float(np.median(finite)) if finite.size else None

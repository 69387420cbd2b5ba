"""Where stragglers come from: how long each worker's step takes in the simulation.

A step of ``work`` seconds (the H100 profile's time for the worker's share) becomes
``work * factor * jitter``, stretched by contention:

* ``schedule`` — experiments.stragglers.SlowdownSchedule, the testbed's own: static factors
  (persistent stragglers; heterogeneous GPU classes) and seeded transient slowdowns that last a
  few iterations, so a replayed testbed scenario slows the same workers in the same iterations;
* ``jitter`` — each step independently times a log-normal factor (GPU step-time noise);
* ``delay_s`` — the mean of a gamma-distributed extra delay at the end of each step (shape
  ``delay_shape``; the testbed's scheduling of four workers on two cores): it delays the
  gradient, but the step time a worker reports, as the testbed's trainer measures it, ends
  before it, so a policy sees it in the communication time;
* ``contention`` — on a shared cluster, co-located jobs come and go: each affected worker
  alternates between free and contended periods of exponentially distributed length (in
  seconds, not iterations), and runs ``factor`` times slower while contended.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

import numpy as np

from experiments.stragglers import SlowdownSchedule, speed_classes


@dataclass
class Contention:
    """Alternating free / contended periods per affected worker (an on/off renewal process)."""

    workers: frozenset[int]
    factor: float = 2.0
    mean_on_s: float = 1.0
    mean_off_s: float = 3.0
    seed: int = 0
    _edges: dict[int, list[float]] = field(default_factory=dict, repr=False)

    def _timeline(self, worker: int, until: float) -> list[float]:
        """Times at which the worker switches state, from free at 0, covering ``until``."""
        edges = self._edges.get(worker)
        if edges is None:
            edges = self._edges[worker] = []
        rng = np.random.default_rng((self.seed, worker, len(edges)))
        while not edges or edges[-1] <= until:
            mean = self.mean_off_s if len(edges) % 2 == 0 else self.mean_on_s
            edges.append((edges[-1] if edges else 0.0) + float(rng.exponential(mean)))
        return edges

    def stretch(self, worker: int, start: float, work: float) -> float:
        """Wall time of ``work`` seconds of uncontended compute started at ``start``."""
        if worker not in self.workers or work <= 0:
            return work
        t, left = start, work
        horizon = start + work * self.factor
        edges = self._timeline(worker, horizon)
        i = bisect.bisect_right(edges, t)
        while True:
            contended = i % 2 == 1
            rate = 1.0 / self.factor if contended else 1.0
            end = edges[i] if i < len(edges) else np.inf
            if (end - t) * rate >= left:
                return t + left / rate - start
            left -= (end - t) * rate
            t, i = end, i + 1
            if i >= len(edges):
                edges = self._timeline(worker, t + left * self.factor)


@dataclass
class Stragglers:
    schedule: SlowdownSchedule = field(default_factory=SlowdownSchedule)
    jitter: float = 0.0  # log-normal sigma of each step
    delay_s: float = 0.0  # mean of a gamma-distributed extra delay per step
    delay_shape: float = 1.0  # its shape: 1 is exponential, larger is narrower
    contention: Contention | None = None
    seed: int = 0

    def __post_init__(self):
        self._rng = np.random.default_rng(self.seed)

    def durations(self, iteration: int, starts: np.ndarray, work: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
        """Per worker, the time a step of ``work`` seconds started at ``starts`` is meant to
        take (slowed, noisy, stretched by contention) and the extra delay before it actually
        ends (no work: no time)."""
        n = len(work)
        factors = np.array([self.schedule.factor(w, iteration) for w in range(n)])
        noise = np.exp(self._rng.normal(0.0, self.jitter, n)) if self.jitter else np.ones(n)
        delay = (self._rng.gamma(self.delay_shape, self.delay_s / self.delay_shape, n)
                 if self.delay_s else np.zeros(n))
        out = np.asarray(work, np.float64) * factors * noise
        if self.contention is not None:
            out = np.array([self.contention.stretch(w, float(s), float(d))
                            for w, (s, d) in enumerate(zip(starts, out, strict=True))])
        busy = np.asarray(work) > 0
        return np.where(busy, out, 0.0), np.where(busy, delay, 0.0)


def static(n_workers: int, factor: float, fraction: float) -> dict[int, float]:
    """``round(fraction * n)`` workers (at least one when fraction > 0), spread evenly over the
    cluster and ending with the last one, run ``factor`` times slower."""
    k = max(1, round(fraction * n_workers)) if fraction > 0 and factor != 1 else 0
    return {round((i + 1) * n_workers / k) - 1: factor for i in range(k)}


def interleaved_classes(factors: list[float], n_workers: int, group: int) -> dict[int, float]:
    """Speed classes spread over every group of ``group`` workers (every rack holds each class
    in the same proportions), as experiments.stragglers.speed_classes splits one group."""
    within = speed_classes(factors, min(group, n_workers))
    return {w: within[w % len(within)] for w in range(n_workers)}

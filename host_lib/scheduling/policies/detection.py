"""Straggler detection from the compute times every worker shares each iteration.

A worker's *slowness* in an iteration is its time per sample over the median worker's. Normal
jitter sets the bar: a worker is flagged when its log-slowness exceeds both a floor (25 %) and
``k`` robust standard deviations of normal jitter. Jitter is how much each worker's
log-slowness moves around its own recent level (median absolute deviation, pooled over the
workers), so neither a straggler nor a cluster of persistently unequal GPUs inflates the bar it
is measured against. A worker
flagged in at least ``persistent_min`` of the last ``window`` iterations is a *persistent*
straggler (it gets work taken off it); one flagged only now is *transient* (its slots can be
taken over, but its batch share is left alone).

The per-chunk evidence of the transport (which workers the switch reports missing while a chunk
waits) acts within a call: a helper takes a chunk over only when the workers it misses are the
flagged ones.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from host_lib.scheduling.policies.base import StepHistory

_MAD_TO_SIGMA = 1.4826


@dataclass(frozen=True)
class Detection:
    slowness: np.ndarray  # latest per-worker time per sample over the median's
    flagged: frozenset[int]  # stragglers in the latest iteration
    persistent: frozenset[int]
    jitter: float  # robust std of log-slowness in normal operation
    threshold: float  # log-slowness above which a worker is flagged

    @property
    def transient(self) -> frozenset[int]:
        return self.flagged - self.persistent


class StragglerDetector:
    def __init__(self, window: int = 8, persistent_min: int = 4, floor: float = 1.25,
                 k: float = 4.0):
        self.window = window
        self.persistent_min = persistent_min
        self.floor = float(np.log(floor))
        self.k = k

    def assess(self, history: StepHistory) -> Detection:
        n = history.n_workers
        times, samples = history.window(self.window)
        if not len(times):
            return Detection(np.ones(n), frozenset(), frozenset(), 0.0, self.floor)
        log_slow = np.log(_per_sample(times, samples))
        log_slow -= _nanmedian(log_slow, axis=1)[:, None]
        jitter = _MAD_TO_SIGMA * float(_nanmedian(np.abs(_around_own_level(log_slow)).ravel()))
        threshold = max(self.floor, self.k * jitter)
        flags = np.nan_to_num(log_slow, nan=0.0) > threshold
        latest = frozenset(int(w) for w in np.nonzero(flags[-1])[0])
        persistent = frozenset(int(w) for w in latest
                               if flags[:, w].sum() >= self.persistent_min)
        return Detection(np.exp(np.nan_to_num(log_slow[-1], nan=0.0)), latest, persistent,
                         jitter, threshold)


def _per_sample(times: np.ndarray, samples: np.ndarray) -> np.ndarray:
    """Time per sample; NaN where a worker computed nothing (it sat the iteration out)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(samples > 0, times / np.maximum(samples, 1), np.nan)


def _around_own_level(log_slow: np.ndarray) -> np.ndarray:
    """Each worker's log-slowness minus its median over the window (NaN stays NaN)."""
    return log_slow - np.nan_to_num(_nanmedian(log_slow, axis=0), nan=0.0)


def _nanmedian(x: np.ndarray, axis: int = 0) -> np.ndarray:
    """The median along ``axis`` of the values that are not NaN (NaN where there are none).
    numpy's nanmedian takes ~0.1 ms on arrays this small, and every worker assesses the
    history at the start of every iteration."""
    s = np.sort(x, axis=axis)  # NaN sorts last
    k = np.isfinite(s).sum(axis=axis, keepdims=True)
    lo = np.take_along_axis(s, np.maximum(k - 1, 0) // 2, axis=axis)
    hi = np.take_along_axis(s, k // 2 - (k == 0), axis=axis)
    return np.squeeze(np.where(k > 0, (lo + hi) / 2, np.nan), axis=axis)

"""k-of-n aggregation, after SAINA (IEEE TSC 2023).

**The paper's idea.** A switch slot completes after the fastest k contributions (SAINA starts
the slot's count at k - 1); later ones are dropped, so stragglers are not waited for, nor helped.
k adapts: it starts at 1 and grows towards the number of workers while the gradient's *sign
flips* between rounds (the popcount of the XOR of the aggregate's sign bits, computed in the
switch) stay above a threshold for 5 rounds, that is, while the aggregate is too noisy to trust
a few workers with it.

**Ours.** Every worker computes an even share and contributes; the in-band fan-in is k, so each
chunk completes with whichever k contributions reach the switch first, and each block of the
aggregate is divided by the samples of the workers its result bitmap names (the communicator does
that with the plan's weights), so the update is the mean over the samples actually summed. A
worker whose contribution arrives later gets a copy of the result and applies the same update.
The sign flips are counted on the hosts, over the aggregated gradient, which every worker holds
bit for bit, so every worker raises k in the same iteration. k starts at ``ceil(n / 2)``
rather than 1 (one contribution per chunk would be a quarter of the batch with four workers),
and grows by one after ``patience`` consecutive rounds with more than ``flip_threshold`` of the
coordinates flipping sign; like SAINA's, it never shrinks.

A worker that falls behind does not slow anyone down (the plans need no step times), and when
it finds that k faster workers have already computed the iteration, it skips its compute
rather than send a gradient the switch can no longer use (``abandons_late_work``), so it
catches up at once instead of trailing forever.
"""

from __future__ import annotations

import math

import numpy as np

from host_lib.scheduling.policies.base import IterationPlan, Policy, StepHistory, even_shares


def sign_flips(previous: np.ndarray, current: np.ndarray) -> float:
    """Fraction of the coordinates, non-zero in both, whose sign differs."""
    both = (previous != 0) & (current != 0)
    if not both.any():
        return 0.0
    return float(np.mean(np.signbit(previous[both]) != np.signbit(current[both])))


class KOfN(Policy):
    name = "k-of-n"
    uses_history = False
    abandons_late_work = True

    def __init__(self, n_workers: int, global_batch: int, k: int | None = None,
                 flip_threshold: float = 0.4, patience: int = 5):
        super().__init__(n_workers, global_batch)
        self.k = k or math.ceil(n_workers / 2)
        if not 1 <= self.k <= n_workers:
            raise ValueError(f"k must be in 1..{n_workers}, got {self.k}")
        self.flip_threshold = flip_threshold
        self.patience = patience
        self.noisy_rounds = 0
        self._previous: np.ndarray | None = None

    def plan(self, iteration: int, history: StepHistory) -> IterationPlan:
        return IterationPlan(iteration, even_shares(self.global_batch, self.n_workers),
                             (1 << self.n_workers) - 1, fanin=self.k, note=f"k={self.k}")

    def observe(self, iteration: int, update: np.ndarray) -> None:
        update = np.asarray(update)
        if self._previous is not None and self.k < self.n_workers:
            noisy = sign_flips(self._previous, update) > self.flip_threshold
            self.noisy_rounds = self.noisy_rounds + 1 if noisy else 0
            if self.noisy_rounds >= self.patience:
                self.k += 1
                self.noisy_rounds = 0
        self._previous = update.copy()

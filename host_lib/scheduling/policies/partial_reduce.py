"""Partial-Reduce (Miao et al., SIGMOD'21: "Heterogeneity-Aware Distributed Machine Learning
Training via Partial Reduce").

**The paper's idea.** The all-reduce is decomposed into partial reduces among *groups of ready
workers*: a worker that finishes its gradient tells a controller, which groups ready workers and
lets each group reduce on its own, asynchronously to the others, so a slow worker never blocks
the fast ones. A group closes when it reaches its size bound or when a deadline, started by its
first member, expires. Members average their models with *staleness-aware* weights (a model
that has seen fewer updates counts less), and the group generation avoids *update isolation*
(the same fast workers always meeting among themselves while a slow one's updates never reach
them).

**Ours, and where it departs.** The switch walks one chunk-id stream per job, so every worker
takes part in every aggregation call, in the same order; the asynchrony therefore becomes a
sequence of iterations, each the partial reduce of one group:

* Each worker computes one gradient at a time over its own (even) share and is *busy* until its
  compute ends; its gradient may span several iterations (a worker three times slower than the
  others delivers one gradient every third iteration). Non-members of an iteration's group sit
  it out (probes only) and keep computing.
* The groups are formed from the shared history, identically on every worker: a virtual clock
  advances by each iteration's predicted length (its slowest member's remaining compute plus the
  measured communication time), each busy worker's remaining time is its measured compute time
  minus what has elapsed since it started, and a group takes the workers whose compute ends
  within ``deadline`` (a fraction of the median compute time) after the first one's; a group
  closes at ``max_group`` members, and, so that it never shrinks to one worker, not before
  ``min_group`` have joined. The switch's in-band fan-in is the group's size, and the group's
  bitmap is the one in the results.
* We reduce *gradients*, not models. The switch multicasts every group's aggregate to the whole
  job, so every worker applies every group's update and all models stay equal: no model can be
  isolated. A gradient that was started ``tau`` iterations before it is delivered was computed on
  a model ``tau`` updates old; it is scaled by ``1 / (1 + tau)`` and so are its samples in the
  normaliser (the staleness-aware average of contributions from different model versions).
* Isolation of *updates* is prevented by construction: ready workers go first (ordered by how
  long they have waited), so a group bound can never keep out a worker that is ready, and a
  worker whose gradient has been under way for ``max_staleness`` iterations is taken into the
  next group whatever the prediction says (the group then waits for it), so staleness, and the
  time between two contributions of any worker, is bounded.
"""

from __future__ import annotations

import math

import numpy as np

from host_lib.scheduling.policies.base import IterationPlan, Policy, StepHistory, even_shares


class PartialReduce(Policy):
    name = "partial-reduce"
    delays_gradients = True

    def __init__(self, n_workers: int, global_batch: int, deadline: float = 0.5,
                 min_group: int | None = None, max_group: int | None = None,
                 max_staleness: int = 4):
        super().__init__(n_workers, global_batch)
        self.deadline = deadline
        self.min_group = min_group or math.ceil(n_workers / 2)
        self.max_group = max_group or n_workers
        if not 1 <= self.min_group <= self.max_group <= n_workers:
            raise ValueError(f"need 1 <= min_group <= max_group <= {n_workers}")
        self.max_staleness = max_staleness
        self.local_batch = even_shares(global_batch, n_workers)
        self.clock = 0.0  # virtual start time of the iteration being planned
        self.started: list[int | None] = [None] * n_workers  # iteration of the gradient under way
        self.started_at = np.zeros(n_workers)  # its virtual start time
        self.duration = np.zeros(n_workers)  # its predicted compute time
        self.measured: list[float | None] = [None] * n_workers  # latest measured compute time
        self._last: tuple[int, float] | None = None  # (group bitmap, length) of the last plan

    def plan(self, iteration: int, history: StepHistory) -> IterationPlan:
        if self._last is not None:
            self._delivered(history)
        starting = [w for w in range(self.n_workers) if self.started[w] is None]
        for w in starting:
            self.started[w] = iteration
            self.started_at[w] = self.clock
            self.duration[w] = self._estimate(w)
        remaining = np.maximum(0.0, self.started_at + self.duration - self.clock)
        group = self._group(iteration, remaining)
        bitmap = sum(1 << w for w in group)
        length = max(remaining[w] for w in group) + history.comm_overhead()
        self._last = (bitmap, length)
        staleness = [iteration - s for s in self.started]
        shares = tuple(self.local_batch[w] if w in starting else 0 for w in range(self.n_workers))
        return IterationPlan(
            iteration, shares, bitmap, fanin=len(group) if len(group) < self.n_workers else 0,
            delivered=tuple(self.local_batch),
            discounts=tuple(1.0 / (1 + s) for s in staleness),
            note=f"group {sorted(group)}, staleness {[staleness[w] for w in sorted(group)]}")

    def _group(self, iteration: int, remaining: np.ndarray) -> list[int]:
        """Overdue workers, then the earliest (the longest-waiting first among equals) until the
        group closes: at max_group, or at the deadline after the first once min_group joined."""
        order = sorted(range(self.n_workers),
                       key=lambda w: (remaining[w], self.started[w], w))
        overdue = [w for w in order if iteration - self.started[w] >= self.max_staleness]
        known = [d for d in self.duration if d > 0]
        closes = max(remaining[order[0]] + self.deadline * float(np.median(known or [0.0])),
                     remaining[order[self.min_group - 1]])
        group = list(overdue)
        for w in order:
            if len(group) >= max(self.max_group, len(overdue)) or remaining[w] > closes:
                break
            if w not in group:
                group.append(w)
        return group

    def _delivered(self, history: StepHistory) -> None:
        """The last group delivered: record its members' compute times, free them, and move
        the clock on by the iteration's predicted length."""
        bitmap, length = self._last
        times, samples = history.compute_s[-1], history.samples[-1]
        for w in range(self.n_workers):
            if bitmap >> w & 1:
                if samples[w] > 0:
                    self.measured[w] = float(times[w])
                self.started[w] = None
        self.clock += length

    def _estimate(self, worker: int) -> float:
        """Predicted compute time of a new gradient: the worker's latest, else the median of
        the others' (0 before anyone was measured: everyone is expected at once)."""
        if self.measured[worker] is not None:
            return self.measured[worker]
        known = [m for m in self.measured if m is not None]
        return float(np.median(known)) if known else 0.0

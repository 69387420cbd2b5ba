"""The interface every straggler policy implements, and the plan it produces.

Each iteration every worker asks its policy for the :class:`IterationPlan` of that iteration, from
the same :class:`StepHistory` (every worker's compute time and sample count of every earlier
iteration, shared through the torch.distributed store by
:mod:`host_lib.scheduling.policies.exchange`). Policies are deterministic functions of that history,
so every worker computes the same plan without any further coordination.

A plan says, per worker, how many samples of the global batch it computes (``shares``), whether
its gradient is summed (``contributors``), what the switch waits for (in-band ``fanin``), and
whether leading workers may take stragglers' slots over (``helpers``). Gradients are always
*sums* of per-sample gradients, divided after aggregation by the number of samples actually
summed in each block, so any split of the batch, any exclusion and any k-of-n completion yields
the mean over the samples that entered the update.

Policies may keep state between iterations (exclusion periods, fitted models): every worker
calls ``plan`` once per iteration, in order, with the same history, and ``observe`` with the same
aggregate, so their states stay identical.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import numpy as np

from host_lib.engine.rounds import RoundPlan


@dataclass(frozen=True)
class IterationPlan:
    iteration: int
    shares: tuple[int, ...]  # samples of the global batch per worker (consecutive slices)
    contributors: int  # bitmap of the workers whose gradients are summed
    fanin: int = 0  # contributions the switch waits for (0: the job's fan-in)
    helpers: tuple[int, ...] = ()  # leading workers that may take slots over, in duty order
    stragglers: frozenset[int] = frozenset()
    takeover_after: float = 0.0  # seconds a chunk waits before its helper takes it over
    note: str = ""  # why, for logs
    # Policies whose gradients may be delivered iterations after they were started
    # (Policy.delays_gradients): the samples each contributor's delivered gradient sums (None:
    # its share), and the factor each contributor scales its gradient by (None: 1).
    delivered: tuple[int, ...] | None = None
    discounts: tuple[float, ...] | None = None

    @property
    def n_workers(self) -> int:
        return len(self.shares)

    def contributes(self, worker: int) -> bool:
        return bool(self.contributors >> worker & 1)

    def discount(self, worker: int) -> float:
        return 1.0 if self.discounts is None else self.discounts[worker]

    def weights(self) -> list[float]:
        """Per worker, the (discounted) samples its contribution sums: the normaliser of the
        aggregate."""
        samples = self.shares if self.delivered is None else self.delivered
        return [self.discount(w) * s if self.contributes(w) else 0.0
                for w, s in enumerate(samples)]

    def round_plan(self, worker: int) -> RoundPlan:
        """How ``worker``'s transport takes part in this iteration's allreduce calls."""
        return RoundPlan(contribute=self.contributes(worker), fanin=self.fanin,
                         helpers=self.helpers, stragglers=self.stragglers,
                         expected=self.contributors, takeover_after=self.takeover_after)


def even_shares(total: int, workers: int) -> tuple[int, ...]:
    base, extra = divmod(total, workers)
    return tuple(base + (1 if i < extra else 0) for i in range(workers))


@dataclass
class StepHistory:
    """Every worker's compute time (s) and samples, per iteration so far, and, one iteration
    behind, the time from the end of each worker's compute to the end of the iteration
    (communication, and waiting for others)."""

    n_workers: int
    compute_s: list[np.ndarray] = field(default_factory=list)
    samples: list[np.ndarray] = field(default_factory=list)
    comm_s: list[np.ndarray] = field(default_factory=list)

    def add(self, compute_s, samples) -> None:
        self.compute_s.append(np.asarray(compute_s, np.float64))
        self.samples.append(np.asarray(samples, np.int64))

    def add_comm(self, comm_s) -> None:
        """The communication times of the oldest iteration that has none yet."""
        self.comm_s.append(np.asarray(comm_s, np.float64))

    def comm_overhead(self, k: int = 5) -> float:
        """Recent time an iteration spends after the last compute ends: per iteration, the
        shortest time any worker spent after its compute (the last one to finish waits for
        nobody), median over the last k iterations; 0 while unknown."""
        recent = [c for c in self.comm_s[-k:] if np.isfinite(c).any()]
        return float(np.median([np.nanmin(c) for c in recent])) if recent else 0.0

    def __len__(self) -> int:
        return len(self.compute_s)

    def window(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The last k iterations: (compute_s, samples), each (k', n_workers)."""
        k = min(k, len(self))
        if not k:
            empty = np.zeros((0, self.n_workers))
            return empty, empty
        return np.stack(self.compute_s[-k:]), np.stack(self.samples[-k:])


class Policy(ABC):
    """A straggler policy: from the shared history, the plan of the next iteration.

    Four attributes tell the training loop how to run the plans: ``uses_history`` (False: plans need
    no step times, so no worker waits for the others' times of the previous iteration before
    starting the next); ``abandons_late_work`` (a worker that finds that ``fanin`` faster workers
    have already computed the iteration skips its own compute: its contribution would arrive after
    the switch completed every chunk); ``delays_gradients`` (a worker starts a gradient when its
    share is non-zero and delivers it when it contributes, possibly iterations later, scaled by
    ``IterationPlan.discount``); ``steals_work`` (shares are computed in micro-batches, and a worker
    that has finished its own takes micro-batches from the tail of a lagging worker's,
    :mod:`host_lib.scheduling.work_stealing`).
    """

    name: str = "policy"
    uses_history: bool = True
    abandons_late_work: bool = False
    delays_gradients: bool = False
    steals_work: bool = False

    def __init__(self, n_workers: int, global_batch: int):
        self.n_workers = n_workers
        self.global_batch = global_batch

    @abstractmethod
    def plan(self, iteration: int, history: StepHistory) -> IterationPlan:
        """The plan of ``iteration``; ``history`` holds iterations 0 .. iteration - 1."""

    def observe(self, iteration: int, update: np.ndarray) -> None:
        """The aggregated gradient of ``iteration`` (the same on every worker), before the
        next plan. Most policies ignore it."""
        return None

    def everyone(self, iteration: int, note: str = "") -> IterationPlan:
        """Every worker computes an even share and contributes (plain synchronous SGD)."""
        return IterationPlan(iteration, even_shares(self.global_batch, self.n_workers),
                             (1 << self.n_workers) - 1, note=note)


class Synchronous(Policy):
    """No straggler handling: even shares, every worker contributes, the switch waits for all
    (plain in-network aggregation, and the gloo baseline)."""

    name = "synchronous"

    def plan(self, iteration: int, history: StepHistory) -> IterationPlan:
        return self.everyone(iteration)

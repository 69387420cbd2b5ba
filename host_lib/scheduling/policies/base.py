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

import math
import statistics
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
    # Work-stealing policies (Policy.steals_work): whether this iteration's shares are computed
    # in micro-batches that finished workers may take over, how long the compute pass through
    # DDP that ends each worker's step should last at least so that its backward hides the
    # gradient's communication, each worker's compute time per sample as last measured (what a
    # straggler goes by until it has measured its own in this iteration, and what thieves
    # expect of the owners they might take from), and the step's fixed cost in samples
    # (host_lib.scheduling.work_stealing).
    steal: bool = False
    keep_s: float = 0.0
    per_sample_s: tuple[float, ...] | None = None
    kappa: float = 0.0
    # The share of each call's chunks the helpers sum on their hosts (RoundPlan.host_share),
    # and whether the calls go through the hosts' ring instead of the switch (RoundPlan.ring)
    host_share: float = 0.0
    ring: bool = False

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
                         expected=self.contributors, takeover_after=self.takeover_after,
                         host_share=self.host_share, ring=self.ring)


def even_shares(total: int, workers: int) -> tuple[int, ...]:
    base, extra = divmod(total, workers)
    return tuple(base + (1 if i < extra else 0) for i in range(workers))


# Measured with each iteration's compute, beside its time and samples (the cost models of
# :mod:`host_lib.scheduling.policies.cost_model` read them): how long the worker's last compute
# pass through DDP took (the pass whose backward hands DDP's buckets to the communication), for
# how long of that pass its first bucket was already on its way (what communication overlapped),
# the mean round trip of its work-stealing claims, and the step's fixed cost (what its first
# micro-batch took beyond its samples' share; both NaN where it computed no micro-batches).
STEP_FIELDS = ("pass_s", "lead_s", "claim_s", "fixed_s")
# Measured one iteration later, with the communication time: per worker, how long its
# allreduce calls took together (a call waits for the peers' contributions too, except the
# one of the worker whose buckets come last: its calls take what the gradient's communication
# does), and how long of that until the last result of a chunk the switch summed and of one
# the helpers summed on their hosts (CallStats.switch_s, host_s).
COMM_FIELDS = ("busy_s", "switch_s", "host_s")


@dataclass
class StepHistory:
    """Every worker's compute time (s) and samples, per iteration so far, and, one iteration
    behind, the time from the end of each worker's compute to the end of the iteration
    (communication, and waiting for others). ``measured`` holds the other series of
    STEP_FIELDS and COMM_FIELDS (NaN where a worker did not report one). ``least_comm_s`` holds,
    per iteration whose communication is known, the shortest of its workers' (the last worker
    to finish computing waits for nobody; NaN if none reported one)."""

    n_workers: int
    compute_s: list[np.ndarray] = field(default_factory=list)
    samples: list[np.ndarray] = field(default_factory=list)
    comm_s: list[np.ndarray] = field(default_factory=list)
    measured: dict[str, list[np.ndarray]] = field(default_factory=dict)
    least_comm_s: list[float] = field(default_factory=list)

    def add(self, compute_s, samples, **measured) -> None:
        self.compute_s.append(np.asarray(compute_s, np.float64))
        self.samples.append(np.asarray(samples, np.int64))
        self._add(STEP_FIELDS, measured)

    def add_comm(self, comm_s, **measured) -> None:
        """The communication times of the oldest iteration that has none yet."""
        comm_s = np.asarray(comm_s, np.float64)
        finite = comm_s[np.isfinite(comm_s)]
        self.comm_s.append(comm_s)
        self.least_comm_s.append(float(finite.min()) if finite.size else math.nan)
        self._add(COMM_FIELDS, measured)

    def _add(self, names: tuple[str, ...], measured: dict) -> None:
        unknown = set(measured) - set(names)
        if unknown:
            raise ValueError(f"unknown measurements {sorted(unknown)}")
        for name in names:
            value = measured.get(name)
            self.measured.setdefault(name, []).append(
                np.full(self.n_workers, np.nan) if value is None
                else np.asarray(value, np.float64))

    def series(self, name: str, k: int) -> np.ndarray:
        """The last k iterations of a measured series (STEP_FIELDS, COMM_FIELDS or comm_s),
        shape (k', n_workers)."""
        values = self.comm_s if name == "comm_s" else self.measured.get(name, [])
        return (np.stack(values[-k:]) if values and k > 0
                else np.zeros((0, self.n_workers)))

    def comm_overhead(self, k: int = 5) -> float:
        """Recent time an iteration spends after the last compute ends: per iteration, the
        shortest time any worker spent after its compute (the last one to finish waits for
        nobody), median over the last k iterations; 0 while unknown."""
        recent = [t for t in self.least_comm_s[-k:] if not math.isnan(t)]
        return statistics.median(recent) if recent else 0.0

    def steps_since(self, k: int) -> list[tuple[np.ndarray, np.ndarray, dict]]:
        """The iterations from ``k`` on as :meth:`add` takes them."""
        return [(self.compute_s[i], self.samples[i],
                 {name: self.measured[name][i] for name in STEP_FIELDS})
                for i in range(k, len(self))]

    def comms_since(self, k: int) -> list[tuple[np.ndarray, dict]]:
        """The communication times from iteration ``k`` on as :meth:`add_comm` takes them."""
        return [(self.comm_s[i], {name: self.measured[name][i] for name in COMM_FIELDS})
                for i in range(k, len(self.comm_s))]

    def upto(self, steps: int, comms: int) -> StepHistory:
        """The history as it was when it held ``steps`` iterations and ``comms`` rows of
        communication."""
        view = StepHistory(self.n_workers, self.compute_s[:steps], self.samples[:steps],
                           self.comm_s[:comms], least_comm_s=self.least_comm_s[:comms])
        for name, values in self.measured.items():
            view.measured[name] = values[:steps if name in STEP_FIELDS else comms]
        return view

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
    :mod:`host_lib.scheduling.work_stealing`, in the iterations whose plan says ``steal``).
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
        """The plan of ``iteration``; ``history`` holds iterations 0 .. iteration - 1. A
        policy that ``uses_history`` must read nothing else: the driver plans it while the
        gradient of ``iteration - 1`` is still being aggregated, before :meth:`observe`."""

    def prepare(self, history: StepHistory) -> None:
        """Work for the next plan that may lag an iteration, on the history the last plan saw
        (SA-ATP's cost model replays): the training loop calls it once the iteration's
        communication is over and the next plan is in, so that it runs while the workers
        compute, not while their gradient is communicated. Most policies have none."""
        return None

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

"""Sharing per-iteration compute times, and the plans made from them, through the
torch.distributed store.

Each worker publishes its compute time and sample count for an iteration as soon as its compute
ends (before its gradients are communicated). The planner (rank ``PLANNER``), before planning
iteration i, collects every worker's record of iteration i - 1, and publishes the plan, which
the other workers fetch: one rank reads the N records of an iteration and plans once, where
every rank reading them all would cost the store N^2 reads and the job N plans per iteration.
A worker that contributed to i - 1 necessarily published before the aggregation of i - 1 could
complete, and a worker that sat i - 1 out publishes at its start, so collecting almost never
waits. A record also carries the worker's communication time of the iteration before it (known
only once that iteration ended), and the other measurements the cost models read
(``STEP_FIELDS`` of the iteration, ``COMM_FIELDS`` of the one before). Old keys are deleted as
they go out of use.

A counter per iteration says how many workers have finished computing it, so that a worker that
is late can tell whether the switch will still want its contribution (k-of-n).
"""

from __future__ import annotations

import math
import pickle

from host_lib.scheduling.policies.base import COMM_FIELDS, STEP_FIELDS, IterationPlan, StepHistory

_PREFIX = "sa-atp/steps"
_KEEP = 8  # iterations a record stays in the store (every worker has long collected it)
PLANNER = 0  # the rank that plans


class StepTimeExchange:
    def __init__(self, store, rank: int, world: int, job: int = 0):
        self.store = store
        # Plans and records are waited for on a connection of their own: that runs on the
        # planning thread (host_lib.scheduling.policies.driver), and a store client runs one
        # request at a time.
        self.planning = store.clone()
        self.rank = rank
        self.world = world
        self.prefix = f"{_PREFIX}/{job}"
        self.history = StepHistory(world)

    def _key(self, iteration: int, rank: int) -> str:
        return f"{self.prefix}/{iteration}/{rank}"

    def _finished_key(self, iteration: int) -> str:
        return f"{self.prefix}/{iteration}/finished"

    def publish(self, iteration: int, compute_s: float, samples: int,
                previous_comm_s: float = math.nan, measured: dict[str, float] | None = None,
                previous: dict[str, float] | None = None) -> None:
        """This worker's record of ``iteration``, with its communication time of the previous
        iteration; ``measured`` has its STEP_FIELDS of this iteration, ``previous`` its
        COMM_FIELDS of the previous one (missing ones are NaN)."""
        measured, previous = measured or {}, previous or {}
        fields = ([measured.get(name, math.nan) for name in STEP_FIELDS]
                  + [previous.get(name, math.nan) for name in COMM_FIELDS])
        self.store.set(self._key(iteration, self.rank),
                       " ".join([repr(float(compute_s)), str(samples), repr(float(previous_comm_s)),
                                 *(repr(float(v)) for v in fields)]))
        self.store.add(self._finished_key(iteration), 1)
        if iteration >= _KEEP:
            self.store.delete_key(self._key(iteration - _KEEP, self.rank))
            if self.rank == 0:
                self.store.delete_key(self._finished_key(iteration - _KEEP))

    def _plan_key(self, iteration: int) -> str:
        return f"{self.prefix}/{iteration}/plan"

    def share_plan(self, plan: IterationPlan) -> None:
        """The planner's plan, for the other workers (:meth:`shared_plan`)."""
        self.planning.set(self._plan_key(plan.iteration), pickle.dumps(plan))
        if plan.iteration >= _KEEP:
            self.planning.delete_key(self._plan_key(plan.iteration - _KEEP))

    def shared_plan(self, iteration: int) -> IterationPlan:
        """The planner's plan of ``iteration``, once it is published."""
        return pickle.loads(self.planning.get(self._plan_key(iteration)))

    def finished(self, iteration: int) -> int:
        """How many workers have published their record of ``iteration`` so far."""
        return int(self.store.add(self._finished_key(iteration), 0))

    def collect(self, iteration: int) -> StepHistory:
        """The history through ``iteration``, fetching every record not yet known (one round
        trip to the store per iteration, waiting for records not yet published)."""
        while len(self.history) <= iteration:
            it = len(self.history)
            keys = [self._key(it, r) for r in range(self.world)]
            values = [v.decode().split() for v in self.planning.multi_get(keys)]
            column = [[float(x) for x in v[3:]] for v in values]
            steps = {name: [c[i] for c in column] for i, name in enumerate(STEP_FIELDS)}
            comms = {name: [c[len(STEP_FIELDS) + i] for c in column]
                     for i, name in enumerate(COMM_FIELDS)}
            self.history.add([float(v[0]) for v in values], [int(v[1]) for v in values],
                             **steps)
            if it:
                self.history.add_comm([float(v[2]) for v in values], **comms)
        return self.history

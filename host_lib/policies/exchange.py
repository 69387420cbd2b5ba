"""Sharing per-iteration compute times through the torch.distributed store.

Each worker publishes its compute time and sample count for an iteration as soon as its compute
ends (before its gradients are communicated), and, before planning iteration i, collects every
worker's record of iteration i - 1. A worker that contributed to i - 1 necessarily published
before the aggregation of i - 1 could complete, and a worker that sat i - 1 out publishes at its
start, so collecting almost never waits. Old keys are deleted as they go out of use.
"""

from __future__ import annotations

from host_lib.policies.base import StepHistory

_PREFIX = "sa-atp/steps"
_KEEP = 8  # iterations a record stays in the store (every worker has long collected it)


class StepTimeExchange:
    def __init__(self, store, rank: int, world: int, job: int = 0):
        self.store = store
        self.rank = rank
        self.world = world
        self.prefix = f"{_PREFIX}/{job}"
        self.history = StepHistory(world)

    def _key(self, iteration: int, rank: int) -> str:
        return f"{self.prefix}/{iteration}/{rank}"

    def publish(self, iteration: int, compute_s: float, samples: int) -> None:
        self.store.set(self._key(iteration, self.rank), f"{compute_s!r} {samples}")
        if iteration >= _KEEP:
            self.store.delete_key(self._key(iteration - _KEEP, self.rank))

    def collect(self, iteration: int) -> StepHistory:
        """The history through ``iteration``, fetching every record not yet known."""
        while len(self.history) <= iteration:
            it = len(self.history)
            values = [self.store.get(self._key(it, r)).decode().split() for r in range(self.world)]
            self.history.add([float(v[0]) for v in values], [int(v[1]) for v in values])
        return self.history

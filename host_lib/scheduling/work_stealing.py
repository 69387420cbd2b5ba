"""Work stealing within an iteration: SA-ATP's compute help for a worker that is slow *now*.

Each worker's share of the global batch is cut into the same number of micro-batches, so that a
micro-batch takes about the same time whoever owns it once the shares are balanced (a slow worker's
share is small, and so are its micro-batches). The owner computes its own from the head; a worker
that has finished its share takes micro-batches from the tail of the share that has the most left,
until every share is nearly done (one micro-batch left). A worker slowed down in this very iteration
is thus helped before the iteration ends, which the history-based re-split
(:mod:`host_lib.scheduling.policies.sa_atp`) cannot do: it only learns from iterations that are
over.

Claims go through one counter per share in the torch.distributed store. The owner adds 1 (a
claim from the head), a thief adds ``_TAIL`` (a claim from the tail); a claim holds when, after
its add, head and tail claims together are at most the share's micro-batch count. The store
applies the adds one at a time, so every micro-batch is claimed exactly once, a thief's claim
that fails leaves nothing to claim, and the owner stops at the first micro-batch already taken.
Every worker still contributes to the allreduce (a worker whose whole share was taken sends
zeros), so the aggregate is divided by the global batch as before.

Cost when nobody is slow: one store round trip per micro-batch for the owner, and one look at
the other shares (two round trips) once its share is done.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from host_lib.scheduling.sampling import split

_PREFIX = "sa-atp/steal"
_TAIL = 1 << 20  # tail claims count in the counter's high bits; a share has fewer micro-batches
_KEEP = 8  # iterations a counter stays in the store (every worker has long finished with it)
# A share with a single micro-batch left is nearly done: its owner is computing the one before
# and would start that one about when a thief could. Taking it only moves the end of the
# iteration from one worker to another, at the cost of claims, so thieves leave it.
WORTH_STEALING = 2


@dataclass(frozen=True)
class MicroBatch:
    owner: int  # whose share it belongs to
    index: int  # its position in the owner's share
    samples: np.ndarray  # indices into the dataset


def micro_batches(share: np.ndarray, pieces: int) -> list[np.ndarray]:
    """A share cut into ``pieces`` consecutive micro-batches as equal as can be (fewer when the
    share has fewer samples; none when it is empty)."""
    n = min(pieces, len(share))
    base, extra = divmod(len(share), max(n, 1))
    return split(share, [base + (i < extra) for i in range(n)])


class WorkStealing:
    """One rank's side of an iteration's micro-batch claims. ``pieces`` is the number of
    micro-batches per share, the same on every rank; ``store`` the torch.distributed store."""

    def __init__(self, store, rank: int, world: int, pieces: int, job: int = 0):
        if not 1 <= pieces < _TAIL:
            raise ValueError(f"micro-batches per share must be in 1..{_TAIL - 1}, got {pieces}")
        self.store, self.rank, self.world, self.pieces = store, rank, world, pieces
        self.prefix = f"{_PREFIX}/{job}"

    def _key(self, iteration: int, owner: int) -> str:
        return f"{self.prefix}/{iteration}/{owner}"

    def iteration(self, iteration: int, shares: list[np.ndarray]) -> Iterator[MicroBatch]:
        """The micro-batches this rank computes in ``iteration`` (``shares``: every rank's
        samples, the same on every rank): its own from the head, then stolen ones. A claim is
        made when the next micro-batch is asked for, so compute each before asking again."""
        cut = [micro_batches(share, self.pieces) for share in shares]
        if iteration >= _KEEP:
            self.store.delete_key(self._key(iteration - _KEEP, self.rank))
        own = cut[self.rank]
        key = self._key(iteration, self.rank)
        for _ in own:
            tail, head = divmod(self.store.add(key, 1), _TAIL)
            if head + tail > len(own):
                break
            yield MicroBatch(self.rank, head - 1, own[head - 1])
        yield from self._steal(iteration, cut)

    def _steal(self, iteration: int, cut: list[list[np.ndarray]]) -> Iterator[MicroBatch]:
        others = [w for w in range(self.world) if w != self.rank and cut[w]]
        keys = [self._key(iteration, w) for w in others]
        # A multi_get waits for keys that do not exist yet: an owner that has not made its
        # first claim has none, so the first look creates the missing ones (rarely needed).
        counters = ([int(v) for v in self.store.multi_get(keys)] if self.store.check(keys)
                    else [self.store.add(k, 0) for k in keys])
        while True:
            left = [len(cut[w]) - sum(divmod(c, _TAIL)) for w, c in zip(others, counters,
                                                                       strict=True)]
            if not others or max(left) < WORTH_STEALING:
                return
            pick = int(np.argmax(left))
            victim, n = others[pick], len(cut[others[pick]])
            tail, head = divmod(self.store.add(keys[pick], _TAIL), _TAIL)
            if head + tail <= n:
                yield MicroBatch(victim, n - tail, cut[victim][n - tail])
            counters = [int(v) for v in self.store.multi_get(keys)]

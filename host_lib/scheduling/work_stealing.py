"""Work stealing within an iteration: SA-ATP's compute help for a worker that is slow *now*.

Each worker's share of the global batch is cut into the same number of micro-batches, so that a
micro-batch takes about the same time whoever owns it once the shares are balanced (a slow worker's
share is small, and so are its micro-batches). The owner computes its own from the head; a worker
that has finished its share takes micro-batches from the tail of the share of an owner that is
behind what the plan expected of it, while that owner has more work left than the thief's own
reserve (below) and more than one micro-batch (:func:`worth_taking`). A worker slowed down in
this very iteration is thus helped before the iteration ends, which the history-based re-split
(:mod:`host_lib.scheduling.policies.sa_atp`) cannot do: it only learns from iterations that are
over.

**Keeping DDP's overlap.** DDP sends a gradient's buckets while the backward pass that produces
them runs, so a step's communication hides behind its own backward. Micro-batches computed
outside DDP only add to the gradients, so a worker ends with one compute pass through DDP, over
its *reserved* micro-batches: when the own micro-batches it has not claimed yet would take no
longer than the plan's ``keep_s`` (the pass whose backward hides the gradient's communication,
measured by the cost model), it claims them all at once, steals what is worth stealing, and then
computes the reserve through DDP, whose backward sends the whole gradient (own and stolen); a
worker that thieves have taken from, too (its tail stops being taken then), since it would end
its compute sooner without but its gradient's communication later. A worker whose whole share
is that short at the speed it last had (a straggler whose share the re-split has cut) reserves
it before computing anything: its step is then a plain DDP step, fixed cost included in the
pass, and it steals nothing (only a worker that has computed some of its own share, and so
paid the step's fixed cost, steals: a worker left without a share by the re-split is too slow
to help). The last micro-batch is always reserved, so with ``keep_s`` 0 (no overlap to keep, as
on the testbed, whose backward runs after the emulated compute) that is every worker's pass.

Claims go through one counter per share in the torch.distributed store. The owner adds 1 per
micro-batch from the head (k for a reserve of k), a thief adds ``_TAIL`` (a claim from the tail);
after an add, the head claims that fit beside the tail claims (together at most the share's
micro-batch count) hold, and the others fail. The store applies the adds one at a time, so every
micro-batch is claimed exactly once, a thief's claim that fails leaves nothing to claim, and the
owner stops at the first micro-batch already taken. Every worker still contributes to the
allreduce (a worker whose whole share was taken sends zeros), so the aggregate is divided by the
global batch as before.

Cost when nobody is slow: one store round trip per micro-batch the owner computes outside DDP,
one for the reserve, and one look at the other shares (two round trips) once its share is done.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
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
# A thief takes from an owner only if that owner has computed at most 1 / BEHIND of what the
# plan expected of it so far this iteration: taking from an owner on schedule only moves work
# around. (And a worker whose last measured speed is BEHIND times the median's is a straggler
# the plan knows of: slow_prior.)
BEHIND = 1.5


@dataclass(frozen=True)
class MicroBatch:
    owner: int  # whose share it belongs to
    index: int  # its position in the owner's share
    samples: np.ndarray  # indices into the dataset
    reserved: bool = False  # computed last, in the pass through DDP


def micro_batches(share: np.ndarray, pieces: int) -> list[np.ndarray]:
    """A share cut into ``pieces`` consecutive micro-batches as equal as can be (fewer when the
    share has fewer samples; none when it is empty)."""
    return split(share, micro_batch_sizes(len(share), pieces))


def micro_batch_sizes(samples: int, pieces: int) -> list[int]:
    """The sizes of :func:`micro_batches` of a share of ``samples``."""
    n = min(pieces, samples)
    base, extra = divmod(samples, max(n, 1))
    return [base + (i < extra) for i in range(n)]


def reserve_now(left: list[int], per_sample_s: float | None, keep_s: float) -> bool:
    """Whether an owner whose unclaimed own micro-batches have ``left`` samples each claims
    them all now for its pass through DDP (module docstring): when the ones after the next
    would take less than ``keep_s``, so that the pass lasts at least that long. ``per_sample_s``
    is its own compute time per sample: as measured in this iteration, or before it has
    computed anything the one :func:`slow_prior` gives it (None: unknown)."""
    if len(left) <= 1:
        return len(left) == 1
    if per_sample_s is None:
        return False
    return per_sample_s * (sum(left) - left[0]) < keep_s


def slow_prior(per_sample_s: tuple[float, ...] | None, rank: int) -> float | None:
    """What a worker goes by before it has measured its speed in an iteration: its speed as
    last measured (``per_sample_s``, the plan's), if that was at least BEHIND times the median
    worker's, else None. A straggler whose whole share is short enough then reserves it at
    once (a plain DDP step); any other worker computes a micro-batch first, so that it can
    steal (only a worker that has computed some of its own steals)."""
    return None if per_sample_s is None else slow_priors(per_sample_s, len(per_sample_s))[rank]


def slow_priors(per_sample_s: tuple[float, ...] | None, n: int) -> list[float | None]:
    """:func:`slow_prior` of each of ``n`` workers."""
    if per_sample_s is None:
        return [None] * n
    bar = BEHIND * float(np.median(per_sample_s))
    return [mine if mine >= bar else None for mine in per_sample_s]


@dataclass(frozen=True)
class Expectation:
    """What the plan expects of every worker's compute in an iteration: its time per sample
    (``per_sample_s``, as last measured; None: unknown) and the step's fixed cost in samples
    (``kappa``), which the first micro-batch a worker computes pays."""

    per_sample_s: tuple[float, ...] | None = None
    kappa: float = 0.0


def worth_taking(left: list[np.ndarray], progress: list[float], expected: Expectation,
                 owners: list[int], elapsed_s: float, reserved_s: float,
                 per_sample_s: float) -> int | None:
    """Which share a thief takes its next micro-batch from (an index into ``left``), or None.

    ``left`` are the sizes of the unclaimed micro-batches of the shares of ``owners``,
    ``progress`` the effective samples each owner has computed (:func:`progress`),
    ``elapsed_s`` how long the iteration has run; the thief computes at ``per_sample_s`` and
    has ``reserved_s`` of its own still to compute. An owner is *behind* when it has done
    less than 1 / BEHIND of what the plan expected of it by now (it slowed down; one that is
    slow as expected is not robbed: its share is already cut to its speed). The thief takes
    from the behind owner whose unclaimed samples will take it longest (at its speed so far,
    or the plan's if slower), if that is longer than the thief's own reserve and one more
    micro-batch (an owner with less will be done before the thief is) and the share has
    WORTH_STEALING micro-batches left."""
    counts = np.array([len(part) for part in left])
    samples = np.array([float(part.sum()) for part in left])
    last = np.array([float(part[-1]) if len(part) else 0.0 for part in left])
    planned = (np.full(len(left), per_sample_s) if expected.per_sample_s is None
               else np.asarray(expected.per_sample_s, np.float64)[np.asarray(owners, int)])
    return pick_owner(counts, samples, last, np.asarray(progress, np.float64), planned,
                      elapsed_s, reserved_s, per_sample_s)


def pick_owner(counts: np.ndarray, samples: np.ndarray, last: np.ndarray,
               progress: np.ndarray, planned: np.ndarray, elapsed_s: float,
               reserved_s: float, per_sample_s: float) -> int | None:
    """:func:`worth_taking` over arrays, one entry per owner: its unclaimed micro-batches,
    their samples, the size of the last of them, its progress and the plan's time per sample
    for it (the model of :mod:`host_lib.scheduling.stealing_model` keeps these for every
    worker, where building them anew for each look would cost it N^2 per iteration)."""
    behind = progress * BEHIND * planned < elapsed_s
    with np.errstate(divide="ignore"):
        rate = np.maximum(planned, elapsed_s / np.maximum(progress, 1e-9))
    remaining = samples * rate
    ok = ((counts >= WORTH_STEALING) & behind & (remaining > 0)
          & (remaining > reserved_s + last * per_sample_s))
    if not ok.any():
        return None
    return int(np.argmax(np.where(ok, remaining, -np.inf)))  # the first of the longest


def progress(sizes: np.ndarray, head: int, kappa: float) -> float:
    """The effective samples an owner that has claimed ``head`` micro-batches of ``sizes`` from
    the head has computed, as far as its claims tell: those it finished, half of the one it
    is computing, and the step's fixed cost (``kappa``), which its first one pays."""
    if not head:
        return 0.0
    first = kappa if head == 1 else 0.0  # the fixed cost is still being paid
    return float(sizes[:head - 1].sum()) + kappa - first + (sizes[head - 1] + first) / 2


class WorkStealing:
    """One rank's side of an iteration's micro-batch claims. ``pieces`` is the number of
    micro-batches per share, the same on every rank; ``store`` the torch.distributed store."""

    def __init__(self, store, rank: int, world: int, pieces: int, job: int = 0):
        if not 1 <= pieces < _TAIL:
            raise ValueError(f"micro-batches per share must be in 1..{_TAIL - 1}, got {pieces}")
        self.store, self.rank, self.world, self.pieces = store, rank, world, pieces
        self.prefix = f"{_PREFIX}/{job}"
        self.claim_s: list[float] = []  # round trips of this iteration's claims

    def _key(self, iteration: int, owner: int) -> str:
        return f"{self.prefix}/{iteration}/{owner}"

    def _add(self, key: str, amount: int) -> tuple[int, int]:
        """(tail claims, head claims) of a share's counter after adding ``amount``."""
        started = time.perf_counter()
        value = self.store.add(key, amount)
        self.claim_s.append(time.perf_counter() - started)
        return divmod(value, _TAIL)

    def iteration(self, iteration: int, shares: list[np.ndarray], keep_s: float = 0.0,
                  per_sample_s: Callable[[], float | None] = lambda: None,
                  expected: Expectation = Expectation()) -> Iterator[MicroBatch]:
        """The micro-batches this rank computes in ``iteration`` (``shares``: every rank's
        samples, the same on every rank), in the order to compute them: its own from the head,
        then stolen ones, then its reserve (``reserved``), to be computed together in one pass
        through DDP. A claim is made when the next micro-batch is asked for, so compute each
        before asking again; ``per_sample_s`` tells this rank's compute time per sample so far
        in the iteration (for the reserve rule, :func:`reserve_now`, and to weigh others'
        shares against its own, :func:`worth_taking`, with what the plan ``expected``)."""
        started = time.perf_counter()
        cut = [micro_batches(share, self.pieces) for share in shares]
        self.claim_s = []
        if iteration >= _KEEP:
            self.store.delete_key(self._key(iteration - _KEEP, self.rank))
        own = cut[self.rank]
        n, key = len(own), self._key(iteration, self.rank)
        head = tail = 0
        reserve: list[MicroBatch] = []
        while head + tail < n:
            left = own[head:n - tail]
            if reserve_now([len(m) for m in left], per_sample_s(), keep_s):
                tail, now = self._add(key, len(left))
                reserve = [MicroBatch(self.rank, i, own[i], reserved=True)
                           for i in range(now - len(left), min(now, n - tail))]
                break
            tail, now = self._add(key, 1)
            if now + tail > n:
                break
            head = now
            yield MicroBatch(self.rank, head - 1, own[head - 1])
        speed = per_sample_s()
        if head and speed is not None:  # only a worker that paid its fixed cost steals
            reserved_s = speed * sum(len(mb.samples) for mb in reserve)
            yield from self._steal(iteration, cut, expected, started, reserved_s,
                                   per_sample_s)
        yield from reserve

    def _steal(self, iteration: int, cut: list[list[np.ndarray]], expected: Expectation,
               started: float, reserved_s: float, per_sample_s: Callable[[], float | None]
               ) -> Iterator[MicroBatch]:
        """Micro-batches from the tails of other shares, while one is worth taking
        (:func:`worth_taking`) for a worker with ``reserved_s`` of its own still to compute."""
        others = [w for w in range(self.world) if w != self.rank and cut[w]]
        keys = [self._key(iteration, w) for w in others]
        sizes = [np.array([len(m) for m in cut[w]]) for w in others]
        # A multi_get waits for keys that do not exist yet: an owner that has not made its
        # first claim has none, so the first look creates the missing ones (rarely needed).
        counters = ([int(v) for v in self.store.multi_get(keys)] if self.store.check(keys)
                    else [self.store.add(k, 0) for k in keys])
        while others:
            claims = [divmod(c, _TAIL) for c in counters]
            left = [size[min(head, len(size)):max(head, len(size) - tail)]
                    for size, (tail, head) in zip(sizes, claims, strict=True)]
            done = [progress(size, min(head, len(size)), expected.kappa)
                    for size, (_, head) in zip(sizes, claims, strict=True)]
            pick = worth_taking(left, done, expected, others, time.perf_counter() - started,
                                reserved_s, per_sample_s() or 0.0)
            if pick is None:
                return
            victim, n = others[pick], len(cut[others[pick]])
            tail, head = self._add(keys[pick], _TAIL)
            if head + tail <= n:
                yield MicroBatch(victim, n - tail, cut[victim][n - tail])
            counters = [int(v) for v in self.store.multi_get(keys)]

"""One call's chunks as the transport sees them, and what a call may end in.

A :class:`Round` is a run of consecutive chunk ids whose DATA frames are prebuilt in one numpy
array, with per-chunk timers and results beside them; a :class:`RoundPlan` says how this worker
takes part in it (decided per iteration by the straggler policy); :class:`CallStats` is what the
call cost. The transport (``host_lib/engine/transport.py``) pushes rounds through the switch.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, fields

import numpy as np

from protocol import constants as P

SERIAL_HALF = 1 << 31  # chunk ids compare in serial-number arithmetic (mod 2^32)


@dataclass(frozen=True)
class RoundPlan:
    """How this worker takes part in a call, decided per iteration by the straggler policy.

    ``helpers`` are the leading workers in duty order: chunk c's helper is ``helpers[c %
    len(helpers)]``, the same for every worker; the next one in order steps in if the first is slow
    (or a straggler itself), and the switch then names it. A worker that missed who took a chunk
    over sends to the first, which forwards. No helpers means no takeover. A helper takes a chunk
    over once it has waited ``takeover_after`` seconds (at least two RTOs) and, where ``stragglers``
    are known, only stragglers are missing. ``expected`` is the bitmap of workers whose
    contributions complete a chunk (0: every worker of the job).

    ``host_share`` of a call's chunks, its first ones, are summed on hosts instead of in the
    switch (docs/protocol.md §7.3): each starts taken over by its helper, every worker sends its
    contribution there, and the helper's result goes back through the switch's multicast. The
    switch's window then carries only the rest; helpers that sum what the switch has no room for
    (ATP's parameter server, on the leading workers). ``ring``: the call goes through the job's
    fallback group (gloo's ring allreduce) and not the switch at all, where the policy measured
    that faster (:mod:`host_lib.scheduling.policies.host_share`).
    """

    contribute: bool = True  # False: sit the call out, recover results with probes (DPAR)
    fanin: int = 0  # in-band fan-in for the switch (0: the job's)
    helpers: tuple[int, ...] = ()
    stragglers: frozenset[int] = frozenset()
    expected: int = 0
    takeover_after: float = 0.0
    host_share: float = 0.0
    ring: bool = False

    def helper(self, chunk: int) -> int | None:
        if not self.helpers:
            return None
        return self.helpers[chunk % len(self.helpers)]

    def host_chunks(self, chunks: int) -> int:
        """How many of a call's ``chunks`` (its first ones) are summed on hosts."""
        return int(self.host_share * chunks) if self.helpers else 0


class SwitchSilent(RuntimeError):
    """The switch sent nothing for longer than the silence bound while chunks were pending."""


class Cancelled(Exception):
    """Another shard of the call failed: this one stops too (``host_lib/engine/shards.py``)."""


class ProtocolError(RuntimeError):
    """The switch or a peer said something that can never be right (a result that changed, a
    scale mismatch, a result lost for good): the call fails rather than return a wrong sum."""


@dataclass
class CallStats:
    """What one allreduce call cost; returned to the caller and summed by the benchmarks."""

    elements: int = 0
    chunks: int = 0
    packets_sent: int = 0
    retransmissions: int = 0
    timeouts: int = 0
    results: int = 0
    duplicate_results: int = 0
    repairs: int = 0
    malformed: int = 0  # datagrams of the wrong length
    takeovers: int = 0  # TAKEOVER requests this worker sent as a helper
    taken: int = 0  # chunks of this call resolved by a takeover
    helper_data: int = 0  # contributions sent to helpers
    helper_results: int = 0  # chunks this worker completed as a helper
    host_chunks: int = 0  # chunks of this call summed on hosts (RoundPlan.host_share)
    bounces: Counter = field(default_factory=Counter)
    rejected: Counter = field(default_factory=Counter)  # frames refused, by reason (frame_filter)
    elapsed_s: float = 0.0
    # from the call's start to the last result of a chunk the switch summed, and of one helpers
    # summed on their hosts (0 where there was none)
    switch_s: float = 0.0
    host_s: float = 0.0
    fallback: str | None = None
    ring: bool = False  # summed by the fallback group's ring, as the plan said (RoundPlan.ring)

    def add(self, other: CallStats) -> None:
        for name in COUNTS + ("elapsed_s", "switch_s", "host_s"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.bounces.update(other.bounces)
        self.rejected.update(other.rejected)


COUNTS = tuple(f.name for f in fields(CallStats) if f.type == "int")  # what calls add up


# What a round keeps per chunk, beside its frame (name: dtype, initial value).
CHUNK_STATE = {
    "sent_at": (np.float64, np.nan),
    "deadline": (np.float64, np.inf),
    "retries": (np.int32, 0),  # retransmissions (Karn's rule, statistics)
    "backoff": (np.int32, 0),  # timer doublings since the last sign of life
    "done": (np.bool_, False),
    "done_at": (np.float64, np.nan),  # when its result came (monotonic)
    "host": (np.bool_, False),  # summed on a host from the start (never the switch)
    "taken_by": (np.int16, -1),  # helper of a taken-over chunk
    "included": (np.bool_, False),  # the switch's sum holds our contribution
    "attempt": (np.int32, 0),  # which peer we ask for a lost result
    "asked_takeover": (np.float64, np.nan),  # when we last sent TAKEOVER
    "missing": (np.uint32, 0),  # who the switch said was missing
    "lost": (np.bool_, False),  # a later chunk's result came first: ask again
    "pending_at": (np.float64, np.nan),  # when a PENDING last said it waits on peers
}
# ... and the chunk's result (name: dtype, shape of one chunk's)
CHUNK_RESULT = {"sums": (np.int32, (P.LANES,)), "exps": (np.uint16, ()),
                "bitmaps": (np.uint32, ()), "counts": (np.uint8, ())}
_COMPLETED, _NEXT_TO_SEND, _FIRST_PENDING = range(3)
_NEXT_DUE, _TAKEOVER_LOOK = range(2)


class Round:
    """Chunks ``base, base + stride, ..., base + (n - 1) * stride`` of the job's stream, with
    their frames and results.

    A worker that splits a call over K shards (``host_lib/engine/shards.py``) gives shard k the
    chunks whose slots it owns, every K-th chunk: a round of stride K, whose local window is
    ``W / K`` chunks (chunk c + W is ``W / K`` places on). Its arrays may then be strided views
    of the call's (``arrays``: every name of :data:`CHUNK_STATE` and :data:`CHUNK_RESULT`), so
    every shard's results land in the call's arrays in place.

    The counters and times the compiled round loop updates (``completed``, ``next_to_send``,
    ``first_pending``, ``next_due``, ``takeover_look``) live in two small arrays, which it
    shares with Python."""

    def __init__(self, frames: np.ndarray, base: int, plan: RoundPlan | None = None,
                 stride: int = 1, arrays: dict[str, np.ndarray] | None = None, keep=None):
        self.frames = frames
        self.rows = frames[:, None].view(np.uint8)  # one row of bytes per frame (a view)
        self.base = base
        self.stride = stride
        self.n = len(frames)
        self.plan = plan or RoundPlan()
        self.keep = keep  # what must live as long as the round (the call's buffers)
        for name, (dtype, initial) in CHUNK_STATE.items():
            if arrays is None:
                setattr(self, name, np.full(self.n, initial, dtype))
            else:
                view = arrays[name]
                view[:] = initial
                setattr(self, name, view)
        for name, (dtype, shape) in CHUNK_RESULT.items():
            if arrays is None:
                setattr(self, name, np.zeros((self.n, *shape), dtype))
            else:
                setattr(self, name, arrays[name])
        self.counters = np.zeros(3, np.int64)
        self.times = np.array([np.inf, -np.inf])

    completed = property(lambda self: int(self.counters[_COMPLETED]),
                         lambda self, v: self.counters.__setitem__(_COMPLETED, v))
    next_to_send = property(lambda self: int(self.counters[_NEXT_TO_SEND]),
                            lambda self, v: self.counters.__setitem__(_NEXT_TO_SEND, v))
    first_pending = property(  # no chunk before it waits for a result
        lambda self: int(self.counters[_FIRST_PENDING]),
        lambda self, v: self.counters.__setitem__(_FIRST_PENDING, v))
    next_due = property(  # never later than the earliest deadline of a pending chunk
        lambda self: float(self.times[_NEXT_DUE]),
        lambda self, v: self.times.__setitem__(_NEXT_DUE, v))
    takeover_look = property(  # no chunk's takeover is due before this (helpers)
        lambda self: float(self.times[_TAKEOVER_LOOK]),
        lambda self, v: self.times.__setitem__(_TAKEOVER_LOOK, v))

    def due(self, js, when) -> None:
        """Set the timers of chunks ``js`` to ``when``. Every timer is set through here (or
        only pushed later), so the transport can skip its scan of the window until
        ``next_due``."""
        self.deadline[js] = when
        if not isinstance(when, np.ndarray):
            self.next_due = min(self.next_due, float(when))
        elif when.size:
            self.next_due = min(self.next_due, float(when.min()))

    def frame(self, j: int) -> memoryview:
        return memoryview(self.rows[j])

    def chunk(self, j):
        """The chunk id of position ``j`` (or of each of an array of positions)."""
        return (self.base + self.stride * j) & 0xFFFFFFFF

    def index(self, chunk: int) -> int | None:
        """Position of a chunk id in this round, or None."""
        d = (chunk - self.base) & 0xFFFFFFFF
        j, off = divmod(d, self.stride)
        return j if j < self.n and not off else None

    def is_future(self, chunk: int) -> bool:
        return (chunk - self.base - self.stride * self.n) & 0xFFFFFFFF < SERIAL_HALF

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
    (ATP's parameter server, on the leading workers).
    """

    contribute: bool = True  # False: sit the call out, recover results with probes (DPAR)
    fanin: int = 0  # in-band fan-in for the switch (0: the job's)
    helpers: tuple[int, ...] = ()
    stragglers: frozenset[int] = frozenset()
    expected: int = 0
    takeover_after: float = 0.0
    host_share: float = 0.0

    def helper(self, chunk: int) -> int | None:
        if not self.helpers:
            return None
        return self.helpers[chunk % len(self.helpers)]

    def host_chunks(self, chunks: int) -> int:
        """How many of a call's ``chunks`` (its first ones) are summed on hosts."""
        return int(self.host_share * chunks) if self.helpers else 0


class SwitchSilent(RuntimeError):
    """The switch sent nothing for longer than the silence bound while chunks were pending."""


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

    def add(self, other: CallStats) -> None:
        for name in COUNTS + ("elapsed_s", "switch_s", "host_s"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.bounces.update(other.bounces)
        self.rejected.update(other.rejected)


COUNTS = tuple(f.name for f in fields(CallStats) if f.type == "int")  # what calls add up


class Round:
    """Chunks ``base .. base + n - 1`` of the job's stream, with their frames and results."""

    def __init__(self, frames: np.ndarray, base: int, plan: RoundPlan | None = None):
        self.frames = frames
        self.base = base
        self.n = len(frames)
        self.plan = plan or RoundPlan()
        self.wire = memoryview(frames.view(np.uint8)).cast("B")
        self.sent_at = np.full(self.n, np.nan)
        self.deadline = np.full(self.n, np.inf)
        self.next_due = np.inf  # never later than the earliest deadline of a pending chunk
        self.retries = np.zeros(self.n, np.int32)  # retransmissions (Karn's rule, statistics)
        self.backoff = np.zeros(self.n, np.int32)  # timer doublings since the last sign of life
        self.done = np.zeros(self.n, bool)
        self.done_at = np.full(self.n, np.nan)  # when its result came (monotonic)
        self.taken_by = np.full(self.n, -1, np.int16)  # helper of a taken-over chunk
        self.host = np.zeros(self.n, bool)  # summed on a host from the start (never the switch)
        self.included = np.zeros(self.n, bool)  # the switch's sum holds our contribution
        self.attempt = np.zeros(self.n, np.int32)  # which peer we ask for a lost result
        self.asked_takeover = np.full(self.n, np.nan)  # when we last sent TAKEOVER
        self.takeover_look = -np.inf  # no chunk's takeover is due before this (helpers)
        self.missing = np.zeros(self.n, np.uint32)  # who the switch said was missing
        self.lost = np.zeros(self.n, bool)  # a later chunk's result came first: ask again
        self.pending_at = np.full(self.n, np.nan)  # when a PENDING last said it waits on peers
        self.sums = np.zeros((self.n, P.LANES), np.int32)
        self.exps = np.zeros(self.n, np.uint16)
        self.bitmaps = np.zeros(self.n, np.uint32)
        self.counts = np.zeros(self.n, np.uint8)
        self.completed = 0
        self.next_to_send = 0
        self.first_pending = 0  # no chunk before it waits for a result

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
        return self.wire[j * P.FRAME_LEN:(j + 1) * P.FRAME_LEN]

    def index(self, chunk: int) -> int | None:
        """Position of a chunk id in this round, or None."""
        j = (chunk - self.base) & 0xFFFFFFFF
        return j if j < self.n else None

    def is_future(self, chunk: int) -> bool:
        return (chunk - self.base - self.n) & 0xFFFFFFFF < SERIAL_HALF

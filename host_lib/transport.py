"""The worker side of the streaming aggregation protocol (docs/protocol.md §4, §7.1).

A :class:`Round` is a run of consecutive chunk ids whose DATA frames are prebuilt in one numpy
array. :class:`Transport` pushes a round through the switch over a link: at most W chunks in
flight, chunk ``c + W`` sent once chunk ``c`` is resolved, retransmission on an adaptive timeout,
results collected straight into a numpy array. Sending and receiving share one non-blocking
loop, so neither waits for the other: every pass drains what has arrived, sends what the window
allows and retransmits what has timed out, and sleeps only when there is nothing to do.
"""

from __future__ import annotations

import logging
import select
import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from host_lib import protocol as P
from host_lib.codec import HEADER_STRUCT
from host_lib.rto import RtoEstimator

log = logging.getLogger(__name__)

_HEADER_OFFSET = P.ETH_LEN + P.IPV4_LEN + P.UDP_LEN
_LANES = np.dtype(">i4")
_SERIAL_HALF = 1 << 31
_EARLY_LIMIT = 1 << 16  # frames kept for chunks this worker has not reached yet


class SwitchSilent(RuntimeError):
    """The switch sent nothing for longer than the silence bound while chunks were pending."""


class ProtocolError(RuntimeError):
    """The switch or a peer said something that can never be right (a result that changed, a
    scale mismatch): the call fails rather than return a wrong sum."""


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
    malformed: int = 0
    bounces: Counter = field(default_factory=Counter)
    elapsed_s: float = 0.0
    fallback: str | None = None

    def add(self, other: CallStats) -> None:
        for name in ("elements", "chunks", "packets_sent", "retransmissions", "timeouts",
                     "results", "duplicate_results", "repairs", "malformed", "elapsed_s"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.bounces.update(other.bounces)


class Round:
    """Chunks ``base .. base + n - 1`` of the job's stream, with their frames and results."""

    def __init__(self, frames: np.ndarray, base: int):
        self.frames = frames
        self.base = base
        self.n = len(frames)
        self.wire = memoryview(frames.view(np.uint8)).cast("B")
        self.sent_at = np.full(self.n, np.nan)
        self.deadline = np.full(self.n, np.inf)
        self.retries = np.zeros(self.n, np.int32)  # retransmissions (Karn's rule, statistics)
        self.backoff = np.zeros(self.n, np.int32)  # timer doublings since the last sign of life
        self.done = np.zeros(self.n, bool)
        self.sums = np.zeros((self.n, P.LANES), np.int32)
        self.exps = np.zeros(self.n, np.uint16)
        self.bitmaps = np.zeros(self.n, np.uint32)
        self.counts = np.zeros(self.n, np.uint8)
        self.next_to_send = 0

    def frame(self, j: int) -> memoryview:
        return self.wire[j * P.FRAME_LEN:(j + 1) * P.FRAME_LEN]

    def index(self, chunk: int) -> int | None:
        """Position of a chunk id in this round, or None."""
        j = (chunk - self.base) & 0xFFFFFFFF
        return j if j < self.n else None

    def is_future(self, chunk: int) -> bool:
        return (chunk - self.base - self.n) & 0xFFFFFFFF < _SERIAL_HALF


class Transport:
    """One worker's stream of rounds for one job, over one link."""

    def __init__(self, link, job: int, worker: int, slots: int, rto: RtoEstimator | None = None,
                 silence_timeout: float = 5.0):
        self.link = link
        self.job = job
        self.worker = worker
        self.slots = slots
        self.rto = rto or RtoEstimator()
        self.silence_timeout = silence_timeout
        self._buf = bytearray(2048)
        self._early: dict[int, bytes] = {}

    def run(self, rnd: Round, stats: CallStats) -> None:
        """Push every chunk of ``rnd`` through the switch and collect its result."""
        stats.chunks += rnd.n
        for chunk in [c for c in self._early if rnd.index(c) is not None]:
            self._handle(rnd, stats, memoryview(self._early.pop(chunk)), time.monotonic())
        poller = select.poll()
        poller.register(self.link.fileno(), select.POLLIN)
        last_heard = time.monotonic()
        remaining = rnd.n - int(rnd.done.sum())
        while remaining:
            now = time.monotonic()
            heard = self._drain(rnd, stats, now)
            if heard:
                last_heard = now
                remaining = rnd.n - int(rnd.done.sum())
                if not remaining:
                    break
            self._send_window(rnd, stats, now)
            next_deadline = self._retransmit(rnd, stats, now)
            if now - last_heard > self.silence_timeout:
                raise SwitchSilent(f"job {self.job} worker {self.worker}: no packet from the "
                                   f"switch for {now - last_heard:.1f} s with {remaining} "
                                   f"chunks pending")
            wait = min(next_deadline, last_heard + self.silence_timeout) - time.monotonic()
            poller.poll(max(0.0, min(wait, 0.5)) * 1000)

    # -- sending ----------------------------------------------------------------------------

    def _send_window(self, rnd: Round, stats: CallStats, now: float) -> None:
        """Send chunks in order while the window allows: chunk j needs j - W resolved."""
        j = rnd.next_to_send
        while j < rnd.n and (j < self.slots or rnd.done[j - self.slots]):
            self.link.send(rnd.frame(j))
            rnd.sent_at[j] = now
            rnd.deadline[j] = now + self.rto.rto
            j += 1
        stats.packets_sent += j - rnd.next_to_send
        rnd.next_to_send = j

    def _retransmit(self, rnd: Round, stats: CallStats, now: float) -> float:
        """Retransmit every pending chunk whose timer expired; the next deadline."""
        lo = max(0, rnd.next_to_send - self.slots)
        window = slice(lo, rnd.next_to_send)
        deadlines = rnd.deadline[window]
        expired = np.nonzero((deadlines <= now) & ~rnd.done[window])[0] + lo
        for j in expired:
            rnd.frames["flags"][j] |= P.Flag.RETX
            self.link.send(rnd.frame(j))
            rnd.sent_at[j] = now
            rnd.retries[j] += 1
            rnd.backoff[j] += 1
            rnd.deadline[j] = now + self.rto.backoff(int(rnd.backoff[j]))
        if len(expired):
            stats.timeouts += len(expired)
            stats.retransmissions += len(expired)
            stats.packets_sent += len(expired)
        pending = rnd.deadline[window][~rnd.done[window]]
        return float(pending.min()) if len(pending) else now + 0.5

    # -- receiving --------------------------------------------------------------------------

    def _drain(self, rnd: Round, stats: CallStats, now: float) -> bool:
        """Handle every frame waiting on the link; True if the switch said anything."""
        heard = False
        buf = self._buf
        view = memoryview(buf)
        while True:
            n = self.link.recv_into(buf)
            if not n:
                return heard
            if n != P.FRAME_LEN:
                stats.malformed += 1
                continue
            heard |= self._handle(rnd, stats, view[:n], now)

    def _handle(self, rnd: Round, stats: CallStats, frame: memoryview, now: float) -> bool:
        (ver_op, _flags, job, _slot, _worker, reason, chunk, bitmap, count, _fanin, _scale,
         exp) = HEADER_STRUCT.unpack_from(frame, _HEADER_OFFSET)
        if ver_op >> 4 != P.VERSION or job != self.job:
            stats.malformed += 1
            return False
        op = ver_op & 0xF
        j = rnd.index(chunk)
        if j is None:
            if rnd.is_future(chunk) and len(self._early) < _EARLY_LIMIT:
                self._early[chunk] = bytes(frame)  # e.g. a result completed without us
            return True
        if op == P.Op.RESULT:
            self._result(rnd, stats, j, frame, bitmap, count, exp, now)
        elif op == P.Op.BOUNCE:
            stats.bounces[P.Bounce(reason).name if reason in P.Bounce._value2member_map_
                          else str(reason)] += 1
            if reason == P.Bounce.PENDING and not rnd.done[j]:
                # Our contribution is in; the chunk waits on peers. Probe again in two RTOs,
                # not after a doubled backoff, so that losing the result later costs little.
                self.rto.sample(now - rnd.sent_at[j])
                rnd.backoff[j] = 0
                rnd.deadline[j] = now + 2 * self.rto.rto
            elif reason == P.Bounce.SCALE_MISMATCH:
                raise ProtocolError(f"chunk {chunk}: the switch holds it with another scale; "
                                    f"workers disagree on the quantization exponent")
        else:
            stats.malformed += 1
        return True

    def _result(self, rnd: Round, stats: CallStats, j: int, frame: memoryview, bitmap: int,
                count: int, exp: int, now: float) -> None:
        lanes = np.frombuffer(frame, _LANES, P.LANES, P.LANES_OFFSET)
        if rnd.done[j]:
            stats.duplicate_results += 1
            if (rnd.bitmaps[j] != bitmap or rnd.exps[j] != exp
                    or not np.array_equal(rnd.sums[j], lanes)):
                raise ProtocolError(f"chunk {rnd.base + j}: a second result differs from the "
                                    f"first (bitmap {bitmap:#x} vs {int(rnd.bitmaps[j]):#x})")
            return
        rnd.sums[j] = lanes
        rnd.exps[j], rnd.bitmaps[j], rnd.counts[j] = exp, bitmap, count
        rnd.done[j] = True
        stats.results += 1
        if rnd.retries[j] == 0 and not np.isnan(rnd.sent_at[j]):  # Karn's rule
            self.rto.sample(now - rnd.sent_at[j])

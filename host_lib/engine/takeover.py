"""Slot takeover (docs/protocol.md §4.3, §7.2): the helper role and a helper's collection.

When the chunks of leading workers wait only for a straggler, a leading worker — the chunk's
*helper* — asks the switch for the slot's partial aggregate, which frees the slot for the next
chunks. The helper then collects the missing contributions on the host (the straggler sends them
to it directly) and sends the completed sum through the switch, which multicasts it.

:class:`HelperDuty` is one chunk's collection at its helper. It keeps the switch's partial and
the contributions that came directly apart until it can tell which contributions the partial
already holds, so no contribution is ever counted twice, whichever arrives first and however
often. Two helpers of the same chunk (one replaced after a timeout) compute the same exact sum.

:class:`Takeover` is everything a worker does for takeover: as a helper it asks the switch for
slots, collects contributions and sends results; as a worker whose chunk was taken it sends its
contribution to the helper. The transport owns one and calls it from its round loop. Its
interface, both ways, is small: it reads the rounds and the plan the transport hands it, the
worker's configuration and the round-trip timer, and it sends only through the
:class:`~host_lib.engine.sender.Sender` it shares with the transport.
"""

from __future__ import annotations

import struct
import time
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from host_lib.engine.config import CommunicatorConfig
from host_lib.engine.rounds import CallStats, ProtocolError, Round, RoundPlan
from host_lib.engine.rto import RtoEstimator
from host_lib.engine.sender import Sender
from protocol import constants as P
from protocol.codec import field_offset, frame_lanes

_VER_OP, _FLAGS, _REASON, _BITMAP_AT = (field_offset(name)
                                        for name in ("ver_op", "flags", "reason", "bitmap"))
_BITMAP = struct.Struct("!I")
_DUTY_LIFETIME = 60.0  # seconds a completed helper duty keeps answering retransmissions
_NAMED_LIMIT = 1 << 16  # chunks whose helper the switch named, kept to redirect late frames


@dataclass
class HelperDuty:
    """One taken-over chunk at its helper."""

    chunk: int
    slot: int
    flags: int  # the shadow-set bit
    expected: int  # bitmap of the workers that may contribute
    fanin: int = 0  # contributions that complete the chunk, as the switch's fan-in (0: all)
    scale: int | None = None
    partial: np.ndarray | None = None  # the switch's partial sum, once received
    partial_bitmap: int = 0
    exp: int = 0
    direct: dict[int, np.ndarray] = field(default_factory=dict)  # worker -> lanes sent to us
    result: np.ndarray | None = None
    result_bitmap: int = 0
    result_count: int = 0
    created_at: float = field(default_factory=time.monotonic)
    completed_at: float | None = None

    def add_partial(self, lanes, bitmap: int, exp: int, scale: int) -> None:
        if self.partial is not None or self.result is not None:
            return
        self._check_scale(scale)
        self.partial = np.array(lanes, np.int32)
        self.partial_bitmap = bitmap
        self.exp = max(self.exp, exp)

    def add_direct(self, worker: int, lanes, exp: int, scale: int) -> None:
        if worker in self.direct or self.result is not None:
            return
        self._check_scale(scale)
        self.direct[worker] = np.array(lanes, np.int32)
        self.exp = max(self.exp, exp)

    def _check_scale(self, scale: int) -> None:
        if self.scale is None:
            self.scale = scale
        elif scale != self.scale:
            raise ValueError(f"chunk {self.chunk}: contribution with scale {scale:#x}, the "
                             f"chunk's is {self.scale:#x}")

    def try_complete(self, now: float) -> bool:
        """Sum the partial and the direct contributions it does not hold, once together they
        are the fan-in's worth of expected workers (every one of them without an in-band
        fan-in: a k-of-n worker that sits the call out never sends)."""
        if self.result is not None:
            return False
        direct_bits = sum(1 << w for w in self.direct)
        have = self.partial_bitmap | direct_bits
        needed = self.fanin or bin(self.expected).count("1")
        if bin(have & self.expected).count("1") < needed:
            return False
        total = np.zeros(P.LANES, np.int32) if self.partial is None else self.partial.copy()
        for worker, lanes in self.direct.items():
            if not self.partial_bitmap >> worker & 1:
                total += lanes  # int32 arithmetic wraps exactly like the switch's registers
        self.result = total
        self.result_bitmap = have
        self.result_count = bin(have).count("1")
        self.completed_at = now
        return True


class Takeover:
    """One worker's part in slot takeover (see the module docstring)."""

    def __init__(self, config: CommunicatorConfig, rto: RtoEstimator, sender: Sender):
        self.config = config
        self.rto = rto  # the transport's round-trip timer (read only)
        self.sender = sender
        self.duties: dict[int, HelperDuty] = {}
        self._named: dict[int, int] = {}  # chunk -> helper the switch last named
        self._recent: deque[Round] = deque(maxlen=4)  # our latest rounds, to answer peers
        self.plan = RoundPlan()  # the plan of the latest round, for duties between calls

    def start(self, rnd: Round) -> None:
        """A new round of ours begins: its plan rules duties until the next, and its results
        answer peers for a few rounds."""
        self.plan = rnd.plan
        self._recent.append(rnd)

    def name(self, chunk: int, helper: int) -> None:
        """The switch named ``helper`` as ``chunk``'s (a PARTIAL, or a TAKEN bounce)."""
        self._named[chunk] = helper
        if len(self._named) > _NAMED_LIMIT:
            self._named.pop(next(iter(self._named)))

    def named(self, chunk: int, default: int | None = None) -> int | None:
        return self._named.get(chunk, default)

    def partial(self, stats: CallStats, chunk: int, frame: memoryview, bitmap: int, exp: int,
                scale: int, plan: RoundPlan) -> None:
        """The switch handed us ``chunk``'s partial aggregate: we are its helper."""
        duty = self._duty(chunk, plan)
        duty.add_partial(frame_lanes(frame), bitmap, exp, scale)
        self._maybe_complete(duty, stats)

    def take_over(self, rnd: Round, stats: CallStats, now: float) -> float:
        """As a helper, ask the switch for the slots of chunks that have waited long enough
        and miss only stragglers; returns when to look again: the earliest time a chunk of the
        window, or one sent from now on, may be due.

        This runs on every pass of the round loop, which with a small window means hundreds of
        passes a call on a machine whose cores the switch and the other workers share, so a
        pass before that time costs one comparison: chunks sent later are due ``after`` from
        when they are sent at the earliest."""
        plan = rnd.plan
        if self.config.worker not in plan.helpers:
            return np.inf
        if now < rnd.takeover_look:
            return rnd.takeover_look
        after = max(2 * self.rto.rto, plan.takeover_after)
        lo = max(0, rnd.next_to_send - self.config.window)
        window = slice(lo, rnd.next_to_send)
        waiting = np.flatnonzero(~rnd.done[window] & (rnd.taken_by[window] < 0)) + lo
        # The chunk's helper acts first. The next one in duty order steps in later, should the
        # first be slow, or be a straggler itself; the switch then names the second.
        turn = (plan.helpers.index(self.config.worker) - (rnd.base + waiting)) % len(plan.helpers)
        waiting, turn = waiting[turn <= 1], turn[turn <= 1]
        asked = rnd.asked_takeover[waiting]
        # A chunk in a borrowed slot holds lanes of the switch's shared pool, which other jobs
        # wait for: it is taken over as soon as it is late, whatever lag the plan expects.
        borrowed = (rnd.base + waiting) % self.config.window >= self.config.slots
        wait = np.where(borrowed, 2 * self.rto.rto, after)
        due = np.where(np.isnan(asked), rnd.sent_at[waiting] + wait * (1 + 2 * turn),
                       asked + self.rto.rto)
        ready = due <= now
        soonest = 2 * self.rto.rto if self.config.borrow else after  # of a new chunk
        look = min(float(due[~ready].min()) if not ready.all() else np.inf, now + soonest)
        ready = waiting[ready]
        straggler_bits = sum(1 << s for s in plan.stragglers)
        due_now = len(ready)
        if straggler_bits:  # a leading worker is missing: loss, not a straggler; let it retry
            ready = ready[(rnd.missing[ready] & np.uint32(~straggler_bits & 0xFFFFFFFF)) == 0]
        for j in ready.tolist():
            self.sender.control(P.Op.TAKEOVER, rnd.base + j)
            rnd.asked_takeover[j] = now
            stats.takeovers += 1
            stats.packets_sent += 1
        if len(ready):
            look = min(look, now + self.rto.rto)
        # Chunks left waiting on a leading worker are looked at again on the next pass.
        rnd.takeover_look = look if len(ready) == due_now else -np.inf
        return look

    def to_helpers(self, rnd: Round, stats: CallStats, js: np.ndarray) -> None:
        """:meth:`to_helper` for the taken-over chunks ``js`` of ``rnd``, those for other
        workers in one batch (a call's chunks summed on hosts all start taken over)."""
        mine = rnd.taken_by[js] == self.config.worker
        for j in js[mine].tolist():
            self.to_helper(rnd, stats, j, self.config.worker)
        js = js[~mine]
        if not len(js):
            return
        frames = rnd.frames[js].copy()  # to the switch, which forwards each to its helper
        frames["ver_op"] = (P.VERSION << 4) | P.Op.HELPER_DATA
        probe = int(P.Flag.PROBE)  # an IntFlag would not cast to uint8
        frames["flags"] = ((frames["flags"] | probe) if not rnd.plan.contribute
                           else (frames["flags"] & (~probe & 0xFF)))
        frames["reason"] = rnd.taken_by[js]
        frames["bitmap"] = np.where(rnd.host[js], self._expected(rnd), 0)
        self.sender.send_batch(frames)
        stats.packets_sent += len(js)
        stats.helper_data += len(js)

    def to_helper(self, rnd: Round, stats: CallStats, j: int, helper: int) -> None:
        """Our contribution to a taken-over chunk, straight to its helper (a worker that sits
        the call out sends a probe, which only asks for the result)."""
        chunk = rnd.base + j
        probe = not rnd.plan.contribute
        if helper == self.config.worker:
            duty = self._duty(chunk, rnd.plan)
            if duty.result is not None:
                self._send_result(duty)  # our own result got lost: have the switch resend it
            elif not probe:
                self._add_own(duty, rnd, j)
                self._maybe_complete(duty, stats)
            return
        frame = bytearray(rnd.frame(j))  # to the switch, which forwards it to the helper
        frame[_VER_OP] = (P.VERSION << 4) | P.Op.HELPER_DATA
        frame[_FLAGS] = ((frame[_FLAGS] | P.Flag.PROBE) if probe
                         else (frame[_FLAGS] & ~P.Flag.PROBE & 0xFF))
        frame[_REASON] = helper
        if rnd.host[j]:
            _BITMAP.pack_into(frame, _BITMAP_AT, self._expected(rnd))
        self.sender.send(frame)
        stats.packets_sent += 1
        stats.helper_data += 1

    def _expected(self, rnd: Round) -> int:
        """Whom a chunk of ``rnd`` summed on hosts waits for (the bitmap its frames carry)."""
        return rnd.plan.expected or self.config.all_workers

    def _duty(self, chunk: int, plan: RoundPlan) -> HelperDuty:
        duty = self.duties.get(chunk)
        if duty is None:
            duty = HelperDuty(chunk, chunk % self.config.window, (chunk // self.config.window) % 2,
                              plan.expected or self.config.all_workers, plan.fanin)
            self.duties[chunk] = duty
        return duty

    def helper_data(self, stats: CallStats, chunk: int, worker: int, flags: int,
                     frame: memoryview, exp: int, scale: int, expected: int = 0) -> None:
        """A contribution to ``chunk`` for us as its helper. ``expected`` (the frame's bitmap)
        is non-zero for a chunk summed on hosts from the start (docs/protocol.md §7.3): the
        contributors it waits for, whatever round we have reached."""
        duty = self.duties.get(chunk)
        if duty is not None and duty.result is not None:
            self._send_result(duty)  # the sender missed the result: send it again
            return
        if self._resend_known_result(chunk):
            return
        helper = self._named.get(chunk)
        if duty is None and helper is not None and helper != self.config.worker:
            # The switch named another helper and the sender missed that. A forwarded copy is
            # marked COPY and never forwarded again, so frames cannot circle between workers
            # whose news of the helper differ.
            if not flags & P.Flag.COPY:
                self.sender.forward(frame, helper)
            return
        if flags & P.Flag.PROBE:
            return  # only asks for a result we do not have yet
        if duty is None and expected:  # summed on hosts: the sender's plan names us
            duty = self.duties[chunk] = HelperDuty(
                chunk, chunk % self.config.window, (chunk // self.config.window) % 2, expected)
            self._add_recent_own(duty)
        elif duty is None:
            named = flags & P.Flag.COPY  # forwarded by a peer that heard the switch name us
            if (self.plan.helper(chunk) != self.config.worker and helper != self.config.worker
                    and not named):
                return  # asked as a peer, and we know of no helper: the sender asks the next
            # We are the designated helper, or the switch named us (a chunk that met held pool
            # lanes starts taken over by its first sender) and the partial is still on its way
            # or we missed it: (re)ask the switch, which re-sends it and names us. Should the
            # slot have moved on meanwhile, the partial is gone, and every worker's own
            # contribution completes the chunk instead: ours goes in now. (A peer that heard
            # the switch name us is the only one left who knows: without the forwarded copy
            # counting as that news, the chunk waited for us while we waited for a helper.)
            duty = self._duty(chunk, self.plan)
            self.sender.control(P.Op.TAKEOVER, chunk)
            stats.takeovers += 1
            self._add_recent_own(duty)
        try:
            duty.add_direct(worker, frame_lanes(frame), exp, scale)
        except ValueError as exc:
            raise ProtocolError(str(exc)) from None
        self._maybe_complete(duty, stats)

    def _add_recent_own(self, duty: HelperDuty) -> None:
        """Our own contribution to a new duty's chunk, if a recent round of ours has it."""
        for rnd in self._recent:
            j = rnd.index(duty.chunk)
            if j is not None and rnd.plan.contribute:
                self._add_own(duty, rnd, j)

    def _add_own(self, duty: HelperDuty, rnd: Round, j: int) -> None:
        f = rnd.frames[j]
        duty.add_direct(self.config.worker, f["lanes"].astype(np.int32), int(f["exp"]),
                        int(f["scale"]))

    def _resend_known_result(self, chunk: int) -> bool:
        """If a recent round of ours holds chunk's result, have the switch multicast it again
        (as a helper result: every worker already holding it checks that it is equal)."""
        for rnd in self._recent:
            j = rnd.index(chunk)
            if j is not None and rnd.done[j]:
                self.sender.control(P.Op.HELPER_RESULT, chunk, rnd.sums[j].copy(),
                                   bitmap=int(rnd.bitmaps[j]), count=int(rnd.counts[j]),
                                   scale=int(rnd.frames["scale"][j]), exp=int(rnd.exps[j]))
                return True
        return False

    def _maybe_complete(self, duty: HelperDuty, stats: CallStats) -> None:
        if duty.try_complete(time.monotonic()):
            stats.helper_results += 1
            self._send_result(duty)

    def _send_result(self, duty: HelperDuty) -> None:
        self.sender.control(P.Op.HELPER_RESULT, duty.chunk, duty.result,
                           bitmap=duty.result_bitmap, count=duty.result_count,
                           scale=duty.scale or 0, exp=duty.exp)

    def holds_results(self) -> bool:
        """Whether this worker completed a helper duty that peers may still ask for."""
        return any(d.result is not None for d in self.duties.values())

    def expire(self, now: float) -> None:
        old = [c for c, d in self.duties.items()
               if now - (d.completed_at or d.created_at) > _DUTY_LIFETIME]
        for chunk in old:
            del self.duties[chunk]

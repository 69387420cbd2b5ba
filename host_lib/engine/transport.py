"""The worker side of the streaming aggregation protocol (docs/protocol.md §4, §7).

:class:`Transport` pushes a :class:`~host_lib.engine.rounds.Round` (the chunk ids of a call, or
every K-th of them for one of K shards, ``host_lib/engine/shards.py``, whose DATA frames are
prebuilt in one numpy array) through the switch over a link: at most W chunks in flight (W / K a
shard), chunk ``c + W`` sent once chunk ``c`` is resolved (its result arrived, or a helper took it
over), retransmission on an adaptive timeout, results collected straight into a numpy array.
Sending and receiving share one non-blocking loop, so neither waits for the other: every pass
drains what has arrived (a batch of frames at a time, results applied by compiled code),
sends what the window allows, retransmits what has timed out, and sleeps only when there is
nothing to do. On a link with compiled batch calls, the common case of those passes runs in
compiled code (:mod:`host_lib.engine.round_loop`) until something needs this module's Python.

With a :class:`~host_lib.engine.rounds.RoundPlan` that names helpers, the transport's
:class:`~host_lib.engine.takeover.Takeover` also plays the helper role of slot takeover. Helper
duties outlive the call they belong to: :meth:`Transport.serve_idle` answers peers between
calls.

The module is longer than most (about 500 lines) because it is one state machine: the sending,
the retransmission timers and the handling of the switch's answers all read and write the same
per-chunk state of the round, and splitting them would put that state behind an interface of its
own without making any part easier to follow. (The common case of the same loop, compiled, is
``host_lib/engine/round_loop.py``.)
"""

from __future__ import annotations

import logging
import select
import time

import numpy as np

from host_lib.engine.buffers import CallBuffers
from host_lib.engine.config import CommunicatorConfig
from host_lib.engine.frame_filter import FrameFilter
from host_lib.engine.links import as_frame_link
from host_lib.engine.result_path import RX_ROW, flag_losses, take_results
from host_lib.engine.round_loop import DONE, FRAMES, CompiledLoop
from host_lib.engine.rounds import CallStats, Cancelled, ProtocolError, Round, SwitchSilent
from host_lib.engine.rto import RtoEstimator
from host_lib.engine.sender import Sender
from host_lib.engine.takeover import Takeover
from protocol import constants as P
from protocol.codec import (
    FRAME_DTYPE,
    HEADER_STRUCT,
    field_offset,
    frame_lanes,
)

log = logging.getLogger(__name__)

_HEADER_OFFSET = P.ETH_LEN + P.IPV4_LEN + P.UDP_LEN
_FLAGS = field_offset("flags")
_EARLY_LIMIT = 1 << 16  # frames kept for chunks this worker has not reached yet
_WAIT_PROBE = 0.05  # first probe interval for a chunk that waits on others (s)
_PROBE_BURST = 4  # chunks retransmitted at once when many time out together
_RX_BATCH = 1024  # frames received before they are handled together


class Transport:
    """One worker's stream of rounds for one job, over one link."""

    def __init__(self, link, config: CommunicatorConfig, wake=None):
        self.link = link
        self._batches = as_frame_link(link)  # the link's batch calls
        self.config = config
        # Another thread ends a call by setting ``stop`` and writing to ``wake`` (a socket this
        # transport also waits on): the shards of a call that one of them failed.
        self.stop = np.zeros(1, np.uint8)
        self.wake = wake
        self.filter = FrameFilter(config.switch, config.local, config.job, config.run)
        # First send to result, waits for peers included:
        self.rto = RtoEstimator(initial=config.initial_rto)
        self.ask_rto = RtoEstimator()  # a question to the switch and its answer
        self.sender = Sender(link, config)
        self.takeover = Takeover(config, self.rto, self.sender)
        # Received frames land in rows of one array, a batch at a time; a spare byte per row
        # tells an oversized datagram (truncated to the row) from a frame.
        self._rx = np.zeros((_RX_BATCH, RX_ROW), np.uint8)
        self._rx_rows = [memoryview(row) for row in self._rx]
        self._rx_frames = self._rx[:, :P.FRAME_LEN].view(FRAME_DTYPE).reshape(_RX_BATCH)
        self._run_js = np.zeros(_RX_BATCH, np.int64)  # the chunks of a run of results
        self._copies = np.zeros(_RX_BATCH, np.int64)  # those of the run that time a question
        self._one = np.zeros((1, RX_ROW), np.uint8)  # a result handled on its own
        self._early: dict[int, bytes] = {}
        self._notices: dict[int, int] = {}  # chunk -> helper, for chunks not yet reached
        self._between_calls = CallStats()  # what serving peers between calls cost
        native = getattr(link, "native", None)
        self._compiled = None if native is None else CompiledLoop(
            native, self._rx, self.filter.template, self.filter.mask, self.rto.state,
            self.ask_rto.state, config.n_workers, config.worker, *link.switch_headers(),
            wake_fd=None if wake is None else wake.fileno())

    # -- the round loop ---------------------------------------------------------------------

    def run(self, rnd: Round, stats: CallStats) -> None:
        """Push every chunk of ``rnd`` through the switch and collect its result."""
        stats.chunks += rnd.n
        stats.add(self._between_calls)  # what arrived since the last call is this call's news
        self._between_calls = CallStats()
        self.takeover.start(rnd)
        now = time.monotonic()
        for chunk in [c for c in self._early if rnd.index(c) is not None]:
            self._handle(rnd, stats, memoryview(self._early.pop(chunk)), now)
        for chunk in [c for c in self._notices if rnd.index(c) is not None]:
            rnd.taken_by[rnd.index(chunk)] = self._notices.pop(chunk)
        if not rnd.plan.contribute:  # sit out: wait for results, probe if they do not come
            rnd.frames["flags"] |= int(P.Flag.PROBE)  # an IntFlag would not cast to uint8
            rnd.sent_at[:] = now
            rnd.due(slice(None), now + max(4 * self.rto.rto, _WAIT_PROBE))
            rnd.next_to_send = rnd.n
        c = self.config
        poller = select.poll()
        for fd in [self.link.fileno()] + ([] if self.wake is None else [self.wake.fileno()]):
            poller.register(fd, select.POLLIN)
        last_heard = last_progress = now
        completed = rnd.completed
        # When the takeover wants to look again: not before the first timer (a chunk is due
        # for takeover two timeouts after it was sent at the earliest), which returns to the
        # Python pass below, which asks it.
        look = np.inf
        while rnd.completed < rnd.n:
            if self._compiled is not None:  # the common case, compiled, until it is not
                reason, start, end, foreign = self._compiled.run(
                    rnd, stats, self.config.window // rnd.stride,
                    (last_heard, last_progress, c.silence_timeout, c.stall_timeout, look),
                    self.stop)
                last_heard = self._compiled.last_heard
                last_progress = self._compiled.last_progress
                if reason == DONE:
                    break
                if reason == FRAMES:
                    if foreign:
                        self.link.finish_headers(self._rx, end)
                    if self._handle_batch(rnd, stats, end, time.monotonic(), start):
                        last_heard = time.monotonic()
            now = time.monotonic()
            if self.stop[0]:
                raise Cancelled
            if self._drain(rnd, stats, now):
                last_heard = now
                if rnd.completed == rnd.n:
                    break
            if rnd.completed != completed:
                completed, last_progress = rnd.completed, now
            self._send_window(rnd, stats, now)
            look = self.takeover.take_over(rnd, stats, now)
            next_deadline = min(self._retransmit(rnd, stats, now), look)
            if now - last_heard > c.silence_timeout:
                raise SwitchSilent(f"job {c.job} worker {c.worker}: no packet from the "
                                   f"switch for {now - last_heard:.1f} s with "
                                   f"{rnd.n - rnd.completed} chunks pending")
            if now - last_progress > c.stall_timeout:
                # Frames keep coming but no chunk completes (a peer gone for good, a livelock):
                # the call ends here whatever traffic keeps flowing.
                raise SwitchSilent(f"job {c.job} worker {c.worker}: no chunk completed "
                                   f"for {now - last_progress:.1f} s with "
                                   f"{rnd.n - rnd.completed} chunks pending")
            if self._compiled is None:
                wait = min(next_deadline, last_heard + c.silence_timeout,
                           last_progress + c.stall_timeout) - time.monotonic()
                poller.poll(max(0.0, min(wait, 0.5)) * 1000)
        self.takeover.expire(time.monotonic())

    def serve_idle(self, timeout: float, wake=None) -> bool:
        """Between calls: answer helper traffic and keep notices, for up to ``timeout`` s or
        until ``wake`` (a file descriptor) is readable; True if a frame arrived."""
        fds = [self.link.fileno()] + ([wake] if wake is not None else [])
        ready, _, _ = select.select(fds, [], [], timeout)
        if self.link.fileno() in ready:
            self._drain(None, self._between_calls, time.monotonic())
            return True
        return False

    # -- sending ----------------------------------------------------------------------------

    def _send_window(self, rnd: Round, stats: CallStats, now: float) -> None:
        """Send chunks in order while the window allows: chunk j needs j - W resolved. A
        chunk already taken over goes to its helper instead; the others go out as one batch."""
        while rnd.next_to_send < rnd.n:
            # At most W chunks at a time: beyond them, j - W is a chunk of this very pass. The
            # round's first W chunks wait for none; from ``gated`` on, each waits for j - W.
            window = self.config.window // rnd.stride  # this round's part of the window
            lo, hi = rnd.next_to_send, min(rnd.n, rnd.next_to_send + window)
            gated = min(hi, max(lo, window))
            before = slice(gated - window, hi - window) if gated < hi else slice(0, 0)
            resolved = rnd.done[before] | (rnd.taken_by[before] >= 0)
            stop = hi - lo if resolved.all() else gated - lo + int(np.argmin(resolved))
            if not stop:
                return
            js = slice(lo, lo + stop)
            direct = ~rnd.done[js] & (rnd.taken_by[js] < 0)  # done: its result came first
            if direct.all():
                self._batches.send_batch(rnd.frames[js])
            else:
                self.takeover.to_helpers(
                    rnd, stats, np.flatnonzero((rnd.taken_by[js] >= 0) & ~rnd.done[js]) + lo)
                if direct.any():
                    self._batches.send_batch(rnd.frames[js][direct])
            stats.packets_sent += int(direct.sum())
            rnd.sent_at[js] = now
            # The chunk's designated worker asks first if it times out; the others later,
            # since the PENDING that answers it reaches them all. Chunk c's designated worker
            # is c modulo n (n workers).
            rnd.due(js, now + 2 * self.rto.rto)
            mine = np.arange(lo, lo + stop)
            mine = mine[(rnd.base + rnd.stride * mine) % self.config.n_workers
                        == self.config.worker]
            rnd.due(mine, np.full(len(mine), now + self.rto.rto))
            rnd.next_to_send += stop

    def _retransmit(self, rnd: Round, stats: CallStats, now: float) -> float:
        """Act on every pending chunk whose timer expired; returns the next deadline."""
        if now < rnd.next_due:
            return rnd.next_due
        resolved = rnd.done[rnd.first_pending:rnd.next_to_send]  # skip the leading done chunks
        rnd.first_pending += len(resolved) if resolved.all() else int(np.argmin(resolved))
        lo = rnd.first_pending  # taken-over chunks can wait far behind the window
        window = slice(lo, rnd.next_to_send)
        due = (rnd.deadline[window] <= now) & ~rnd.done[window]
        lost = np.flatnonzero(due & rnd.lost[window]) + lo
        expired = np.flatnonzero(due & ~rnd.lost[window]) + lo
        # Chunks that time out together usually wait on the same late peer, not on losses:
        # probe with the oldest few and give the others another RTO, rather than burst. Chunks
        # known to be lost all go at once.
        rnd.due(expired[_PROBE_BURST:], now + self.rto.rto)
        rnd.lost[lost] = False
        for j in np.concatenate([lost, expired[:_PROBE_BURST]]).tolist():
            rnd.retries[j] += 1
            rnd.backoff[j] += 1
            stats.timeouts += 1
            helper = int(rnd.taken_by[j])
            timer = self.rto
            if helper >= 0:
                # Taken over: keep sending our contribution to the helper until the result
                # comes. It adds each worker once, so this also covers a partial the helper
                # never received, and a result it has to send again. A probe to the switch
                # keeps us sure it is alive, and tells us if it now names another helper or
                # holds the result.
                self.takeover.to_helper(rnd, stats, j, helper)
                if not rnd.host[j]:  # (a chunk summed on a host was never the switch's)
                    probe = bytearray(rnd.frame(j))
                    probe[_FLAGS] |= P.Flag.PROBE
                    self.sender.send(probe)
                    stats.packets_sent += 1
            elif rnd.attempt[j]:
                self.takeover.to_helper(rnd, stats, j, self._peer(rnd, j))  # see STALE in _bounce
                rnd.attempt[j] += 1
            else:
                # Ask the switch again: it answers at once, with the result, a PENDING or
                # where the chunk went, so the next question is due one switch round trip on.
                rnd.frames["flags"][j] |= P.Flag.RETX
                self.sender.send(rnd.frame(j))
                stats.packets_sent += 1
                stats.retransmissions += 1
                timer = self.ask_rto
            rnd.sent_at[j] = now
            rnd.due(j, now + timer.backoff(int(rnd.backoff[j])))
        pending = rnd.deadline[window][~rnd.done[window]]
        rnd.next_due = float(pending.min()) if len(pending) else np.inf
        return min(rnd.next_due, now + 0.5)

    def _peer(self, rnd: Round, j: int) -> int:
        """Without helpers, a result the switch no longer holds is asked of every other worker
        in turn: each keeps its recent results."""
        me = self.config.worker
        others = [w for w in sorted(self.config.peers) if w != me] or [me]
        return others[(rnd.chunk(j) + int(rnd.attempt[j])) % len(others)]

    # -- receiving ----------------------------------------------------------------------------

    def _drain(self, rnd: Round | None, stats: CallStats, now: float) -> bool:
        """Handle every frame waiting on the link; True if the switch said anything."""
        heard = False
        while True:
            received, more = self._receive_batch(stats)
            if received:
                heard |= self._handle_batch(rnd, stats, received, now)
            if not more:
                return heard

    def _receive_batch(self, stats: CallStats) -> tuple[int, bool]:
        """Receive up to a batch of frames into the rows of ``_rx``; returns how many, and
        whether more may be waiting. Datagrams of any other length are counted and dropped."""
        lengths = self._batches.recv_batch(self._rx)
        received = len(lengths)
        frames = lengths == P.FRAME_LEN
        if not frames.all():
            stats.malformed += received - int(frames.sum())
            self._rx[:int(frames.sum())] = self._rx[:received][frames]
        return int(frames.sum()), received == _RX_BATCH

    def _handle_batch(self, rnd: Round | None, stats: CallStats, received: int,
                      now: float, start: int = 0) -> bool:
        """Handle received frames ``start`` to ``received`` in arrival order. The common case,
        the first result of a chunk of this round, is applied to whole runs of frames by
        compiled code (:mod:`host_lib.engine.result_path`); every other frame goes through
        :meth:`_handle` one at a time."""
        if rnd is None:
            accepted = self.filter.accept(self._rx_frames[:received],
                                          self._rx[:received, :P.FRAME_LEN], stats.rejected)
            return any([self._handle(None, stats, self._rx_rows[i][:P.FRAME_LEN], now)
                        for i in np.flatnonzero(accepted).tolist()])
        heard, accepted = False, None
        while True:
            stop = self._apply_results(rnd, stats, self._rx, start, received, now)
            heard |= stop > start
            if stop == received:
                return heard
            if accepted is None:  # the filter's verdicts, every refusal counted once
                accepted = self.filter.accept(self._rx_frames[:received],
                                              self._rx[:received, :P.FRAME_LEN], stats.rejected)
            if accepted[stop]:
                heard |= self._handle(rnd, stats, self._rx_rows[stop][:P.FRAME_LEN], now)
            start = stop + 1

    def _apply_results(self, rnd: Round, stats: CallStats, rows: np.ndarray, start: int,
                       end: int, now: float) -> int:
        """Store the run of first results of distinct chunks of ``rnd`` that starts at
        ``rows[start]`` (see :func:`~host_lib.engine.result_path.take_results`), sample the round
        trip, and ask at once for results that news of later chunks shows were lost
        (:func:`~host_lib.engine.result_path.flag_losses`); returns the row the run ended before."""
        stop, clean, clean_sent, n_copies, newest_plain = take_results(
            rows, start, end, self.filter.template, self.filter.mask, rnd.base, rnd.stride,
            rnd.done,
            rnd.sums, rnd.exps, rnd.bitmaps, rnd.counts, rnd.sent_at, rnd.retries,
            rnd.pending_at, rnd.taken_by, self._run_js, self._copies)
        if stop == start:
            return stop
        rnd.done_at[self._run_js[:stop - start]] = now
        rnd.completed += stop - start
        stats.results += stop - start
        # Karn's rule; one sample per run of results (their mean), as TCP takes about one per
        # round trip: these results were all sent within one window.
        if clean:
            self.rto.sample(now - clean_sent / clean)
        for j in self._copies[:n_copies].tolist():
            self.ask_rto.sample(now - float(rnd.sent_at[j]))
        # Only one worker asks at once about a gap the run reveals: every worker sees the same
        # gap when a contribution was lost, and the switch answers one question with a PENDING
        # to all of them. The chunk's designated worker asks now; the others give it two
        # question timeouts (see ``ask_rto``), and ask then if neither the PENDING nor the
        # result has come.
        self._flag_losses(rnd, stop - start, newest_plain, now)
        return stop

    def _flag_losses(self, rnd: Round, run_length: int, newest_plain: int, now: float) -> None:
        """Chunks the run of results just stored shows lost (see
        :func:`~host_lib.engine.result_path.flag_losses`)."""
        earliest = flag_losses(
            self._run_js[:run_length], newest_plain, rnd.first_pending, rnd.next_to_send,
            self.config.window // rnd.stride, rnd.base, rnd.stride, self.config.n_workers,
            self.config.worker, now,
            2 * self.ask_rto.rto, rnd.done, rnd.lost, rnd.taken_by, rnd.pending_at,
            rnd.deadline, rnd.backoff)
        rnd.next_due = min(rnd.next_due, earliest)

    def load_kernels(self, stride: int = 1) -> None:
        """Load the compiled kernels a call runs now (from numba's on-disk cache, or compile
        them), with the argument types of a call's rounds of ``stride`` (views of the call's
        arrays), so that the first call does not pay for it: an empty run of results, and the
        compiled round loop (CompiledLoop.load), in a round that is never sent."""
        frames, arrays = CallBuffers(2 * stride).arrays(2 * stride, 0, stride)
        rnd = Round(frames, 0, stride=stride, arrays=arrays)
        self._apply_results(rnd, CallStats(), self._rx, 0, 0, 0.0)
        self._flag_losses(rnd, 0, -1, 0.0)
        if self._compiled is not None:
            self._compiled.load(rnd)

    def _handle(self, rnd: Round | None, stats: CallStats, frame: memoryview, now: float
                ) -> bool:
        """One accepted frame (see FrameFilter) that the batch path does not cover."""
        (ver_op, flags, _job, _slot, worker, reason, chunk, bitmap, _count, fanin, scale,
         exp, _run) = HEADER_STRUCT.unpack_from(frame, _HEADER_OFFSET)
        op = ver_op & 0xF
        if op == P.Op.HELPER_DATA:
            contributor = fanin if flags & P.Flag.COPY else worker
            self.takeover.helper_data(stats, chunk, contributor, flags, frame, exp, scale,
                                      bitmap)
            return True
        if op == P.Op.PARTIAL or (op == P.Op.BOUNCE and reason == P.Bounce.TAKEN):
            self.takeover.name(chunk, worker)  # the switch names the chunk's helper
        if op == P.Op.PARTIAL and worker == self.config.worker:
            self.takeover.partial(stats, chunk, frame, bitmap, exp, scale,
                                  rnd.plan if rnd is not None else self.takeover.plan)
        j = rnd.index(chunk) if rnd is not None else None
        if rnd is not None and op in (P.Op.RESULT, P.Op.PARTIAL):
            self._result_due(rnd, chunk - self.config.window, now)
        if j is None:
            if rnd is None or rnd.is_future(chunk):
                if op == P.Op.RESULT and len(self._early) < _EARLY_LIMIT:
                    self._early[chunk] = bytes(frame)  # e.g. completed without us
                elif op == P.Op.PARTIAL:
                    self._notices[chunk] = worker
            return True
        if op == P.Op.RESULT:
            self._result(rnd, stats, j, frame, bitmap, exp, now)
        elif op == P.Op.PARTIAL:
            self._taken(rnd, stats, j, worker, bitmap >> self.config.worker & 1)
        elif op == P.Op.BOUNCE:
            self._bounce(rnd, stats, j, reason, worker, bitmap, now)
        else:
            stats.rejected["unexpected_op"] += 1  # an op the switch never sends to workers
        return True

    def _bounce(self, rnd: Round, stats: CallStats, j: int, reason: int, worker: int,
                bitmap: int, now: float) -> None:
        stats.bounces[P.Bounce(reason).name if reason in P.Bounce._value2member_map_
                      else str(reason)] += 1
        if rnd.done[j]:
            return
        if reason == P.Bounce.PENDING:
            # The chunk waits on peers; every worker hears the answer to one worker's question.
            # (No round-trip sample from this chunk: its result will have waited on a peer.)
            rnd.missing[j] = self.config.all_workers & ~bitmap
            rnd.included[j] = bool(bitmap >> self.config.worker & 1)
            rnd.pending_at[j] = now
            if worker == self.config.worker and rnd.retries[j] == 1:
                self.ask_rto.sample(now - float(rnd.sent_at[j]))  # the answer to our question
            if j >= rnd.next_to_send or rnd.taken_by[j] >= 0:
                return
            # The workers it waits on send in chunk order: our later chunks wait on them too
            # (or on a loss, which a later result reveals). One question at a time suffices.
            later = np.arange(j + 1, rnd.next_to_send)
            later = later[~rnd.lost[later]]
            rnd.deadline[later] = np.maximum(rnd.deadline[later], now + self.rto.rto)
            if not rnd.included[j] and rnd.plan.contribute:
                # Ours is missing: it was lost. Send it again once a copy still on its way
                # would have arrived.
                rnd.lost[j] = True
                rnd.due(j, min(rnd.deadline[j], rnd.sent_at[j] + self.ask_rto.rto))
            else:
                # The chunk is alive, and the missing workers, who heard this too, send theirs
                # themselves (they may not have reached it yet): whoever asked this, our next
                # question waits as long as a chunk may (backed off). A result lost on its way
                # to us is noticed sooner, from later results (result_path.flag_losses).
                rnd.lost[j] = False
                rnd.backoff[j] += 1
                rnd.due(j, now + self.rto.backoff(int(rnd.backoff[j])))
        elif reason == P.Bounce.TAKEN:
            self._taken(rnd, stats, j, worker, False)
        elif reason == P.Bounce.STALE:
            # The slot moved on: the chunk was taken over (and the slot reused), or completed
            # without us (perhaps by a second helper, while we are one), and the news missed
            # us. Its helper has it: the one we heard of, else the designated one. After that
            # (or when that would be ourselves, or without helpers) every other worker in turn
            # gets our contribution: each keeps its recent results and forwards to a helper it
            # heard of, and one of them is the helper.
            chunk = rnd.chunk(j)
            helper = self.takeover.named(chunk, int(rnd.taken_by[j]))
            if helper < 0:
                helper = rnd.plan.helper(chunk)
            if helper == self.config.worker:
                self.takeover.to_helper(rnd, stats, j, helper)  # ours may be all our duty misses
            if helper is None or helper == self.config.worker or rnd.attempt[j]:
                rnd.attempt[j] += 1
                self.takeover.to_helper(rnd, stats, j, self._peer(rnd, j))
            else:
                rnd.attempt[j] = 1
                self._taken(rnd, stats, j, helper, False)
        elif reason == P.Bounce.SCALE_MISMATCH:
            raise ProtocolError(f"chunk {rnd.chunk(j)}: the switch holds it with another scale; "
                                f"workers disagree on the quantization exponent")
        elif reason == P.Bounce.OLD_RUN:
            raise ProtocolError(f"job {self.config.job}: the switch holds a newer run of this "
                                f"job than ours ({self.config.run:#x}); this run is over")

    def _result_due(self, rnd: Round, chunk: int, now: float) -> None:
        """News of chunk c + W means chunk c was resolved for every worker (each sends c + W
        only after that): if c's result has not reached us, it was lost; ask at once."""
        j = rnd.index(chunk & 0xFFFFFFFF)
        if j is not None and j < rnd.next_to_send and not rnd.done[j]:
            rnd.due(j, now)
            rnd.backoff[j] = 0

    def _taken(self, rnd: Round, stats: CallStats, j: int, helper: int, included) -> None:
        """Chunk j was taken over by ``helper``. If the partial did not hold our contribution,
        send it now; either way send it again on each (long) timeout until the result comes:
        the helper may be waiting for a straggler's whole compute."""
        if rnd.taken_by[j] < 0:
            stats.taken += 1
        rnd.taken_by[j] = helper
        now = time.monotonic()
        if included:
            rnd.included[j] = True
        elif j < rnd.next_to_send:
            self.takeover.to_helper(rnd, stats, j, helper)
        rnd.backoff[j] = 0
        rnd.due(j, now + min(self.rto.maximum, max(4 * self.rto.rto, _WAIT_PROBE)))

    def _result(self, rnd: Round, stats: CallStats, j: int, frame: memoryview, bitmap: int,
                exp: int, now: float) -> None:
        if not rnd.done[j]:
            self._one[0, :P.FRAME_LEN] = np.frombuffer(frame, np.uint8)
            self._apply_results(rnd, stats, self._one, 0, 1, now)
            return
        stats.duplicate_results += 1
        if (rnd.bitmaps[j] != bitmap or rnd.exps[j] != exp
                or not np.array_equal(rnd.sums[j], frame_lanes(frame))):
            raise ProtocolError(f"chunk {rnd.chunk(j)}: a second result differs from the "
                                f"first (bitmap {bitmap:#x} vs {int(rnd.bitmaps[j]):#x})")



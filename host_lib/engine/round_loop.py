"""The round loop's common case, compiled: receiving, storing results, sending the window and
waiting, with no Python (and no GIL) per batch, so that the shards of a worker
(``host_lib/engine/shards.py``) run on as many cores.

:func:`run_round` does what a pass of ``Transport.run`` does as long as nothing unusual happens:
it receives batches of frames on the link's socket (:mod:`pktio.native`), stores the first
results of the round's chunks and acts on what they say about earlier ones
(:mod:`host_lib.engine.result_path`), sends the chunks the window lets go, and waits on the
socket until the next timer. It returns to the transport's Python code, which owns the protocol's
state machine, as soon as that has something to do: a frame that is not a first result (a
bounce, a partial, helper traffic, a second copy, a frame the filter refuses; ``FRAMES``, with
the rows left to handle), a timer that expired (``TIMERS``: retransmissions, takeover), a chunk
of the window that was taken over or completed early (``SEND``), a silence or stall bound that
passed, or news on the wake descriptor (``CHECK``), or a socket error (``FAILED``). A call
without loss runs from its first frame to its last result in one call of :func:`run_round`.

Links that have no compiled calls (plain sockets, packet rings, impaired or test links) run the
same round entirely in Python.

numba's on-disk cache of :func:`run_round` is keyed on this file only, and holds the
:mod:`pktio.native` calls compiled into it: after a change there, touch this file (and
``bench/reflector.py``), or the cached loop keeps the old calls (a fresh clone has no cache).
"""

from __future__ import annotations

import os
import socket
from typing import NamedTuple

import numba
import numpy as np

from host_lib.engine import rto
from host_lib.engine.result_path import flag_losses, take_results
from host_lib.engine.rounds import CallStats
from pktio.native import NativeSocket, copy_bytes, monotonic, pollfds, recv_rows, send_rows, wait
from protocol import constants as P

DONE, FRAMES, TIMERS, SEND, CHECK, FAILED = range(6)
# out: why it returned, the rows left to Python, what it counted, an error
REASON, START, END, RESULTS, SENT, MALFORMED, ERRNO, FOREIGN = range(8)
# clock: when the switch was last heard and a chunk last completed, the bounds, and when the
# takeover wants to look again
LAST_HEARD, LAST_PROGRESS, SILENCE, STALL, HELPER_DUE = range(5)
# cfg
BASE, STRIDE, WINDOW, WORKERS, WORKER = range(5)
_COMPLETED, _NEXT_TO_SEND, _FIRST_PENDING = range(3)
_NEXT_DUE = 0
_MAX_WAIT = 0.5  # never wait on the socket longer (as the Python loop)


class RoundArrays(NamedTuple):
    """A round's arrays, as the compiled loop takes them (see
    :class:`~host_lib.engine.rounds.Round`)."""

    rows: np.ndarray
    done: np.ndarray
    done_at: np.ndarray
    taken_by: np.ndarray
    sent_at: np.ndarray
    deadline: np.ndarray
    retries: np.ndarray
    backoff: np.ndarray
    lost: np.ndarray
    pending_at: np.ndarray
    sums: np.ndarray
    exps: np.ndarray
    bitmaps: np.ndarray
    counts: np.ndarray
    counters: np.ndarray
    times: np.ndarray

    @classmethod
    def of(cls, rnd) -> RoundArrays:
        return cls(*(getattr(rnd, name) for name in cls._fields))


class Receive(NamedTuple):
    """The transport's receive side: its rows, the filter's bytes, scratch for the result path,
    and (links that get datagrams, not frames) the sockaddr and synthesized headers of the
    switch."""

    rows: np.ndarray
    template: np.ndarray
    mask: np.ndarray
    run_js: np.ndarray
    copies: np.ndarray
    peer_name: np.ndarray  # uint8: the switch's sockaddr (empty: frames arrive whole)
    peer_header: np.ndarray  # uint8: the Ethernet, IPv4 and UDP headers of its frames


@numba.njit(cache=True, nogil=True)
def run_round(io, pollfds, rx, r, cfg, rto_state, ask_state, clock, out, stop):
    """Run round ``r`` until the transport's Python code has something to do (module doc);
    ``out[REASON]`` says what, ``out[START]:out[END]`` the rows of ``rx.rows`` left for it.
    ``cfg``: the round's base chunk, stride, local window, the job's workers, this worker;
    ``clock``: see its indexes; ``stop[0]`` set by another thread ends it (``CHECK``), as does
    a readable second descriptor in ``pollfds``."""
    scratch = np.zeros(2, np.int64)
    n = len(r.done)
    base, stride, window = cfg[BASE], cfg[STRIDE], cfg[WINDOW]
    workers, worker = cfg[WORKERS], cfg[WORKER]
    counters, times = r.counters, r.times
    rows = rx.rows
    out[START] = out[END] = 0
    while True:
        now = monotonic(scratch)
        if stop[0]:
            out[REASON] = CHECK
            return
        busy = False
        completed = counters[_COMPLETED]
        while True:  # everything waiting
            got = recv_rows(io, rows, len(rows))
            if got < 0:
                out[REASON], out[ERRNO] = FAILED, -got
                return
            if got == 0:
                break
            busy = True
            good = _frames_only(io, rows, got)
            out[MALFORMED] += got - good
            if len(rx.peer_name) and not _switch_headers(io, rx, good):
                out[REASON], out[START], out[END], out[FOREIGN] = FRAMES, 0, good, 1
                return
            end, clean, clean_sent, n_copies, newest_plain = take_results(
                rows, 0, good, rx.template, rx.mask, base, stride, r.done, r.sums, r.exps,
                r.bitmaps, r.counts, r.sent_at, r.retries, r.pending_at, r.taken_by,
                rx.run_js, rx.copies)
            if end:
                r.counters[_COMPLETED] += end
                for i in range(end):
                    r.done_at[rx.run_js[i]] = now
                if clean:
                    rto.sample(rto_state, now - clean_sent / clean)
                for i in range(n_copies):
                    rto.sample(ask_state, now - r.sent_at[rx.copies[i]])
                earliest = flag_losses(
                    rx.run_js[:end], newest_plain, counters[_FIRST_PENDING],
                    counters[_NEXT_TO_SEND], window, base, stride, workers, worker, now,
                    2 * rto.timeout(ask_state), r.done, r.lost, r.taken_by, r.pending_at,
                    r.deadline, r.backoff)
                times[_NEXT_DUE] = min(times[_NEXT_DUE], earliest)
                out[RESULTS] += end
                clock[LAST_HEARD] = now
            if end < good:
                out[REASON], out[START], out[END] = FRAMES, end, good
                return
            if counters[_COMPLETED] == n:
                out[REASON] = DONE
                return
            if got < len(rows):
                break
        if counters[_COMPLETED] != completed:
            clock[LAST_PROGRESS] = now
        sent = _send_window(io, r, n, window, base, stride, workers, worker, now,
                            rto.timeout(rto_state))
        if sent == -1:
            out[REASON] = SEND
            return
        if sent < -1:
            out[REASON], out[ERRNO] = FAILED, -sent - 1
            return
        out[SENT] += sent
        busy |= sent > 0
        if now >= times[_NEXT_DUE] and _next_due(r, n) <= now or now >= clock[HELPER_DUE]:
            out[REASON] = TIMERS
            return
        if (now - clock[LAST_HEARD] > clock[SILENCE]
                or now - clock[LAST_PROGRESS] > clock[STALL]):
            out[REASON] = CHECK
            return
        if not busy:
            until = min(times[_NEXT_DUE], clock[HELPER_DUE], clock[LAST_HEARD] + clock[SILENCE],
                        clock[LAST_PROGRESS] + clock[STALL])
            if wait(pollfds, min(until - now, _MAX_WAIT)) & ~1:
                out[REASON] = CHECK
                return


@numba.njit(cache=True, nogil=True)
def _next_due(r, n):
    """The earliest deadline of a chunk still waiting, as ``Transport._retransmit`` keeps it
    (``next_due`` only ever moves earlier as timers are set, and stays there when their chunks
    complete); the chunks done at the head of the window are skipped for good."""
    first, end = r.counters[_FIRST_PENDING], r.counters[_NEXT_TO_SEND]
    while first < end and r.done[first]:
        first += 1
    r.counters[_FIRST_PENDING] = first
    due = np.inf
    for j in range(first, end):
        if not r.done[j]:
            due = min(due, r.deadline[j])
    r.times[_NEXT_DUE] = due
    return due


@numba.njit(cache=True, nogil=True)
def _frames_only(io, rows, got):
    """Move the datagrams that are whole frames to the front, in order (their sources with
    them); returns how many there are."""
    good = 0
    for i in range(got):
        if io.lengths[i] + io.off == P.FRAME_LEN:
            if good != i:
                copy_bytes(rows[good], 0, rows[i], 0, rows.shape[1])
                copy_bytes(io.names[good], 0, io.names[i], 0, io.names.shape[1])
                io.lengths[good] = io.lengths[i]
            good += 1
    return good


@numba.njit(cache=True, nogil=True)
def _switch_headers(io, rx, good):
    """Give each datagram from the switch its frame's headers; False if one came from anywhere
    else (the Python code synthesizes those: tests/test_udp_link.py)."""
    size = len(rx.peer_name)
    for i in range(good):
        for b in range(size):
            if io.names[i, b] != rx.peer_name[b]:
                return False
        copy_bytes(rx.rows[i], 0, rx.peer_header, 0, io.off)
    return True


@numba.njit(cache=True, nogil=True)
def _send_window(io, r, n, window, base, stride, workers, worker, now, timeout):
    """Send the chunks the window lets go, as ``Transport._send_window`` does; returns how
    many, -1 if one of them was taken over or completed early (the Python code sends those),
    or -1 - errno."""
    counters = r.counters
    total = 0
    while counters[_NEXT_TO_SEND] < n:
        lo = counters[_NEXT_TO_SEND]
        hi = min(n, lo + window)
        gated = min(hi, max(lo, window))
        stop = hi - lo
        for before in range(gated - window, hi - window):
            if not (r.done[before] or r.taken_by[before] >= 0):
                stop = before + window - lo
                break
        if stop == 0:
            break
        for j in range(lo, lo + stop):
            if r.done[j] or r.taken_by[j] >= 0:
                return -1
        sent = send_rows(io, r.rows, lo, lo + stop)
        if sent < 0:
            return -1 + sent
        first, later = now + timeout, now + 2 * timeout
        due = later
        designated = (base + stride * lo) % workers  # chunk c's designated worker: c mod n
        step = stride % workers
        for j in range(lo, lo + stop):
            r.sent_at[j] = now
            if designated == worker:  # this worker asks first
                r.deadline[j] = first
                due = first
            else:
                r.deadline[j] = later
            designated += step
            if designated >= workers:
                designated -= workers
        r.times[_NEXT_DUE] = min(r.times[_NEXT_DUE], due)
        counters[_NEXT_TO_SEND] += stop
        total += stop
    return total


class CompiledLoop:
    """:func:`run_round` for one transport: its link's socket, receive rows, filter and
    timers; :meth:`run` turns what the compiled loop counted into the call's statistics."""

    def __init__(self, native, rows: np.ndarray, template: np.ndarray, mask: np.ndarray,
                 rto_state: np.ndarray, ask_state: np.ndarray, workers: int, worker: int,
                 peer_name: bytes = b"", peer_header: bytes = b"", wake_fd: int | None = None):
        self.native = native
        self.rx = Receive(rows, template, mask, np.zeros(len(rows), np.int64),
                          np.zeros(len(rows), np.int64), np.frombuffer(peer_name, np.uint8),
                          np.frombuffer(peer_header, np.uint8))
        fds = [native.sock.fileno()] + ([] if wake_fd is None else [wake_fd])
        self.pollfds = pollfds(*fds)
        self.rto_state, self.ask_state = rto_state, ask_state
        self.cfg = np.array([0, 1, 1, workers, worker], np.int64)
        self.clock = np.zeros(5)
        self.out = np.zeros(8, np.int64)

    def run(self, rnd, stats, window: int, clock: tuple[float, ...], stop: np.ndarray
            ) -> tuple[int, int, int, bool]:
        """Run ``rnd`` (local window ``window``) until the Python code has something to do;
        ``clock``: last heard, last progress, the silence and stall bounds, when the takeover
        looks again. Returns (reason, first row left, end of the rows left, whether those
        rows still lack their synthesized headers); the clock's first two are in
        :attr:`last_heard` and :attr:`last_progress`."""
        self.cfg[BASE], self.cfg[STRIDE], self.cfg[WINDOW] = rnd.base, rnd.stride, window
        self.clock[:] = clock
        out = self.out
        out[:] = 0
        run_round(self.native.io, self.pollfds, self.rx, RoundArrays.of(rnd), self.cfg,
                  self.rto_state, self.ask_state, self.clock, out, stop)
        stats.results += int(out[RESULTS])
        stats.packets_sent += int(out[SENT])
        stats.malformed += int(out[MALFORMED])
        if out[REASON] == FAILED:
            raise OSError(int(out[ERRNO]), os.strerror(int(out[ERRNO])))
        return int(out[REASON]), int(out[START]), int(out[END]), bool(out[FOREIGN])

    def load(self, rnd) -> None:
        """Load the compiled loop for rounds like ``rnd``, told to stop before it starts, and
        the link's batch calls as its Python methods make them (on a socket of their own:
        nothing is received, nothing sent; bound to any address, as a namespace may have no
        loopback up)."""
        self.run(rnd, CallStats(), 1, (0.0,) * 5, np.ones(1, np.uint8))
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.bind(("0.0.0.0", 0))
            sock.setblocking(False)
            probe = NativeSocket(sock, P.FRAME_LEN)
            probe.recv(self.rx.rows)
            probe.send(rnd.rows[:0])
            probe.send(np.ascontiguousarray(rnd.rows[:0]))

    @property
    def last_heard(self) -> float:
        return float(self.clock[LAST_HEARD])

    @property
    def last_progress(self) -> float:
        return float(self.clock[LAST_PROGRESS])

"""Every core of a worker: one call's chunks split over K shards, each a transport of its own.

Shard k owns the slots s with ``s mod K == k`` (K divides the window W), so it streams every K-th
chunk of the call (a round of stride K, ``host_lib/engine/rounds.py``) through its W / K slots:
chunk c + W, which reuses c's slot, is its too, and nothing of the protocol (docs/protocol.md §4,
§7) crosses shards. Each shard has its own thread (shard 0 the communicator's I/O thread), its
own link where the link can open more (a socket of its own, whose sends the kernel spreads over
the NIC's transmit queues), its own timers and retransmission state, its own takeover and
helper duties (a peer's contribution for chunk c reaches the helper's shard of c's slot), and
writes its frames (``host_lib/engine/frames.py``) and results in its own rows of the call's
arrays. With the compiled round loop (``host_lib/engine/round_loop.py``), shards run in
parallel: the loop holds no GIL.

Every worker of a job should run the same K: a shard infers a lost result when a later chunk of
its own comes back first, which holds when every worker sends the chunks of a shard in order,
i.e. splits the chunks alike (with different K's the sums are still exact, but workers ask the
switch needless questions).

Where results reach a shard depends on the link:

* A link that can give every shard a socket to which the frames of its slots come back, in
  order (``open_shards``), does: the kernel steers each result to the shard's socket by its slot
  (``UdpSocketLink``: the switch sends every result of a worker to its one port, so the shards
  share that port, and a NIC's RSS keeps one worker's results on one receive queue; the
  steering spreads them after it), or the far end answers each socket (the benchmark's
  reflector, on tunnels of their own).
* Any other link (a port of the embedded switch answers the socket that sent to it last, an
  interface delivers everything to one socket, a test link has one queue) is shared
  (:class:`SharedLink`): whichever shard receives takes everything waiting and hands each frame
  to the shard of its slot, in arrival order, so every shard sees its frames in the order the
  switch sent them. Such shards run the round loop in Python.
"""

from __future__ import annotations

import os
import select
import socket
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from host_lib.engine.config import CommunicatorConfig
from host_lib.engine.links import as_frame_link
from host_lib.engine.rounds import CallStats, Cancelled, Round
from host_lib.engine.transport import Transport
from protocol import constants as P
from protocol.codec import field_offset

_SLOT = field_offset("slot")
_RX_BATCH = 256
_FINISHED_POLL = 0.05  # a shard done with its round serves peers until the call ends


def shard_count(config: CommunicatorConfig, wanted: int | None = None) -> int:
    """K: ``wanted`` (``config.shards``, else the cores this process may run on), at most the
    window and a divisor of it."""
    wanted = wanted or config.shards or len(os.sched_getaffinity(0))
    k = max(1, min(wanted, config.window))
    while config.window % k:
        k -= 1
    return k


class ShardedTransport:
    """K transports for one worker (see the module doc); K = 1 is one plain transport. By
    default (``config.shards`` None) a worker has as many shards as cores where its link opens a
    socket per shard, and one where it cannot: shards that share one socket run in Python, one
    at a time. ``config.shards`` sets K on any link."""

    def __init__(self, link, config: CommunicatorConfig):
        k = shard_count(config)
        links = link.open_shards(k) if k > 1 and hasattr(link, "open_shards") else None
        self._shared = None
        if links is None and config.shards and k > 1:
            self._shared = SharedLink(link, k)
            links = self._shared.shards
        elif links is None:  # by default, a link that cannot give shards sockets has one
            links = [link]
        self.links = links
        self.shards = len(links)
        self._bells = [socket.socketpair() for _ in links] if self.shards > 1 else []
        for pair in self._bells:
            for end in pair:
                end.setblocking(False)
        self.transports = [Transport(lk, config, wake=self._bells[i][0] if self._bells else None)
                           for i, lk in enumerate(links)]
        self._threads = ThreadPoolExecutor(self.shards - 1, "sa-atp-shard") if (
            self.shards > 1) else None
        self._call_over = threading.Event()  # every shard of the call is done
        self._running = 0
        self._lock = threading.Lock()

    def run(self, parts: list, stats: CallStats) -> list[Round]:
        """Run one call: ``parts[k]`` makes shard k's round (in the shard's thread, so the
        frames it writes are written there), or is None if shard k has no chunk in the call.
        Returns the rounds. If a shard fails, the others stop and the first failure is
        raised."""
        if self.shards == 1:
            rnd = parts[0]()
            self.transports[0].run(rnd, stats)
            return [rnd]
        self._call_over.clear()
        for t, (bell, _) in zip(self.transports, self._bells, strict=True):
            t.stop[0] = 0
            _drain(bell)
        self._running = sum(part is not None for part in parts)
        futures = {k: self._threads.submit(_outcome, self._run_shard, k, part)
                   for k, part in enumerate(parts) if k and part is not None}
        outcomes = {}
        if parts[0] is not None:
            outcomes[0] = _outcome(self._run_shard, 0, parts[0])
        outcomes |= {k: future.result() for k, future in futures.items()}
        failures = [o for o in outcomes.values()
                    if isinstance(o, BaseException) and not isinstance(o, Cancelled)]
        if failures:
            raise failures[0]
        for k in sorted(outcomes):
            stats.add(outcomes[k][1])
        return [outcomes[k][0] for k in sorted(outcomes)]

    def _run_shard(self, k: int, part) -> tuple[Round, CallStats]:
        stats = CallStats()
        transport = self.transports[k]
        try:
            rnd = part()
            transport.run(rnd, stats)
        except BaseException:
            self._stop_all()
            raise
        finally:
            with self._lock:
                self._running -= 1
                if not self._running:
                    self._call_over.set()
                    self._ring_all()
        # Done: keep answering peers about this shard's chunks until the whole call is.
        while not self._call_over.is_set():
            transport.serve_idle(_FINISHED_POLL, self._bells[k][0].fileno())
            _drain(self._bells[k][0])
        return rnd, stats

    def _stop_all(self) -> None:
        for t in self.transports:
            t.stop[0] = 1
        self._ring_all()

    def _ring_all(self) -> None:
        for _, ring in self._bells:
            try:
                ring.send(b"x")
            except BlockingIOError:
                pass

    def serve_idle(self, timeout: float, wake=None) -> bool:
        """Between calls: every shard answers its helper traffic (see Transport.serve_idle)."""
        if self.shards == 1:
            return self.transports[0].serve_idle(timeout, wake)
        fds = {t.link.fileno(): t for t in self.transports}
        ready, _, _ = select.select(list(fds) + ([wake] if wake is not None else []), [], [],
                                    timeout)
        heard = False
        for fd in ready:
            if fd in fds:
                heard |= fds[fd].serve_idle(0.0)
        return heard

    def linger(self, quiet: float, limit: float) -> None:
        """Keep answering peers until every shard's link has been quiet for ``quiet`` s (at
        most ``limit``): a peer that lost a result we hold may still ask for it. A result this
        worker summed as a helper is held by no one else (the switch never had a chunk summed
        on a host, nor a taken-over chunk's sum), and a peer asks for it again only as often as
        its backed-off timer allows, at most the RTO's ceiling apart: so while a shard holds
        one, quiet means quiet for twice that."""
        for t in self.transports:
            if t.takeover.holds_results():
                quiet = max(quiet, 2 * t.rto.ceiling)
        end = time.monotonic() + limit
        while time.monotonic() < end and self.serve_idle(min(quiet, end - time.monotonic())):
            pass

    def load_kernels(self) -> None:
        for t in self.transports[:1]:
            t.load_kernels(self.shards)

    def close(self) -> None:
        """Close what the shards opened (the link the transport was given is the caller's)."""
        if self._threads is not None:
            self._threads.shutdown()
        for lk in self.links[1:]:
            lk.close()
        if self._shared is not None:
            self._shared.close()
        for pair in self._bells:
            for end in pair:
                end.close()


def _outcome(fn, *args):
    try:
        return fn(*args)
    except BaseException as exc:  # noqa: BLE001 - collected, the first failure is re-raised
        return exc


def _drain(sock: socket.socket) -> None:
    try:
        while sock.recv(4096):
            pass
    except (BlockingIOError, OSError):
        pass


class SharedLink:
    """One link's frames for K shards, each to the shard of its slot, in arrival order; sends
    from any shard go out through the link one at a time."""

    def __init__(self, link, k: int):
        self.link = as_frame_link(link)
        self.k = k
        self._receiving, self._sending = threading.Lock(), threading.Lock()
        self.inboxes = [deque() for _ in range(k)]
        self._rows = np.zeros((_RX_BATCH, P.FRAME_LEN + 1), np.uint8)
        self._bells = [socket.socketpair() for _ in range(k)]
        for pair in self._bells:
            for end in pair:
                end.setblocking(False)
        self.shards = [_SharedShard(self, i) for i in range(k)]

    def pump(self) -> None:
        """Take everything waiting on the link into the shards' inboxes; ring the bells of
        the shards that got frames."""
        with self._receiving:
            rang = set()
            while True:
                lengths = self.link.recv_batch(self._rows)
                m = len(lengths)
                if m:
                    rows = self._rows[:m]
                    slots = (rows[:, _SLOT].astype(np.int64) << 8) | rows[:, _SLOT + 1]
                    # a datagram too short to have a slot is anybody's (counted as malformed)
                    owners = np.where(lengths >= _SLOT + 2, slots % self.k, 0)
                    for owner in np.unique(owners).tolist():
                        mine = owners == owner
                        self.inboxes[owner].append((rows[mine].copy(), lengths[mine].copy()))
                        rang.add(owner)
                if m < len(self._rows):
                    break
            for owner in rang:
                try:
                    self._bells[owner][1].send(b"x")
                except BlockingIOError:
                    pass

    def send(self, frame) -> None:
        with self._sending:
            self.link.send(frame)

    def send_batch(self, frames: np.ndarray) -> None:
        with self._sending:
            self.link.send_batch(frames)

    def close(self) -> None:
        for shard in self.shards:
            shard.epoll.close()
        for pair in self._bells:
            for end in pair:
                end.close()


class _SharedShard:
    """Shard ``i``'s view of a :class:`SharedLink`: a link whose descriptor is readable when
    the shared link or this shard's inbox has frames."""

    def __init__(self, shared: SharedLink, i: int):
        self.shared, self.i = shared, i
        self.send, self.send_batch = shared.send, shared.send_batch
        self.bell = shared._bells[i][0]
        self.epoll = select.epoll()
        self.epoll.register(shared.link.fileno(), select.EPOLLIN)
        self.epoll.register(self.bell.fileno(), select.EPOLLIN)

    def fileno(self) -> int:
        return self.epoll.fileno()

    def recv_batch(self, rows: np.ndarray) -> np.ndarray:
        _drain(self.bell)
        self.shared.pump()
        inbox = self.shared.inboxes[self.i]
        lengths, got = np.zeros(len(rows), np.int64), 0
        width = rows.shape[1]
        while inbox and got < len(rows):
            frames, sizes = inbox.popleft()
            take = min(len(frames), len(rows) - got)
            w = min(width, frames.shape[1])
            rows[got:got + take, :w] = frames[:take, :w]
            lengths[got:got + take] = sizes[:take]
            got += take
            if take < len(frames):
                inbox.appendleft((frames[take:], sizes[take:]))
        return lengths[:got]

    def close(self) -> None:
        pass  # the shared link is closed by its owner

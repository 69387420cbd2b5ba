"""The far end of the transport benchmark: answers each DATA frame at once with the RESULT a
one-worker job would get from the switch (every chunk completes with its only contribution),
sent back to the socket it came from, from the address it was sent to, as the switch answers.

What is measured is the worker, so the far end must not be the limit: the reflector is compiled
(:mod:`pktio.native`, no Python per batch) and shards too. Its K processes share one UDP port
(:mod:`pktio.reuseport`), and the kernel hands each datagram to process ``slot mod K``: the
frames of a worker's shard (its slots) all reach one process, which answers them in order.

Probes (``PROBE`` flag) are drained without an answer and counted, for the send-rate
measurements: a 1-byte datagram ``?`` asks for that count and the monotonic time of the last
one; any other 1-byte datagram stops the process.
"""

from __future__ import annotations

import multiprocessing
import os
import socket
import struct

import numba
import numpy as np

from pktio.native import NativeSocket, copy_bytes, monotonic, pollfds, recv_rows, send_rows, wait
from pktio.reuseport import reuseport_socket, steer_by_field
from protocol import constants as P
from protocol.codec import FRAME_DTYPE, field_offset
from topologies import lifetime

_ASK = ord("?")
_DRAINED = struct.Struct("<qd")
_SET, _PROBE = int(P.Flag.SET), int(P.Flag.PROBE)
_RESULT = (P.VERSION << 4) | P.Op.RESULT
_VER_OP, _FLAGS = field_offset("ver_op"), field_offset("flags")
_BITMAP, _COUNT = field_offset("bitmap"), field_offset("count")
_SWAPS = tuple((field_offset(dst), field_offset(src), FRAME_DTYPE.fields[dst][0].itemsize)
               for dst, src in (("eth_dst", "eth_src"), ("ip_dst", "ip_src"),
                                ("udp_dport", "udp_sport")))
_SLOT_IN_DATAGRAM = field_offset("slot")  # a tunnel's datagram is a whole frame
_DRAINED_PROBES, _LAST_PROBE = 0, 1
_SOCKADDR_IN = 16


@numba.njit(cache=True, nogil=True)
def _answer(row):
    """A DATA frame turned into its one-worker RESULT, in place (the IPv4 checksum does not
    change: swapping addresses keeps the sum of its words)."""
    for dst, src, size in _SWAPS:
        for b in range(size):
            row[dst + b], row[src + b] = row[src + b], row[dst + b]
    row[_VER_OP] = _RESULT
    row[_FLAGS] &= _SET
    row[_BITMAP], row[_BITMAP + 1], row[_BITMAP + 2], row[_BITMAP + 3] = 0, 0, 0, 1
    row[_COUNT] = 1


@numba.njit(cache=True, nogil=True)
def _same_source(names, a, b):
    for i in range(_SOCKADDR_IN):
        if names[a, i] != names[b, i]:
            return False
    return True


@numba.njit(cache=True, nogil=True)
def _random(state):
    """A uniform number in [0, 1) (xorshift64; ``state``: one nonzero uint64)."""
    x = state[0]
    x ^= x << np.uint64(13)
    x ^= x >> np.uint64(7)
    x ^= x << np.uint64(17)
    state[0] = x
    return (x >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@numba.njit(cache=True, nogil=True)
def serve(io, fds, rows, probes, drop, rng):
    """Answer what arrives until a 1-byte datagram does; returns its first byte.
    ``probes``: [drained, monotonic time of the last one]; each answer is lost with
    probability ``drop`` (``rng``: the generator's state)."""
    scratch = np.zeros(2, np.int64)
    while True:
        got = recv_rows(io, rows, len(rows))
        if got <= 0:
            wait(fds, 0.5)
            continue
        control = -1
        start = 0
        while start < got:  # runs of datagrams from one source go back as one batch
            end = start
            while end < got and _same_source(io.names, start, end):
                end += 1
            keep = start
            for i in range(start, end):
                if io.lengths[i] == 1 and control < 0:
                    control = rows[i, 0]
                elif io.lengths[i] == P.FRAME_LEN:
                    if rows[i, _FLAGS] & _PROBE:
                        probes[_DRAINED_PROBES] += 1
                        probes[_LAST_PROBE] = monotonic(scratch)
                    elif not (drop and _random(rng) < drop):
                        _answer(rows[i])
                        if keep != i:
                            copy_bytes(rows[keep], 0, rows[i], 0, rows.shape[1])
                        keep += 1
            copy_bytes(io.dest, 0, io.names[start], 0, _SOCKADDR_IN)
            send_rows(io, rows, start, keep)
            start = end
        if control >= 0:
            return control


def _load_serve() -> None:
    """Load (or compile) :func:`serve` before the benchmark waits on it: on a socket of its
    own, told to stop at once."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as own, \
            socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as poke:
        own.bind(("127.0.0.1", 0))
        own.setblocking(False)
        poke.sendto(b"!", own.getsockname())
        native = NativeSocket(own, P.FRAME_LEN, dest=("127.0.0.1", 1))
        serve(native.io, pollfds(own.fileno()), np.zeros((1, P.FRAME_LEN + 1), np.uint8),
              np.zeros(2), 0.0, np.ones(1, np.uint64))


def _process(ready, parent: int, address, members: int, drop: float, seed: int,
             cpus: frozenset[int] | None) -> None:
    lifetime.die_with_parent(parent)
    if cpus:
        os.sched_setaffinity(0, cpus)
    sock = reuseport_socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 24)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 24)
    sock.bind(address)
    sock.setblocking(False)
    if address[1] == 0:  # the first member: it steers the group
        steer_by_field(sock, _SLOT_IN_DATAGRAM, members)
    native = NativeSocket(sock, P.FRAME_LEN, dest=("127.0.0.1", 1))
    rows = np.zeros((256, P.FRAME_LEN + 1), np.uint8)
    probes = np.zeros(2)
    fds = pollfds(sock.fileno())
    _load_serve()
    ready.put(sock.getsockname())
    rng = np.array([seed * 0x9E3779B97F4A7C15 % 2**64 or 1], np.uint64)
    while serve(native.io, fds, rows, probes, drop, rng) == _ASK:
        sender = socket.inet_ntoa(bytes(native.io.dest[4:8]))
        port = int.from_bytes(bytes(native.io.dest[2:4]), "big")
        sock.sendto(_DRAINED.pack(int(probes[0]), probes[1]), (sender, port))


class Reflector:
    """K reflector processes on one UDP port of 127.0.0.1 (see the module doc). ``drop``: the
    probability that an answer is lost, per process (a number for all, or one per process),
    for tests of loss recovery; ``cpus``: the cores they may run on (default: any)."""

    def __init__(self, shards: int = 1, drop: float | list[float] = 0.0,
                 cpus: frozenset[int] | None = None):
        drops = drop if isinstance(drop, list) else [drop] * shards
        ctx = multiprocessing.get_context("spawn")
        ready = ctx.Queue()
        self.procs = []
        address = ("127.0.0.1", 0)
        for k in range(shards):  # one at a time: the kernel numbers them in this order
            proc = ctx.Process(target=_process,
                               args=(ready, os.getpid(), address, shards, drops[k], k + 1, cpus),
                               daemon=True)
            proc.start()
            self.procs.append(proc)
            address = ready.get(timeout=60)
        self.address = address

    def drained(self) -> tuple[int, float]:
        """Probes drained so far and when the last one was (a one-process reflector)."""
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.settimeout(10)
            s.sendto(b"?", self.address)
            return _DRAINED.unpack(s.recv(64))

    def close(self) -> None:
        for proc in self.procs:  # a 1-byte datagram reaches one member of the group: kill
            proc.kill()
            proc.join()

    def __enter__(self) -> Reflector:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

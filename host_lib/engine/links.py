"""A worker's link to the switch: whole Ethernet frames out and in, one at a time or in batches.

The interface the transport uses (:class:`FrameLink`):

* ``send(frame)``: one frame (bytes-like, ``FRAME_LEN`` bytes);
* ``send_batch(frames)``: a ``FRAME_DTYPE`` array of frames, all to the same destination;
* ``recv_batch(rows) -> lengths``: frames into the rows of a 2-D uint8 array, one per row, until
  it is full or none is waiting; returns each one's full length (a longer datagram is cut to its
  row), so the caller tells frames from anything else;
* ``fileno()`` for the poll loop, and ``close()``. Every link is non-blocking.

And, where a link has them:

* ``native``: the :class:`pktio.native.NativeSocket` its batches go through, on which the
  transport runs its compiled round loop (``host_lib/engine/round_loop.py``), with
  ``switch_headers()`` (what the loop writes before a datagram from the switch, for a link that
  receives datagrams rather than frames) and ``finish_headers(rows, n)`` (the headers of
  datagrams from anywhere else);
* ``open_shards(k)``: k links, this one first, each with a socket of its own to which the frames
  of its slots come back (``host_lib/engine/shards.py``), or None where they cannot.

Links:

* :class:`UdpTunnelLink` carries each frame as one UDP datagram to a port of the embedded
  software switch on loopback (``softswitch-grpc -i 1@udp:127.0.0.1:PORT``): no root needed.
  Batches go through :mod:`pktio.native` (segmentation offload and GRO, else
  ``sendmmsg``/``recvmmsg``), else one call per frame (:class:`pktio.udp.UdpBatch`).
* :class:`~host_lib.engine.udp_link.UdpSocketLink` speaks the protocol on a plain UDP socket
  bound to the SA-ATP port: the kernel builds Ethernet/IP/UDP, for real NICs.
* :class:`RawEthernetLink` sends and receives frames on a Linux interface through AF_PACKET, as a
  Mininet host does with bmv2 or the embedded switch on veth pairs (needs CAP_NET_RAW).
* :class:`XdpLink` does so through AF_XDP, past the kernel's network stack (needs root);
  :func:`interface_link` picks it where it can run, raw Ethernet elsewhere.
* :class:`ImpairedLink` drops, duplicates and reorders frames of another link.

A link written for one frame at a time (``send`` and ``recv_into(buf) -> length``, as test
doubles are) gets the batch calls from :func:`as_frame_link`.
"""

from __future__ import annotations

import logging
import socket
import struct

import numpy as np

from pktio.native import NativeSocket
from pktio.ring import open_ring
from pktio.udp import UdpBatch, best_mode
from pktio.xdp import XdpSocket, XdpSteering
from pktio.xdp import available as xdp_available
from protocol import constants as P
from protocol.codec import field_offset

log = logging.getLogger(__name__)

_RECV_BUFFER = 8 << 20
_ETH_P_ALL = 0x0003
_PACKET_OUTGOING = 4
_SA_ATP_PORT_BYTES = struct.pack("!H", P.UDP_PORT)
_UDP_SPORT, _UDP_DPORT = field_offset("udp_sport"), field_offset("udp_dport")


class FrameLink:
    """Batch calls built from one-frame ``send`` and ``recv_into``, for links that have
    nothing faster."""

    def send_batch(self, frames: np.ndarray) -> None:
        for frame in frames[:, None].view(np.uint8):
            self.send(frame)

    def recv_batch(self, rows: np.ndarray) -> np.ndarray:
        lengths = np.zeros(len(rows), np.int64)
        for i, row in enumerate(rows):
            n = self.recv_into(memoryview(row))
            if not n:
                return lengths[:i]
            lengths[i] = n
        return lengths


class _PerFrame(FrameLink):
    def __init__(self, link):
        self.link = link
        self.send, self.recv_into = link.send, link.recv_into
        self.fileno, self.close = link.fileno, link.close


def as_frame_link(link) -> FrameLink:
    """``link`` itself if it has the batch calls, else a wrapper that gives it them."""
    return link if hasattr(link, "recv_batch") else _PerFrame(link)


class UdpTunnelLink:
    """Frames as UDP datagrams to ``switch_addr`` (host, port), from an ephemeral local port.
    ``mode`` forces one of :data:`pktio.udp.MODES` (default: the best the kernel has); batches
    in the offload and mmsg modes go through :mod:`pktio.native`, which the compiled round loop
    uses too.

    A port of the embedded switch answers whoever sent to it last, so the shards of a worker
    (``host_lib/engine/shards.py``) share this one socket and its frames are handed to them in
    arrival order. ``reply_to_sender``: the far end answers each socket that sends to it (the
    benchmark's reflector): :meth:`open_shards` then gives each shard a socket of its own."""

    def __init__(self, switch_addr: tuple[str, int], bind_host: str = "127.0.0.1",
                 mode: str | None = None, reply_to_sender: bool = False):
        self.switch_addr, self.bind_host = switch_addr, bind_host
        self.reply_to_sender = reply_to_sender
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, _RECV_BUFFER)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, _RECV_BUFFER)
        self.sock.bind((bind_host, 0))
        self.sock.connect(switch_addr)
        self.sock.setblocking(False)
        self.mode = mode or best_mode(self.sock)
        self.native = None if self.mode == "plain" else NativeSocket(self.sock, P.FRAME_LEN,
                                                                     mode=self.mode)
        self.io = UdpBatch(self.sock, "plain") if self.native is None else self.native
        # Attach: the switch's tunnel port sends to whoever last sent to it, so without this a
        # worker that sits its first calls out (k-of-n, DPAR) would miss the job's results.
        self.send(b"")

    def fileno(self) -> int:
        return self.sock.fileno()

    def send(self, frame) -> None:
        try:
            self.sock.send(frame)
        except (BlockingIOError, ConnectionRefusedError):
            pass  # a full buffer or an absent switch is loss; retransmission recovers

    def send_batch(self, frames: np.ndarray) -> None:
        self.io.send(frames[:, None].view(np.uint8))

    def recv_batch(self, rows: np.ndarray) -> np.ndarray:
        return self.io.lengths[:self.io.recv(rows)]

    def recv_into(self, buf) -> int:
        """One frame into ``buf`` (for callers that take one at a time); its length, 0 if none
        is waiting."""
        lengths = self.recv_batch(np.frombuffer(buf, np.uint8).reshape(1, -1))
        return min(int(lengths[0]), len(buf)) if len(lengths) else 0

    def switch_headers(self) -> tuple[bytes, bytes]:
        """Frames arrive whole: nothing to synthesize (see UdpSocketLink)."""
        return b"", b""

    def open_shards(self, k: int) -> list | None:
        """This link and k - 1 more to the same far end, each on a socket of its own, if the
        far end answers each socket; None if it does not (the shards then share this one)."""
        if not self.reply_to_sender:
            return None
        return [self] + [UdpTunnelLink(self.switch_addr, self.bind_host, self.mode, True)
                         for _ in range(k - 1)]

    def close(self) -> None:
        self.sock.close()


class RawEthernetLink(FrameLink):
    """Frames on a Linux interface. Only frames to this host's SA-ATP UDP port are returned;
    a plain UDP socket bound to that port keeps the kernel from answering results with ICMP
    port-unreachable. Frames go in and out through PACKET_MMAP rings (:mod:`pktio.ring`),
    else (``ring=False``, or a kernel without them) one call per frame."""

    def __init__(self, interface: str, ip: str, udp_port: int = P.UDP_PORT, ring: bool = True):
        self.interface = interface
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(_ETH_P_ALL))
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, _RECV_BUFFER)
        self.sock.bind((interface, 0))
        self.sock.setblocking(False)
        self.ring = open_ring(self.sock) if ring else None
        self._port = struct.pack("!H", udp_port)
        self._sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._sink.bind((ip, udp_port))

    def fileno(self) -> int:
        return self.sock.fileno()

    def _ours(self, frame) -> bool:
        return (len(frame) >= _UDP_SPORT + 4 and frame[_UDP_DPORT:_UDP_DPORT + 2] == self._port
                and frame[_UDP_SPORT:_UDP_SPORT + 2] == _SA_ATP_PORT_BYTES)

    def send(self, frame) -> None:
        if self.ring is not None:
            self.ring.send([frame])
            return
        try:
            self.sock.send(frame)
        except BlockingIOError:
            pass

    def send_batch(self, frames: np.ndarray) -> None:
        if self.ring is None:
            super().send_batch(frames)
            return
        self.ring.send(list(frames[:, None].view(np.uint8)))

    def recv_batch(self, rows: np.ndarray) -> np.ndarray:
        if self.ring is None:
            return super().recv_batch(rows)
        lengths: list[int] = []
        while len(lengths) < len(rows):
            want = len(rows) - len(lengths)
            batch = self.ring.recv(want)
            for frame, *_aux in batch:
                if self._ours(frame):
                    n = min(len(frame), rows.shape[1])
                    rows[len(lengths), :n] = np.frombuffer(frame, np.uint8, n)
                    lengths.append(len(frame))
            if len(batch) < want:
                break
        return np.array(lengths, np.int64)

    def recv_into(self, buf) -> int:
        while True:
            try:
                n, addr = self.sock.recvfrom_into(buf)
            except BlockingIOError:
                return 0
            if addr[2] == _PACKET_OUTGOING:
                continue  # our own transmissions, looped back by AF_PACKET
            if self._ours(buf[:n]):
                return n

    def close(self) -> None:
        if self.ring is not None:
            self.ring.close()
        self.sock.close()
        self._sink.close()


class XdpLink(FrameLink):
    """Frames on a Linux interface through AF_XDP (:mod:`pktio.xdp`): an XDP program hands the
    frames of this host's SA-ATP UDP port to the link's socket on ``queue`` before the kernel's
    network stack sees them, and passes every other frame on to it; frames leave through the
    same socket. ``mode``: ``"copy"`` (any driver, veth included) or ``"zerocopy"`` (NIC
    drivers that support it). Needs root and a kernel with AF_XDP (:func:`interface_link`
    falls back to :class:`RawEthernetLink` elsewhere). On a NIC with several receive queues,
    the SA-ATP port must be steered to ``queue`` (``ethtool -N``), or the NIC given one."""

    def __init__(self, interface: str, udp_port: int = P.UDP_PORT, mode: str = "copy",
                 queue: int = 0):
        ifindex = socket.if_nametoindex(interface)
        try:
            self.steering = XdpSteering(ifindex, udp_port)
        except OSError:  # a driver without XDP of its own: the kernel's generic hook
            self.steering = XdpSteering(ifindex, udp_port, skb=True)
        try:
            self.xsk = XdpSocket(ifindex, queue, mode)
            self.steering.attach(queue, self.xsk.fileno())
        except BaseException:
            self.steering.close()
            raise

    def fileno(self) -> int:
        return self.xsk.fileno()

    def send(self, frame) -> None:
        self.xsk.send(np.frombuffer(frame, np.uint8).reshape(1, -1))

    def send_batch(self, frames: np.ndarray) -> None:
        self.xsk.send(frames[:, None].view(np.uint8))

    def recv_batch(self, rows: np.ndarray) -> np.ndarray:
        return self.xsk.recv(rows)

    def recv_into(self, buf) -> int:
        lengths = self.recv_batch(np.frombuffer(buf, np.uint8).reshape(1, -1))
        return min(int(lengths[0]), len(buf)) if len(lengths) else 0

    def close(self) -> None:
        self.steering.close()
        self.xsk.close()


def interface_link(interface: str, ip: str, udp_port: int = P.UDP_PORT, af_xdp: bool = True):
    """A link on ``interface``: AF_XDP where this process may use it, else raw Ethernet."""
    if af_xdp and xdp_available():
        try:
            return XdpLink(interface, udp_port)
        except OSError as exc:
            log.warning("AF_XDP on %s refused (%s): raw Ethernet instead", interface, exc)
    return RawEthernetLink(interface, ip, udp_port)


class ImpairedLink(FrameLink):
    """Wraps a link and drops, duplicates and reorders frames in both directions, with seeded
    probabilities, for experiments and tests (this kernel has no netem; the switch's drop
    simulator loses frames per port, this loses them per worker). A reordered frame is held
    back and released after the next few frames in the same direction."""

    def __init__(self, link, duplicate: float = 0.0, reorder: float = 0.0, drop: float = 0.0,
                 hold: int = 3, seed: int = 0):
        import random

        self.link = as_frame_link(link)
        self.duplicate = duplicate
        self.reorder = reorder
        self.drop = drop
        self.hold = hold
        self._rng = random.Random(seed)
        self._held_out: list[list] = []  # [frames to wait, frame]
        self._held_in: list[list] = []
        self._ready_in: list[bytes] = []
        self._rows = np.zeros((64, P.FRAME_LEN + 1), np.uint8)

    def fileno(self) -> int:
        return self.link.fileno()

    def _impair(self, frame: bytes, held: list[list]) -> list[bytes]:
        """Frames to deliver now, given one more frame in this direction."""
        out = []
        for entry in held:
            entry[0] -= 1
        out += [f for n, f in held if n <= 0]
        held[:] = [e for e in held if e[0] > 0]
        if self._rng.random() < self.drop:
            return out
        copies = 2 if self._rng.random() < self.duplicate else 1
        for _ in range(copies):
            if self._rng.random() < self.reorder:
                held.append([self._rng.randint(1, self.hold), frame])
            else:
                out.append(frame)
        return out

    def send(self, frame) -> None:
        for f in self._impair(bytes(frame), self._held_out):
            self.link.send(f)

    def recv_into(self, buf) -> int:
        while not self._ready_in:
            lengths = self.link.recv_batch(self._rows)
            if not len(lengths):
                # nothing new: let held frames go rather than hold them forever
                self._ready_in = [f for _, f in self._held_in]
                self._held_in.clear()
                if not self._ready_in:
                    return 0
                break
            for row, n in zip(self._rows, lengths.tolist(), strict=False):
                self._ready_in += self._impair(row[:min(n, len(row))].tobytes(), self._held_in)
        frame = self._ready_in.pop(0)
        n = min(len(frame), len(buf))  # a socket cuts a datagram to the buffer too
        buf[:n] = frame[:n]
        return n

    def close(self) -> None:
        self.link.close()

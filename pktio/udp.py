"""Equal-size UDP datagrams in batches on one socket, with the fastest mechanism the kernel has.

Modes, best first (:func:`best_mode` picks the first the kernel supports; each can be forced):

* ``offload``: UDP segmentation offload on send (``UDP_SEGMENT``: one buffer of up to
  :data:`MAX_SEGMENTS` datagrams per ``sendmsg``, cut by the kernel or the NIC) and UDP GRO on
  receive (``UDP_GRO``: such a train arrives as one buffer, its segment size in a control
  message). Linux 4.18 and 5.0. On loopback this moves about 15x the datagrams per second of
  one call per datagram. A device that cannot checksum for us refuses segmented sends (EIO):
  sending then drops to ``mmsg`` for good.
* ``mmsg``: ``sendmmsg``/``recvmmsg`` (:mod:`pktio.mmsg`): one system call per batch, but still
  one trip through the UDP stack per datagram (about 1.5x).
* ``plain``: one ``send``/``recv`` call per datagram.

A batch to send is a 2-D uint8 array, one datagram per row (rows may be strided views, e.g. the
payloads of whole frames). Received datagrams land one per row of the caller's array, with their
full lengths (a longer datagram is cut to the row) and their source socket addresses. A receive
that fills every row may leave the rest of a GRO train behind, where polling the socket does not
see it: call again until one returns fewer than asked for, before waiting on the socket.
"""

from __future__ import annotations

import errno
import logging
import socket
import struct

import numpy as np

from pktio import mmsg

log = logging.getLogger(__name__)

SOL_UDP = 17
UDP_SEGMENT = 103  # <linux/udp.h>
UDP_GRO = 104
MAX_SEGMENTS = 64  # UDP_MAX_SEGMENTS up to Linux 6.x (128 after): the portable limit
MAX_UDP_PAYLOAD = 65507
MODES = ("offload", "mmsg", "plain")
_GRO_CMSG = socket.CMSG_SPACE(4)
_INT = struct.Struct("=i")
_U16 = struct.Struct("=H")


def best_mode(sock: socket.socket) -> str:
    """The first of :data:`MODES` that this kernel offers on ``sock``."""
    try:
        sock.getsockopt(SOL_UDP, UDP_SEGMENT)
        sock.setsockopt(SOL_UDP, UDP_GRO, 1)
        sock.setsockopt(SOL_UDP, UDP_GRO, 0)
        return "offload"
    except OSError:
        return "mmsg" if mmsg.available() else "plain"


def sockaddr(family: int, addr: tuple) -> bytes:
    """The ``struct sockaddr_in``/``sockaddr_in6`` of a Python socket address."""
    if family == socket.AF_INET:
        return (_U16.pack(family) + addr[1].to_bytes(2, "big") + socket.inet_aton(addr[0])
                + bytes(8))
    flow, scope = (addr[2], addr[3]) if len(addr) == 4 else (0, 0)
    return (_U16.pack(family) + addr[1].to_bytes(2, "big") + flow.to_bytes(4, "big")
            + socket.inet_pton(socket.AF_INET6, addr[0]) + _INT.pack(scope))


def address(name: np.ndarray | bytes) -> tuple:
    """The Python socket address of a ``sockaddr`` (as :attr:`UdpBatch.names` holds them)."""
    raw = bytes(name)
    port = int.from_bytes(raw[2:4], "big")
    if _U16.unpack_from(raw)[0] == socket.AF_INET:
        return socket.inet_ntoa(raw[4:8]), port
    return (socket.inet_ntop(socket.AF_INET6, raw[8:24]), port,
            int.from_bytes(raw[4:8], "big"), _INT.unpack_from(raw, 24)[0])


class UdpBatch:
    """Batched sends and receives of one non-blocking UDP socket (see the module doc)."""

    def __init__(self, sock: socket.socket, mode: str | None = None, capacity: int = 256):
        if mode is not None and mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}: one of {MODES}")
        self.sock = sock
        self.family = sock.family
        self.mode = mode or best_mode(sock)
        self.send_mode = self.mode
        if self.mode == "offload":
            sock.setsockopt(SOL_UDP, UDP_GRO, 1)
            self._staging = np.zeros(1 << 16, np.uint8)
            self._staging_view = memoryview(self._staging)
            self._pending = (0, 0, 0, b"")  # a GRO train's rest: start, end, segment, source
        if self.mode != "plain":
            self._mmsg = mmsg.Mmsg(sock.fileno(), capacity)
        self.lengths = np.zeros(capacity, np.int64)
        self.names = np.zeros((capacity, mmsg.NAME_LEN), np.uint8)
        self._names: dict[tuple, np.ndarray] = {}

    # -- sending -----------------------------------------------------------------------------

    def send(self, rows: np.ndarray, dest: tuple | None = None) -> int:
        """Send each row as one datagram, to ``dest`` or the connected peer; returns how many
        the kernel took (a full socket buffer, or an ICMP error pending from an earlier
        datagram, loses the rest of a train: loss, which the protocol recovers from)."""
        if not len(rows):
            return 0
        if self.send_mode == "offload":
            return self._send_segmented(np.ascontiguousarray(rows), dest)
        if self.send_mode == "mmsg":
            return self._send_mmsg(rows, dest)
        sent = 0
        for row in rows:
            try:
                self.sock.send(row) if dest is None else self.sock.sendto(row, dest)
                sent += 1
            except (BlockingIOError, ConnectionRefusedError):
                pass
        return sent

    def _send_segmented(self, rows: np.ndarray, dest: tuple | None) -> int:
        size = rows.shape[1]
        step = min(MAX_SEGMENTS, MAX_UDP_PAYLOAD // size)
        cmsg = [(SOL_UDP, UDP_SEGMENT, _U16.pack(size))]
        flat = memoryview(rows.reshape(-1))
        extra = () if dest is None else (dest,)
        sent = 0
        for start in range(0, len(rows), step):
            train = flat[start * size:(start + step) * size]
            try:
                self.sock.sendmsg([train], cmsg, 0, *extra)
                sent += len(train) // size
            except (BlockingIOError, ConnectionRefusedError):
                pass
            except OSError as exc:
                if exc.errno != errno.EIO:
                    raise
                log.warning("UDP segmentation refused by the device (%s): sendmmsg from now on",
                            exc)
                self.send_mode = "mmsg" if mmsg.available() else "plain"
                return sent + self.send(rows[start:], dest)
        return sent

    def _send_mmsg(self, rows: np.ndarray, dest: tuple | None) -> int:
        if rows.strides[1] != 1:
            rows = np.ascontiguousarray(rows)
        name = None if dest is None else sockaddr(self.family, dest)
        sent = 0
        while sent < len(rows):
            try:
                n = self._mmsg.send(rows[sent:], name)
            except (BlockingIOError, ConnectionRefusedError):
                break
            sent += n
        return sent

    # -- receiving ---------------------------------------------------------------------------

    def recv(self, rows: np.ndarray) -> int:
        """Receive datagrams into the rows of ``rows`` (a 2-D uint8 array) until it is full or
        none is waiting; returns how many. Their lengths are ``lengths[:n]``, their sources
        ``names[:n]``."""
        if self.mode == "offload":
            return self._recv_gro(rows)
        if self.mode == "mmsg":
            return self._recv_mmsg(rows)
        width, got = rows.shape[1], 0
        while got < min(len(rows), len(self.lengths)):
            try:
                n, addr = self.sock.recvfrom_into(memoryview(rows[got]), width, socket.MSG_TRUNC)
            except BlockingIOError:
                break
            except ConnectionRefusedError:
                continue
            self.lengths[got] = n
            self.names[got] = self._name(addr)
            got += 1
        return got

    def _recv_mmsg(self, rows: np.ndarray) -> int:
        try:
            got = self._mmsg.recv(rows)
        except (BlockingIOError, ConnectionRefusedError):
            return 0
        self.lengths[:got] = self._mmsg.lengths[:got]
        self.names[:got] = self._mmsg.names[:got]
        return got

    def _recv_gro(self, rows: np.ndarray) -> int:
        width, got = rows.shape[1], 0
        room = min(len(rows), len(self.lengths))
        while got < room:
            start, end, seg, name = self._pending
            if start == end:
                try:
                    end, ancdata, _flags, addr = self.sock.recvmsg_into(
                        [self._staging_view], _GRO_CMSG)
                except BlockingIOError:
                    break
                except ConnectionRefusedError:
                    continue
                seg = end
                for level, kind, data in ancdata:
                    if level == SOL_UDP and kind == UDP_GRO:
                        seg = _INT.unpack_from(data)[0]
                start, name = 0, self._name(addr)
                if not end:  # an empty datagram is still one
                    self.lengths[got], self.names[got] = 0, name
                    got += 1
                    continue
            k = min((end - start) // seg, room - got)  # whole segments
            if k:
                w = min(seg, width)
                segments = self._staging[start:start + k * seg].reshape(k, seg)
                rows[got:got + k, :w] = segments[:, :w]
                self.lengths[got:got + k] = seg
                start += k * seg
            else:  # the train's shorter last segment
                k, tail = 1, end - start
                rows[got, :min(tail, width)] = self._staging[start:start + min(tail, width)]
                self.lengths[got] = tail
                start = end
            self.names[got:got + k] = name
            got += k
            self._pending = (start, end, seg, name)
        return got

    def _name(self, addr: tuple) -> np.ndarray:
        name = self._names.get(addr)
        if name is None:
            if len(self._names) > 1024:
                self._names.clear()
            raw = sockaddr(self.family, addr)
            name = self._names[addr] = np.frombuffer(raw.ljust(mmsg.NAME_LEN, b"\0"), np.uint8)
        return name

"""Batches of equal-size UDP datagrams from compiled code, with no Python and no GIL per batch.

:mod:`pktio.udp` sends and receives batches for Python callers; this module does the same
(its ``offload`` mode: ``UDP_SEGMENT`` trains out, ``UDP_GRO`` trains in; its ``mmsg`` mode:
``sendmmsg``/``recvmmsg``) as numba functions, for loops that must run whole calls in compiled
code on one thread per core: the host's round loop (``host_lib/engine/round_loop.py``) and the
benchmark's reflector. It is a second implementation of those modes on purpose: the embedded
switch, which also uses :mod:`pktio.udp`, does not load numba.

Why numba and not a native extension: the libc calls are declared to LLVM by name (numba
intrinsics), so the compiled code links against the process's libc when it is loaded and is
cached on disk like every other kernel of the project; nothing is compiled at install time, and
no compiler is needed on the machines that run it. (ctypes function pointers called from numba
would work too, but their addresses are baked into the code, which numba then cannot cache.)

A :class:`NativeSocket` holds one socket's descriptor and the arrays the calls fill (message
headers, I/O vectors, a staging area for GRO trains, what was received: lengths and source
addresses); it is made once per socket, in Python, and its :attr:`~NativeSocket.io` tuple is
what the compiled functions take. Rows are the rows of a 2-D uint8 array, the datagram being
``size`` bytes from column ``off`` (``off`` > 0: the payload of a whole frame, as
``UdpSocketLink`` sends it). Struct layouts are those of LP64 Linux (x86-64, arm64).
"""

from __future__ import annotations

import socket
from typing import NamedTuple

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from pktio.udp import MAX_SEGMENTS, MAX_UDP_PAYLOAD, SOL_UDP, UDP_GRO, UDP_SEGMENT, best_mode

OFFLOAD, MMSG = 0, 1  # NativeSocket modes (pktio.udp's "offload" and "mmsg")
NAME_LEN = 32  # room for a sockaddr_in or sockaddr_in6
MSG_DONTWAIT, MSG_TRUNC = 0x40, 0x20
POLLIN = 0x1
EINTR, EIO, EAGAIN, EINVAL, ECONNREFUSED = 4, 5, 11, 22, 111
CLOCK_MONOTONIC = 1
_STAGING = 1 << 16
# state: how sends go, a GRO train being handed out (start, end, segment size), the
# destination's sockaddr length (0: the connected peer), how receives go
_SEND_MODE, _TRAIN_START, _TRAIN_END, _TRAIN_SEG, _DEST_LEN, _RECV_MODE = range(6)
# ... and the rows the receive headers point at (recvmmsg), so that they are set up once
_PREPARED_ROWS, _PREPARED_ROOM, _PREPARED_STEP = 6, 7, 8
# ... and the most segments a train may have: newer kernels take 128 (UDP_MAX_SEGMENTS, 64 before),
# which halves the system calls per frame each way; an older kernel's EINVAL lowers it for good
_MAX_TRAIN = 9
_LONG_TRAIN = 128
# struct msghdr (56 bytes) in int64 words; struct mmsghdr adds msg_len in word 7
_NAME, _NAMELEN, _IOV, _IOVLEN, _CONTROL, _CONTROLLEN, _FLAGS, _MSG_LEN = range(8)
_CMSG_GRO = SOL_UDP | (UDP_GRO << 32)  # cmsg_level and cmsg_type, as one word
_CMSG_SEGMENT = SOL_UDP | (UDP_SEGMENT << 32)


# -- libc, declared by name ------------------------------------------------------------------

def _call(name: str, result: int, args: tuple[int, ...]):
    """The signature and code generator of a numba intrinsic that calls libc's ``name``: every
    argument an int64 (an address where the C type is a pointer), the result sign-extended to
    int64. ``result`` and ``args`` are the C types' widths in bits, 0 for a pointer."""

    def llvm(bits):
        return ir.IntType(8).as_pointer() if bits == 0 else ir.IntType(bits)

    def codegen(context, builder, signature, values):
        fnty = ir.FunctionType(llvm(result), [llvm(b) for b in args])
        fn = cgutils.get_or_insert_function(builder.module, fnty, name)
        converted = [builder.inttoptr(v, llvm(0)) if b == 0 else builder.trunc(v, llvm(b))
                     if b < 64 else v for v, b in zip(values, args, strict=True)]
        out = builder.call(fn, converted)
        if result == 0:
            return builder.ptrtoint(out, ir.IntType(64))
        return builder.sext(out, ir.IntType(64)) if result < 64 else out

    return types.int64(*[types.int64] * len(args)), codegen


@intrinsic
def _sendmsg(typingctx, fd, msghdr, flags):
    return _call("sendmsg", 64, (32, 0, 32))


@intrinsic
def _recvmsg(typingctx, fd, msghdr, flags):
    return _call("recvmsg", 64, (32, 0, 32))


@intrinsic
def _sendmmsg(typingctx, fd, msgvec, vlen, flags):
    return _call("sendmmsg", 32, (32, 0, 32, 32))


@intrinsic
def _recvmmsg(typingctx, fd, msgvec, vlen, flags, timeout):
    return _call("recvmmsg", 32, (32, 0, 32, 32, 0))


@intrinsic
def _memmove(typingctx, dst, src, n):
    return _call("memmove", 0, (0, 0, 64))


@intrinsic
def _poll(typingctx, fds, nfds, timeout_ms):
    return _call("poll", 32, (0, 64, 32))


@intrinsic
def _clock_gettime(typingctx, clock, timespec):
    return _call("clock_gettime", 32, (32, 0))


@intrinsic
def _errno_location(typingctx):
    return _call("__errno_location", 0, ())


@intrinsic
def _load_i32(typingctx, address):
    """The int32 at ``address``."""
    def codegen(context, builder, signature, values):
        ptr = builder.inttoptr(values[0], ir.IntType(32).as_pointer())
        return builder.sext(builder.load(ptr), ir.IntType(64))
    return types.int64(types.int64), codegen


@numba.njit(cache=True, nogil=True)
def errno() -> int:
    return _load_i32(_errno_location())


@numba.njit(cache=True, nogil=True)
def monotonic(scratch) -> float:
    """``time.monotonic()`` (the same clock), from compiled code; ``scratch``: 2 int64."""
    _clock_gettime(CLOCK_MONOTONIC, scratch.ctypes.data)
    return scratch[0] + scratch[1] * 1e-9


@numba.njit(cache=True, nogil=True)
def wait(pollfds, timeout):
    """poll(2) on ``pollfds`` (struct pollfd packed in int64: fd | events << 32) for up to
    ``timeout`` seconds; returns a bitmask of the readable ones (bit i: pollfds[i])."""
    ms = max(0, min(int(timeout * 1000.0 + 0.999), 1 << 30))
    if _poll(pollfds.ctypes.data, len(pollfds), ms) <= 0:
        return 0
    ready = 0
    for i in range(len(pollfds)):
        if (pollfds[i] >> 48) & 0xFFFF:
            ready |= 1 << i
        pollfds[i] &= (1 << 48) - 1  # clear revents
    return ready


def pollfds(*fds: int) -> np.ndarray:
    """The ``pollfds`` of :func:`wait`: each descriptor, waiting to read."""
    return np.array([fd | (POLLIN << 32) for fd in fds], np.int64)


# -- one socket ------------------------------------------------------------------------------

class Io(NamedTuple):
    """What the compiled calls need of one socket (built by :class:`NativeSocket`)."""

    fd: int
    size: int  # bytes per datagram
    off: int  # where a datagram starts in its row
    state: np.ndarray  # int64: mode, the GRO train being handed out, destination length
    iov: np.ndarray  # int64 (capacity, 2): struct iovec, for receiving
    msgs: np.ndarray  # int64 (capacity, 8): struct mmsghdr (row 0 as a msghdr too), receiving
    send_iov: np.ndarray  # the same, for sending (a thread may send while another receives)
    send_msgs: np.ndarray
    send_cmsg: np.ndarray  # int64 (3): the control message sent (UDP_SEGMENT)
    cmsg: np.ndarray  # int64 (3): a control message received (UDP_GRO)
    names: np.ndarray  # uint8 (capacity, NAME_LEN): source addresses of what was received
    lengths: np.ndarray  # int64 (capacity): full lengths of what was received
    staging: np.ndarray  # uint8: a GRO train
    train_name: np.ndarray  # uint8 (NAME_LEN): the source of the train being handed out
    dest: np.ndarray  # uint8 (NAME_LEN): the sockaddr sends go to (if state's length is > 0)


class NativeSocket:
    """A non-blocking UDP socket's batch calls for compiled code, in the best mode the kernel
    offers (or ``mode``: ``"offload"`` or ``"mmsg"``). ``size`` is the datagram length it
    sends, ``off`` where a datagram starts in a row. Sends go to ``dest`` (a Python socket
    address), or to the connected peer."""

    def __init__(self, sock: socket.socket, size: int, off: int = 0, mode: str | None = None,
                 dest: tuple | None = None, capacity: int = 1024):
        from pktio.udp import sockaddr

        mode = mode or best_mode(sock)
        if mode not in ("offload", "mmsg"):
            raise ValueError(f"compiled batches need the offload or mmsg mode, not {mode!r}")
        if mode == "offload":
            sock.setsockopt(SOL_UDP, UDP_GRO, 1)
        state = np.zeros(10, np.int64)
        state[_MAX_TRAIN] = _LONG_TRAIN
        state[_SEND_MODE] = state[_RECV_MODE] = OFFLOAD if mode == "offload" else MMSG
        dest_raw = np.zeros(NAME_LEN, np.uint8)
        if dest is not None:
            raw = sockaddr(sock.family, dest)
            dest_raw[:len(raw)] = np.frombuffer(raw, np.uint8)
            state[_DEST_LEN] = len(raw)
        self.sock = sock
        self.io = Io(sock.fileno(), size, off, state, np.zeros((capacity, 2), np.int64),
                     np.zeros((capacity, 8), np.int64), np.zeros((capacity, 2), np.int64),
                     np.zeros((capacity, 8), np.int64), np.zeros(3, np.int64),
                     np.zeros(3, np.int64),
                     np.zeros((capacity, NAME_LEN), np.uint8), np.zeros(capacity, np.int64),
                     np.zeros(_STAGING, np.uint8), np.zeros(NAME_LEN, np.uint8), dest_raw)

    @property
    def mode(self) -> str:
        """The mode sends use now (a device that refuses segmentation turns offload to mmsg)."""
        return "offload" if self.io.state[_SEND_MODE] == OFFLOAD else "mmsg"

    def one_by_one(self) -> None:
        """Receive datagram by datagram from now on (no GRO trains): a group of sockets
        steered by a field of each datagram (:mod:`pktio.reuseport`) needs that."""
        if self.io.state[_RECV_MODE] == OFFLOAD:
            self.sock.setsockopt(SOL_UDP, UDP_GRO, 0)
            self.io.state[_RECV_MODE] = MMSG

    @property
    def lengths(self) -> np.ndarray:
        """Full lengths of what the last receive returned."""
        return self.io.lengths

    @property
    def names(self) -> np.ndarray:
        """Source addresses (sockaddr) of what the last receive returned."""
        return self.io.names

    def send(self, rows: np.ndarray, dest: bytes | None = None) -> int:
        """Each row's datagram, from Python (see :func:`send_rows`); to the sockaddr ``dest``
        instead of the socket's usual destination, if given."""
        if dest is None:
            return _checked(send_rows(self.io, rows, 0, len(rows)))
        usual, usual_len = self.io.dest.copy(), int(self.io.state[_DEST_LEN])
        self.io.dest[:len(dest)] = np.frombuffer(dest, np.uint8)
        self.io.state[_DEST_LEN] = len(dest)
        try:
            return _checked(send_rows(self.io, rows, 0, len(rows)))
        finally:
            self.io.dest[:] = usual
            self.io.state[_DEST_LEN] = usual_len

    def recv(self, rows: np.ndarray) -> int:
        """Datagrams into rows, from Python (see :func:`recv_rows`)."""
        return _checked(recv_rows(self.io, rows, len(rows)))


def _checked(result: int) -> int:
    if result < 0:
        import os

        raise OSError(-result, os.strerror(-result))
    return result


@numba.njit(cache=True, nogil=True)
def _row_address(rows, i, off):
    return rows.ctypes.data + i * rows.strides[0] + off


@numba.njit(cache=True, nogil=True)
def copy_bytes(dst, dst_at, src, src_at, n):
    """``dst[dst_at:dst_at + n] = src[src_at:src_at + n]`` for 1-D uint8 arrays, through libc's
    ``memmove`` where both are contiguous: a byte loop (which LLVM does not turn into a memcpy,
    as it cannot rule out that the arrays overlap) took 250 ns for a frame's 324 bytes, numba's
    slice assignment 105, ``memmove`` about 7. The benchmark's reflector copies every frame out
    of its GRO trains: one shard's allreduce against it went from 98 to 171-193 M float32/s on
    the 2-core machine. Strided views are copied byte by byte. The range must lie within both
    arrays (nothing checks it, as with the loop)."""
    if n <= 0:
        return
    if dst.strides[0] == 1 and src.strides[0] == 1 and dst.itemsize == 1 and src.itemsize == 1:
        _memmove(dst.ctypes.data + dst_at, src.ctypes.data + src_at, n)
        return
    for i in range(n):
        dst[dst_at + i] = src[src_at + i]


@numba.njit(cache=True, nogil=True)
def send_rows(io, rows, lo, hi):
    """Send ``rows[lo:hi]``, each row's ``io.size`` bytes from column ``io.off`` one datagram
    (rows may be any rows of a 2-D uint8 array whose columns are contiguous). Returns how many
    the kernel took (a full socket buffer, or an ICMP error pending from an earlier datagram,
    loses the rest: loss, which the protocol recovers from), or -errno for any other error."""
    state, iov, msgs = io.state, io.send_iov, io.send_msgs
    dest = io.dest.ctypes.data if state[_DEST_LEN] else 0
    sent = lo
    while sent < hi:
        if state[_SEND_MODE] == OFFLOAD:
            step = min(state[_MAX_TRAIN], MAX_UDP_PAYLOAD // io.size, hi - sent, len(iov))
            vectors = step
            if rows.strides[0] == io.size:  # back to back: one I/O vector for the train
                vectors = 1
                iov[0, 0], iov[0, 1] = _row_address(rows, sent, io.off), io.size * step
            else:
                for i in range(step):
                    iov[i, 0] = _row_address(rows, sent + i, io.off)
                    iov[i, 1] = io.size
            io.send_cmsg[0] = 18  # CMSG_LEN(2)
            io.send_cmsg[1] = _CMSG_SEGMENT
            io.send_cmsg[2] = io.size
            hdr = msgs[0]
            hdr[_NAME], hdr[_NAMELEN] = dest, state[_DEST_LEN]
            hdr[_IOV], hdr[_IOVLEN] = iov.ctypes.data, vectors
            hdr[_CONTROL], hdr[_CONTROLLEN], hdr[_FLAGS] = io.send_cmsg.ctypes.data, 24, 0
            if step == 1:  # one datagram: no segmentation asked for
                hdr[_CONTROL], hdr[_CONTROLLEN] = 0, 0
            if _sendmsg(io.fd, msgs.ctypes.data, MSG_DONTWAIT) >= 0:
                sent += step
                continue
        else:
            step = min(hi - sent, len(iov))
            for i in range(step):
                iov[i, 0] = _row_address(rows, sent + i, io.off)
                iov[i, 1] = io.size
                hdr = msgs[i]
                hdr[_NAME], hdr[_NAMELEN] = dest, state[_DEST_LEN]
                hdr[_IOV], hdr[_IOVLEN] = iov.ctypes.data + 16 * i, 1
                hdr[_CONTROL], hdr[_CONTROLLEN], hdr[_FLAGS] = 0, 0, 0
            n = _sendmmsg(io.fd, msgs.ctypes.data, step, MSG_DONTWAIT)
            if n > 0:
                sent += n
                continue
            if n == 0:
                break
        err = errno()
        if err == EINTR:
            continue
        if err == EAGAIN or err == ECONNREFUSED:
            break
        if err == EINVAL and state[_SEND_MODE] == OFFLOAD and state[_MAX_TRAIN] > MAX_SEGMENTS:
            state[_MAX_TRAIN] = MAX_SEGMENTS  # an older kernel: for good
            continue
        if err == EIO and state[_SEND_MODE] == OFFLOAD:
            state[_SEND_MODE] = MMSG  # the device cannot checksum segments for us: for good
            continue
        return -err
    return sent - lo


@numba.njit(cache=True, nogil=True)
def recv_rows(io, rows, room):
    """Receive datagrams into ``rows[i, io.off:]`` (cut to the row) until ``room`` rows are
    filled or none is waiting; returns how many, or -errno. Their full lengths are in
    ``io.lengths``, their sources in ``io.names``. A call that fills every row may leave the
    rest of a GRO train behind, which polling the socket does not show: call again until one
    returns fewer than asked for."""
    room = min(room, len(io.lengths), len(rows))
    state = io.state
    width = rows.shape[1] - io.off
    got = 0
    if state[_RECV_MODE] == MMSG:
        iov, msgs = io.iov, io.msgs
        if (state[_PREPARED_ROWS] != _row_address(rows, 0, io.off)
                or state[_PREPARED_ROOM] != room or state[_PREPARED_STEP] != rows.strides[0]):
            # the headers point at the rows; the kernel only writes their lengths back
            for i in range(room):
                iov[i, 0] = _row_address(rows, i, io.off)
                iov[i, 1] = width
                hdr = msgs[i]
                hdr[_NAME] = io.names.ctypes.data + NAME_LEN * i
                hdr[_IOV], hdr[_IOVLEN] = iov.ctypes.data + 16 * i, 1
                hdr[_CONTROL], hdr[_CONTROLLEN], hdr[_FLAGS] = 0, 0, 0
            state[_PREPARED_ROWS] = _row_address(rows, 0, io.off)
            state[_PREPARED_ROOM], state[_PREPARED_STEP] = room, rows.strides[0]
        for i in range(room):
            msgs[i, _NAMELEN] = NAME_LEN
        while True:
            n = _recvmmsg(io.fd, msgs.ctypes.data, room, MSG_DONTWAIT | MSG_TRUNC, 0)
            if n >= 0:
                for i in range(n):
                    io.lengths[i] = msgs[i, _MSG_LEN] & 0xFFFFFFFF
                return n
            err = errno()
            if err == EAGAIN:
                return 0
            if err != EINTR and err != ECONNREFUSED:
                return -err
    staging = io.staging
    while got < room:
        start, end, seg = state[_TRAIN_START], state[_TRAIN_END], state[_TRAIN_SEG]
        if start == end:
            # Straight into the rows (one I/O vector per row: a train of datagrams of the
            # expected size lands one per row) while they can hold the largest train; else,
            # and for datagrams of another size, through the staging area.
            direct = room - got if room - got > MAX_UDP_PAYLOAD // io.size else 0
            if direct:
                for i in range(direct):
                    io.iov[i, 0] = _row_address(rows, got + i, io.off)
                    io.iov[i, 1] = io.size
            else:
                io.iov[0, 0], io.iov[0, 1] = staging.ctypes.data, len(staging)
            io.cmsg[0] = 0
            hdr = io.msgs[0]
            hdr[_NAME], hdr[_NAMELEN] = io.train_name.ctypes.data, NAME_LEN
            hdr[_IOV], hdr[_IOVLEN] = io.iov.ctypes.data, max(direct, 1)
            hdr[_CONTROL], hdr[_CONTROLLEN], hdr[_FLAGS] = io.cmsg.ctypes.data, 24, 0
            end = _recvmsg(io.fd, io.msgs.ctypes.data, MSG_DONTWAIT)
            if end < 0:
                err = errno()
                if err == EAGAIN:
                    break
                if err == EINTR or err == ECONNREFUSED:
                    continue
                return -err
            seg = end
            if hdr[_CONTROLLEN] >= 20 and io.cmsg[1] == _CMSG_GRO:
                seg = io.cmsg[2] & 0xFFFFFFFF
            start = 0
            if end == 0:  # an empty datagram is still one
                io.lengths[got] = 0
                copy_bytes(io.names[got], 0, io.train_name, 0, NAME_LEN)
                got += 1
                continue
            if direct and seg == io.size:
                k = -(-end // seg)  # the last one may be shorter
                for i in range(k):
                    io.lengths[got + i] = min(seg, end - i * seg)
                    copy_bytes(io.names[got + i], 0, io.train_name, 0, NAME_LEN)
                got += k
                continue
            if direct:  # another size: back into the staging area, handed out from there
                for i in range(-(-end // io.size)):
                    copy_bytes(staging, i * io.size, rows[got + i], io.off,
                               min(io.size, end - i * io.size))
        k = min((end - start) // seg, room - got)  # whole segments
        if k:
            w = min(seg, width)
            for i in range(k):
                copy_bytes(rows[got + i], io.off, staging, start + i * seg, w)
                io.lengths[got + i] = seg
                copy_bytes(io.names[got + i], 0, io.train_name, 0, NAME_LEN)
            start += k * seg
        else:  # the train's shorter last segment
            k, tail = 1, end - start
            copy_bytes(rows[got], io.off, staging, start, min(tail, width))
            io.lengths[got] = tail
            copy_bytes(io.names[got], 0, io.train_name, 0, NAME_LEN)
            start = end
        got += k
        state[_TRAIN_START], state[_TRAIN_END], state[_TRAIN_SEG] = start, end, seg
    return got

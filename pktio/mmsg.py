"""``sendmmsg`` and ``recvmmsg`` through ctypes: one system call for a batch of datagrams.

Python's socket module has neither. ctypes rather than a native module: nothing to compile at
install time, and the per-call work is one foreign call on arrays prepared once, whose message
headers and I/O vectors are numpy views of the same memory (filled with array operations, not a
Python loop per datagram).
"""

from __future__ import annotations

import ctypes
import errno
import os

import numpy as np

MSG_DONTWAIT = 0x40
MSG_TRUNC = 0x20  # in recv flags: a datagram's length is its full length, even if cut
NAME_LEN = 32  # room for a sockaddr_in or a sockaddr_in6


class _Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


class _Msghdr(ctypes.Structure):
    _fields_ = [("name", ctypes.c_void_p), ("namelen", ctypes.c_uint32),
                ("iov", ctypes.c_void_p), ("iovlen", ctypes.c_size_t),
                ("control", ctypes.c_void_p), ("controllen", ctypes.c_size_t),
                ("flags", ctypes.c_int)]


class _Mmsghdr(ctypes.Structure):
    _fields_ = [("hdr", _Msghdr), ("len", ctypes.c_uint)]


_IOVEC = np.dtype(_Iovec)
_MMSGHDR = np.dtype(_Mmsghdr)


def _libc():
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.sendmmsg, libc.recvmmsg
    except (OSError, AttributeError):
        return None


_CALLS = _libc()
if _CALLS is not None:
    for _fn in _CALLS:
        _fn.restype = ctypes.c_int
    _CALLS[0].argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int]
    _CALLS[1].argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int,
                          ctypes.c_void_p]


def available() -> bool:
    return _CALLS is not None


class Mmsg:
    """Message headers for up to ``capacity`` datagrams of one socket, each with one I/O
    vector and (for receiving) room for its source address."""

    def __init__(self, fd: int, capacity: int):
        if _CALLS is None:
            raise OSError(errno.ENOSYS, "sendmmsg/recvmmsg are not available")
        self.fd = fd
        self.capacity = capacity
        self.iov = np.zeros(capacity, _IOVEC)
        self.msgs = np.zeros(capacity, _MMSGHDR)
        self.names = np.zeros((capacity, NAME_LEN), np.uint8)
        hdr = self.msgs["hdr"]
        hdr["iov"] = self.iov.ctypes.data + np.arange(capacity) * _IOVEC.itemsize
        hdr["iovlen"] = 1
        self._name_ptrs = self.names.ctypes.data + np.arange(capacity) * NAME_LEN
        self._dest = np.zeros(NAME_LEN, np.uint8)

    def _point(self, rows: np.ndarray, n: int) -> None:
        """Each of the first n messages gets one row of ``rows`` (a 2-D uint8 array whose rows
        are contiguous) as its buffer."""
        self.iov["base"][:n] = rows.ctypes.data + np.arange(n) * rows.strides[0]
        self.iov["len"][:n] = rows.shape[1]

    def send(self, rows: np.ndarray, dest: bytes | None) -> int:
        """Send each row of ``rows`` as one datagram (to the sockaddr ``dest``, or the
        connected peer); returns how many the kernel took. Raises OSError like socket.send."""
        n = min(len(rows), self.capacity)
        self._point(rows, n)
        hdr = self.msgs["hdr"]
        if dest is None:
            hdr["name"][:n] = 0
            hdr["namelen"][:n] = 0
        else:
            self._dest[:len(dest)] = np.frombuffer(dest, np.uint8)
            hdr["name"][:n] = self._dest.ctypes.data
            hdr["namelen"][:n] = len(dest)
        sent = _CALLS[0](self.fd, self.msgs.ctypes.data, n, MSG_DONTWAIT)
        if sent < 0:
            _raise()
        return sent

    def recv(self, rows: np.ndarray) -> int:
        """Receive up to len(rows) datagrams, one per row (truncated to the row); returns how
        many. Their lengths are in ``lengths`` and their sources in ``names``."""
        n = min(len(rows), self.capacity)
        self._point(rows, n)
        hdr = self.msgs["hdr"]
        hdr["name"][:n] = self._name_ptrs[:n]
        hdr["namelen"][:n] = NAME_LEN
        got = _CALLS[1](self.fd, self.msgs.ctypes.data, n, MSG_DONTWAIT | MSG_TRUNC, None)
        if got < 0:
            _raise()
        return got

    @property
    def lengths(self) -> np.ndarray:
        """Full lengths of the datagrams the last :meth:`recv` returned (a datagram longer
        than its row was cut to the row)."""
        return self.msgs["len"]


def _raise():
    err = ctypes.get_errno()
    raise OSError(err, os.strerror(err))

"""AF_XDP: frames in and out of one queue of a network interface through memory shared with the
kernel (the UMEM), past the kernel's network stack (``Documentation/networking/af_xdp.rst``).

* :class:`XdpSteering` loads an XDP program on the interface that hands the frames of one UDP
  port over IPv4 (a worker's SA-ATP frames) to the AF_XDP socket of the queue they arrived on,
  and passes every other frame (ARP, TCP, other UDP traffic: the job's rendezvous and fallback
  collectives) to the kernel's stack as if nothing were there. The program is 21 eBPF
  instructions, assembled here (no compiler needed at run time); it is attached through a BPF
  link, so it goes when the link's descriptor is closed or the process ends.
* :class:`XdpSocket` is the socket of one queue: its UMEM is split into frames it gives the
  kernel to receive into (the fill ring) and frames it sends from (the transmit ring, given
  back through the completion ring). ``mode`` is ``"copy"`` (any driver: veth, Mininet) or
  ``"zerocopy"`` (NIC drivers that support it: the frames are DMAed to and from the UMEM).

Everything here needs root (CAP_NET_ADMIN, CAP_BPF) and a kernel with AF_XDP (4.18, BPF links
5.9); :func:`available` says whether this process may use them. Ring indices are read and
written from Python between calls that move the frames, so the loads and stores the kernel
pairs with them stay in program order (x86 and arm64 need no more for the single producer,
single consumer rings here).
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import socket
import struct

import numba
import numpy as np

AF_XDP, SOL_XDP = 44, 283
XDP_MMAP_OFFSETS, XDP_RX_RING, XDP_TX_RING, XDP_UMEM_REG = 1, 2, 3, 4
XDP_UMEM_FILL_RING, XDP_UMEM_COMPLETION_RING = 5, 6
XDP_COPY, XDP_ZEROCOPY, XDP_USE_NEED_WAKEUP = 1 << 1, 1 << 2, 1 << 3
XDP_RING_NEED_WAKEUP = 1
_PGOFF = {"rx": 0, "tx": 0x80000000, "fill": 0x100000000, "completion": 0x180000000}
_BPF_SYSCALL = {"x86_64": 321, "aarch64": 280}
BPF_MAP_CREATE, BPF_MAP_UPDATE_ELEM, BPF_PROG_LOAD, BPF_LINK_CREATE = 0, 2, 5, 28
BPF_MAP_TYPE_XSKMAP, BPF_PROG_TYPE_XDP, BPF_XDP = 17, 6, 37
XDP_FLAGS_SKB_MODE, XDP_FLAGS_DRV_MODE = 1 << 1, 1 << 2
XDP_PASS = 2
_BPF_FUNC_REDIRECT_MAP = 51
_QUEUES = 64  # queues the steering program can hand frames to
_FRAME = 2048  # bytes per UMEM frame

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.bind.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint32]


def _check(result: int) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return result


def _bpf(cmd: int, attr: bytes) -> int:
    """The bpf(2) system call with ``attr`` (a union bpf_attr's leading bytes)."""
    number = _BPF_SYSCALL.get(os.uname().machine)
    if number is None:
        raise OSError(errno.ENOSYS, "bpf(2): unknown system call number on this machine")
    buf = ctypes.create_string_buffer(attr.ljust(128, b"\0"))
    return _check(_libc.syscall(number, cmd, buf, 128))


def _insn(code: int, dst: int = 0, src: int = 0, off: int = 0, imm: int = 0) -> bytes:
    return struct.pack("<BBhi", code, (src << 4) | dst, off, imm)


def steering_program(map_fd: int, udp_port: int) -> bytes:
    """The XDP program (see the module doc): frames of IPv4 (no options) and UDP to
    ``udp_port`` go to the socket in slot ``rx_queue_index`` of the XSK map ``map_fd``, or to
    the kernel's stack if there is none; every other frame goes to the kernel's stack."""
    ldx_w, ldx_h, ldx_b = 0x61, 0x69, 0x71
    mov_x, mov_k, add_k = 0xBF, 0xB7, 0x07
    jgt_x, jne_k, call, exit_ = 0x2D, 0x55, 0x85, 0x95
    ld_imm64, pseudo_map_fd = 0x18, 1
    port = struct.unpack("<H", struct.pack(">H", udp_port))[0]  # as a load reads it
    body = [
        _insn(ldx_w, 2, 1, 0),  # r2 = ctx->data
        _insn(ldx_w, 3, 1, 4),  # r3 = ctx->data_end
        _insn(mov_x, 4, 2),
        _insn(add_k, 4, imm=42),  # Ethernet, IPv4 and UDP headers
        _insn(jgt_x, 4, 3, off=14),  # shorter: pass
        _insn(ldx_h, 5, 2, 12),
        _insn(jne_k, 5, off=12, imm=0x0008),  # EtherType IPv4 (read little-endian)
        _insn(ldx_b, 5, 2, 14),
        _insn(jne_k, 5, off=10, imm=0x45),  # version 4, no options
        _insn(ldx_b, 5, 2, 23),
        _insn(jne_k, 5, off=8, imm=17),  # UDP
        _insn(ldx_h, 5, 2, 36),
        _insn(jne_k, 5, off=6, imm=port),  # our port
        _insn(ldx_w, 2, 1, 16),  # r2 = ctx->rx_queue_index
        _insn(ld_imm64, 1, pseudo_map_fd, imm=map_fd), _insn(0),  # r1 = the XSK map
        _insn(mov_k, 3, imm=XDP_PASS),  # no socket in the slot: pass
        _insn(call, imm=_BPF_FUNC_REDIRECT_MAP),
        _insn(exit_),
        _insn(mov_k, 0, imm=XDP_PASS),  # pass:
        _insn(exit_),
    ]
    return b"".join(body)


class XdpSteering:
    """The steering program on interface ``ifindex`` for UDP port ``udp_port`` (module doc).
    ``skb``: attach in generic mode (any driver) instead of the driver's own."""

    def __init__(self, ifindex: int, udp_port: int, skb: bool = False):
        self.map_fd = _bpf(BPF_MAP_CREATE, struct.pack("IIIII", BPF_MAP_TYPE_XSKMAP, 4, 4,
                                                       _QUEUES, 0))
        self.prog_fd = self.link_fd = -1
        try:
            program = steering_program(self.map_fd, udp_port)
            insns = ctypes.create_string_buffer(program)
            license_ = ctypes.create_string_buffer(b"GPL")
            log = ctypes.create_string_buffer(1 << 16)
            attr = struct.pack("IIQQIIQII16sII", BPF_PROG_TYPE_XDP, len(program) // 8,
                               ctypes.addressof(insns), ctypes.addressof(license_), 1,
                               len(log), ctypes.addressof(log), 0, 0, b"sa_atp_steer", 0,
                               BPF_XDP)
            try:
                self.prog_fd = _bpf(BPF_PROG_LOAD, attr)
            except OSError as exc:
                raise OSError(exc.errno, f"the verifier refused the steering program: "
                                         f"{log.value.decode(errors='replace')}") from None
            flags = XDP_FLAGS_SKB_MODE if skb else XDP_FLAGS_DRV_MODE
            self.link_fd = _bpf(BPF_LINK_CREATE, struct.pack("IIII", self.prog_fd, ifindex,
                                                             BPF_XDP, flags))
        except BaseException:
            self.close()
            raise

    def attach(self, queue: int, xsk_fd: int) -> None:
        """Frames that arrive on ``queue`` go to the AF_XDP socket ``xsk_fd``."""
        key, value = ctypes.c_uint32(queue), ctypes.c_uint32(xsk_fd)
        _bpf(BPF_MAP_UPDATE_ELEM, struct.pack("IIQQQ", self.map_fd, 0, ctypes.addressof(key),
                                              ctypes.addressof(value), 0))

    def close(self) -> None:
        for fd in (self.link_fd, self.prog_fd, self.map_fd):
            if fd >= 0:
                os.close(fd)
        self.link_fd = self.prog_fd = self.map_fd = -1


class _Ring:
    """One of a socket's four rings, mapped: producer and consumer indices and the entries
    (``dtype``: a descriptor, or a UMEM address)."""

    def __init__(self, fd: int, which: str, offsets: tuple[int, int, int, int], size: int,
                 dtype: np.dtype):
        producer, consumer, desc, flags = offsets
        self.map = mmap.mmap(fd, desc + size * dtype.itemsize, mmap.MAP_SHARED,
                             mmap.PROT_READ | mmap.PROT_WRITE, offset=_PGOFF[which])
        self.producer = np.frombuffer(self.map, np.uint32, 1, producer)
        self.consumer = np.frombuffer(self.map, np.uint32, 1, consumer)
        self.flags = np.frombuffer(self.map, np.uint32, 1, flags)
        self.entries = np.frombuffer(self.map, dtype, size, desc)
        self.mask = size - 1

    def close(self) -> None:
        self.producer = self.consumer = self.flags = self.entries = None  # views of the map
        self.map.close()


_DESC = np.dtype([("addr", np.uint64), ("len", np.uint32), ("options", np.uint32)])


class XdpSocket:
    """An AF_XDP socket on queue ``queue`` of interface ``ifindex`` (module doc), with
    ``frames`` UMEM frames (half to receive into, half to send from) and rings of as many
    entries."""

    def __init__(self, ifindex: int, queue: int = 0, mode: str = "copy", frames: int = 4096):
        if mode not in ("copy", "zerocopy"):
            raise ValueError(f"mode is copy or zerocopy, not {mode!r}")
        self.sock = socket.socket(AF_XDP, socket.SOCK_RAW, 0)
        self.umem = mmap.mmap(-1, frames * _FRAME, mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)
        self.data = np.frombuffer(self.umem, np.uint8)
        size = frames // 2
        fd = self.sock.fileno()
        self.sock.setsockopt(SOL_XDP, XDP_UMEM_REG, struct.pack(
            "QQIIII", self.data.ctypes.data, len(self.data), _FRAME, 0, 0, 0))
        for option in (XDP_UMEM_FILL_RING, XDP_UMEM_COMPLETION_RING, XDP_RX_RING, XDP_TX_RING):
            self.sock.setsockopt(SOL_XDP, option, struct.pack("I", size))
        offsets = struct.unpack("16Q", self.sock.getsockopt(SOL_XDP, XDP_MMAP_OFFSETS, 128))
        rx, tx, fill, completion = (offsets[i:i + 4] for i in range(0, 16, 4))
        self.rx = _Ring(fd, "rx", rx, size, _DESC)
        self.tx = _Ring(fd, "tx", tx, size, _DESC)
        self.fill = _Ring(fd, "fill", fill, size, np.dtype(np.uint64))
        self.completion = _Ring(fd, "completion", completion, size, np.dtype(np.uint64))
        # frames 0 .. size - 1 receive, size .. 2 size - 1 send
        self.fill.entries[:] = np.arange(size, dtype=np.uint64) * _FRAME
        self.fill.producer[0] = size
        self.free = list(range(size * _FRAME, 2 * size * _FRAME, _FRAME))  # to send from
        flags = (XDP_ZEROCOPY if mode == "zerocopy" else XDP_COPY) | XDP_USE_NEED_WAKEUP
        address = struct.pack("HHIII", AF_XDP, flags, ifindex, queue, 0)
        _check(_libc.bind(fd, address, len(address)))
        self.mode = mode

    def fileno(self) -> int:
        return self.sock.fileno()

    def recv(self, rows: np.ndarray) -> np.ndarray:
        """Frames into the rows of ``rows`` (cut to a row), until it is full or none is waiting;
        returns their full lengths. Their UMEM frames go back to the fill ring."""
        rx, fill = self.rx, self.fill
        start = int(rx.consumer[0])
        n = min((int(rx.producer[0]) - start) & 0xFFFFFFFF, len(rows))
        if not n:
            return np.zeros(0, np.int64)
        at = (start + np.arange(n)) & rx.mask
        addrs, lengths = rx.entries["addr"][at], rx.entries["len"][at].astype(np.int64)
        _gather(self.data, addrs, lengths, rows)
        rx.consumer[0] = (start + n) & 0xFFFFFFFF
        put = int(fill.producer[0])
        fill.entries[(put + np.arange(n)) & fill.mask] = addrs & ~np.uint64(_FRAME - 1)
        fill.producer[0] = (put + n) & 0xFFFFFFFF
        return lengths

    def send(self, rows: np.ndarray) -> int:
        """Each row as one frame; returns how many went into the transmit ring (a full ring
        loses the rest: loss, which the protocol recovers from)."""
        self._reclaim()
        tx = self.tx
        n = min(len(rows), len(self.free))
        if n:
            addrs = np.array(self.free[-n:], np.uint64)
            del self.free[-n:]
            _scatter(self.data, addrs, rows[:n])
            put = int(tx.producer[0])
            at = (put + np.arange(n)) & tx.mask
            tx.entries["addr"][at] = addrs
            tx.entries["len"][at] = rows.shape[1]
            tx.entries["options"][at] = 0
            tx.producer[0] = (put + n) & 0xFFFFFFFF
        if n or tx.flags[0] & XDP_RING_NEED_WAKEUP:
            try:  # the kernel sends what the ring holds
                self.sock.send(b"", socket.MSG_DONTWAIT)
            except (BlockingIOError, OSError):
                pass
        return n

    def _reclaim(self) -> None:
        completion = self.completion
        start = int(completion.consumer[0])
        n = (int(completion.producer[0]) - start) & 0xFFFFFFFF
        if n:
            at = (start + np.arange(n)) & completion.mask
            self.free.extend(completion.entries[at].tolist())
            completion.consumer[0] = (start + n) & 0xFFFFFFFF

    def close(self) -> None:
        for ring in (self.rx, self.tx, self.fill, self.completion):
            ring.close()
        self.sock.close()
        self.data = None
        self.umem.close()


@numba.njit(cache=True, nogil=True)
def _gather(data, addrs, lengths, rows):
    for i in range(len(addrs)):
        n = min(lengths[i], rows.shape[1])
        for b in range(n):
            rows[i, b] = data[addrs[i] + b]


@numba.njit(cache=True, nogil=True)
def _scatter(data, addrs, rows):
    for i in range(len(addrs)):
        for b in range(rows.shape[1]):
            data[addrs[i] + b] = rows[i, b]


def available() -> bool:
    """Whether this process may open AF_XDP sockets and load XDP programs (root, a kernel
    with both)."""
    if os.geteuid() != 0 or os.uname().machine not in _BPF_SYSCALL:
        return False
    try:
        socket.socket(AF_XDP, socket.SOCK_RAW, 0).close()
    except OSError:
        return False
    return True

"""A group of UDP sockets on one address, among which the kernel picks the one that receives a
datagram by a 16-bit field of the datagram, modulo the group's size (``SO_REUSEPORT`` with a
classic BPF program, ``SO_ATTACH_REUSEPORT_CBPF``, Linux 4.5).

The program runs for every datagram (a GRO train goes whole to the socket its first datagram
picks), at socket lookup, before any copy: so the shards of a worker (or of the benchmark's
reflector) each get the datagrams of their slots, in order, with no thread handing frames to
another. A datagram too short for the field goes where the kernel's hash sends it. Sockets of
a group must belong to processes of the same user; the kernel numbers them in the order they
bound, and the program's result picks by that number.
"""

from __future__ import annotations

import socket
import struct

SO_ATTACH_REUSEPORT_CBPF = 51
# classic BPF (linux/filter.h): load a half-word at an absolute offset, A %= k, return A
_LD_H_ABS, _ALU_MOD_K, _RET_A = 0x28, 0x94, 0x16
_INSN = struct.Struct("HBBI")


def reuseport_socket(family: int = socket.AF_INET) -> socket.socket:
    """A UDP socket that may join a group on the address it binds."""
    sock = socket.socket(family, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    return sock


def steer_by_field(sock: socket.socket, offset: int, members: int) -> None:
    """Make ``sock``'s group deliver each datagram to member ``field mod members``, where
    ``field`` is the big-endian 16-bit value at byte ``offset`` of the UDP payload. Raises
    OSError where the kernel refuses (the group then spreads datagrams by their addresses)."""
    program = b"".join([_INSN.pack(_LD_H_ABS, 0, 0, offset),
                        _INSN.pack(_ALU_MOD_K, 0, 0, members),
                        _INSN.pack(_RET_A, 0, 0, 0)])
    import ctypes

    buf = ctypes.create_string_buffer(program)
    fprog = struct.pack("HL", 3, ctypes.addressof(buf))  # struct sock_fprog
    sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, fprog)

"""The hash / checksum algorithms of bmv2's ``calculations``, by bmv2 name.

Each function takes the calculation's input bytes and returns the unsigned result bmv2 computes.
These are the algorithms p4c's v1model back end can emit (``HashAlgorithm.random`` has no bmv2
implementation, so bmv2 refuses such a program and so do we).  ``crc16`` is CRC-16/ARC and ``crc32``
the Ethernet CRC-32; the ``*_custom`` variants use bmv2's default configuration, which only bmv2's
Thrift API can change.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable


def _crc16_arc_table() -> list[int]:
    # CRC-16/ARC is the reflected form of polynomial 0x8005, i.e. 0xA001 shifted right.
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0xA001 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_CRC16_TABLE = _crc16_arc_table()


def crc16(data: bytes) -> int:
    """CRC-16/ARC: polynomial 0x8005, reflected input and output, initial value and final XOR 0."""
    crc = 0
    table = _CRC16_TABLE
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc


def csum16(data: bytes) -> int:
    """Internet checksum (RFC 1071): ones' complement of the ones' complement sum of 16-bit words;
    an odd trailing byte is padded with a zero byte, as bmv2 does."""
    if len(data) % 2:
        data += b"\x00"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def csum16_int(words: int) -> int:
    """:func:`csum16` of the bytes of ``words``, an integer made of whole 16-bit words: since
    2**16 = 1 (mod 0xFFFF), the ones' complement sum of the words is ``words % 0xFFFF``, except
    that a non-zero input summing to a multiple of 0xFFFF folds to 0xFFFF."""
    total = words % 0xFFFF
    if total == 0 and words:
        total = 0xFFFF
    return ~total & 0xFFFF


def identity(data: bytes) -> int:
    return int.from_bytes(data[:8], "big")


def xor16(data: bytes) -> int:
    """XOR of the big-endian 16-bit words; an odd trailing byte is the high byte of a last word."""
    if len(data) % 2:
        data += b"\x00"
    out = 0
    for word in struct.unpack(f"!{len(data) // 2}H", data):
        out ^= word
    return out


def crc32(data: bytes) -> int:
    return zlib.crc32(data)


ALGORITHMS: dict[str, Callable[[bytes], int]] = {
    "crc16": crc16,
    "crc16_custom": crc16,
    "crc32": crc32,
    "crc32_custom": crc32,
    "csum16": csum16,
    "identity": identity,
    "xor16": xor16,
}

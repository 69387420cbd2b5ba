"""Registers, counters, hashes, random, log_msg and truncate on tests/p4programs/stateful.p4.

Reference values are computed here: the CRC-16 by a bitwise (not table-driven) implementation,
the Internet checksum by scapy, CRC-32 by zlib."""

from __future__ import annotations

import logging
import random
import struct
import zlib

from scapy.utils import checksum as inet_checksum

from tests.softswitch.programs import switch

LANES = 64
SLOTS = 16
ETH_DST = bytes.fromhex("020000000009")
ETH_SRC = bytes.fromhex("0200000000aa")
INFO_FMT = "!HIHIHHIHBBI"
INFO_LEN = struct.calcsize(INFO_FMT)
OP_ADD, OP_PUT, OP_GET, OP_TRUNCATE = 0, 1, 2, 3


def crc16_arc_bitwise(data: bytes) -> int:
    crc = 0
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0xA001 if crc & 1 else crc >> 1
    return crc


def frame(slot: int, op: int, values: list[int], flags: int = 0) -> bytes:
    eth = ETH_DST + ETH_SRC + b"\x88\xb7"
    agg = struct.pack(f"!HBB{LANES}i", slot, op, flags, *values)
    return eth + agg + bytes(INFO_LEN)


def decode(data: bytes) -> tuple[list[int], tuple]:
    body = data[14:]
    values = list(struct.unpack(f"!{LANES}i", body[4:4 + 4 * LANES]))
    info = struct.unpack(INFO_FMT, body[4 + 4 * LANES:4 + 4 * LANES + INFO_LEN])
    return values, info


def wrap32(v: int) -> int:
    return ((v + (1 << 31)) % (1 << 32)) - (1 << 31)


def test_lanes_accumulate_with_int32_wraparound():
    sw = switch("stateful")
    rng = random.Random(7)
    contributions = [[rng.randint(-2**31, 2**31 - 1) for _ in range(LANES)] for _ in range(5)]
    total = [0] * LANES
    for vec in contributions:
        out = sw.process(3, frame(5, OP_ADD, vec))
        assert len(out) == 1 and out[0][0] == 1
        total = [wrap32(t + v) for t, v in zip(total, vec, strict=True)]
        assert decode(out[0][1])[0] == total
    # The registers hold the unsigned bit pattern of the int<32> sums.
    for lane in (0, 17, 63):
        name = f"IngressImpl.r{lane // 8}{lane % 8}"
        assert sw.registers[name].read(5) == total[lane] & 0xFFFFFFFF
    # Another slot is untouched; GET reads the stored sums back.
    assert decode(sw.process(3, frame(4, OP_GET, [1] * LANES))[0][1])[0] == [0] * LANES
    assert decode(sw.process(3, frame(5, OP_GET, [0] * LANES))[0][1])[0] == total


def test_put_overwrites_and_out_of_range_index_changes_nothing():
    sw = switch("stateful")
    sw.process(0, frame(2, OP_PUT, list(range(LANES))))
    for op in (OP_PUT, OP_ADD, OP_GET):
        sw.process(0, frame(SLOTS + 3, op, [99] * LANES))
    assert decode(sw.process(0, frame(2, OP_GET, [0] * LANES))[0][1])[0] == list(range(LANES))
    for lane in range(LANES):
        reg = sw.registers[f"IngressImpl.r{lane // 8}{lane % 8}"]
        assert reg.read_range() == [0, 0, lane] + [0] * (SLOTS - 3)


def test_control_plane_register_access():
    sw = switch("stateful")
    reg = sw.registers["IngressImpl.r12"]
    assert (reg.size, reg.bitwidth) == (SLOTS, 32)
    reg.write(9, -5)  # stored as the 32-bit pattern, as bmv2 stores it
    assert reg.read(9) == (1 << 32) - 5
    values, _ = decode(sw.process(0, frame(9, OP_GET, [0] * LANES))[0][1])
    assert values[10] == -5
    reg.reset()
    assert reg.read(9) == 0


def test_indirect_counter_counts_packets_and_ingress_bytes():
    sw = switch("stateful")
    ctr = sw.counters["IngressImpl.op_counter"]
    for op in (OP_ADD, OP_ADD, OP_GET):
        sw.process(0, frame(1, op, [0] * LANES))
    size = len(frame(1, 0, [0] * LANES))
    assert ctr.read(OP_ADD) == (2, 2 * size)
    assert ctr.read(OP_GET) == (1, size)
    assert ctr.read(OP_PUT) == (0, 0)
    ctr.write(OP_PUT, 5, 500)
    assert ctr.read(OP_PUT) == (5, 500)
    ctr.reset()
    assert ctr.read(OP_ADD) == (0, 0)


def test_sequence_register_counts_every_packet():
    sw = switch("stateful")
    seen = [decode(sw.process(0, frame(1, OP_GET, [0] * LANES))[0][1])[1][-1] for _ in range(4)]
    assert seen == [0, 1, 2, 3]
    assert sw.registers["IngressImpl.seen"].read(0) == 4


def test_hashes_match_reference_implementations():
    sw = switch("stateful")
    for slot, op, flags in [(0, 0, 0), (5, 2, 0x81), (0xBEEF, 1, 0xFF), (7, 0, 3)]:
        _, info = decode(sw.process(0, frame(slot, op, [0] * LANES, flags))[0][1])
        crc16, crc32, csum, ident, xor16, crc16c, crc32c, bounded, rnd, rnd_fixed, _ = info
        key16 = struct.pack("!HB", slot, op) + ETH_SRC
        assert crc16 == crc16_arc_bitwise(key16)
        assert crc32 == zlib.crc32(ETH_DST + struct.pack("!H", slot))
        assert csum == inet_checksum(ETH_SRC + struct.pack("!HB", slot, flags))
        assert ident == int.from_bytes(struct.pack("!HBB", slot, op, flags), "big")
        words = ETH_SRC + bytes([op, 0])
        expected_xor = 0
        for i in range(0, len(words), 2):
            expected_xor ^= int.from_bytes(words[i:i + 2], "big")
        assert xor16 == expected_xor
        assert crc16c == crc16_arc_bitwise(struct.pack("!H", slot))
        assert crc32c == zlib.crc32(struct.pack("!H", slot))
        assert bounded == crc16_arc_bitwise(key16) % 1000 + 100
        assert 10 <= rnd <= 20
        assert rnd_fixed == 7


def test_random_covers_its_range():
    sw = switch("stateful", seed=1)
    seen = {decode(sw.process(0, frame(1, OP_GET, [0] * LANES))[0][1])[1][8]
            for _ in range(200)}
    assert seen == set(range(10, 21))


def test_log_msg_and_truncate(caplog):
    sw = switch("stateful")
    with caplog.at_level(logging.INFO, logger="softswitch"):
        out = sw.process(0, frame(12, OP_TRUNCATE, [0] * LANES))
    assert "aggregate slot=12 op=3" in caplog.text
    full = frame(12, OP_TRUNCATE, [0] * LANES)
    assert len(out[0][1]) == 40
    assert out[0][1][:18] == full[:18]


def test_non_aggregation_frames_are_dropped():
    assert switch("stateful").process(0, b"\x00" * 12 + b"\x08\x00" + b"x" * 30) == []

"""Integer semantics on tests/p4programs/arith.p4: every output is recomputed here from the P4
definitions (two's-complement wrap, saturation, casts, slices...), for random inputs."""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.softswitch.programs import switch

IN_FMT = "!BBbbHIIB"
OUT_FMT = "!BBBBBbbbbhBBbBBBBBHBBIBBIIBHB6s"


def wrap(value: int, bits: int, signed: bool = False) -> int:
    value &= (1 << bits) - 1
    if signed and value >> (bits - 1):
        value -= 1 << bits
    return value


def clamp(value: int, lo: int, hi: int) -> int:
    return max(lo, min(hi, value))


def expected(a, b, sa, sb, w, x, y, n1, n2) -> tuple:
    return (
        wrap(a + b, 8), wrap(a - b, 8), wrap(a * b, 8), min(a + b, 255), max(a - b, 0),
        wrap(sa + sb, 8, True), wrap(sa - sb, 8, True), clamp(sa + sb, -128, 127),
        clamp(sa - sb, -128, 127), sa,
        wrap(a << n1, 8), a >> n2, sa >> n2, wrap(-a, 8), wrap(~a, 8), a & b, a | b, a ^ b,
        (a << 8) | b, ((a >> 4) << 4) | (b & 0xF), w & 0xFF, wrap(w + 0xFFFF0000, 32),
        (sa < sb) | (a < b) << 1 | (wrap(a, 8, True) < sb) << 2 | (sa >= 0) << 3,
        a if x > y else b, wrap((x << 4) | (x >> 28), 32), (x & 0xF0F0F0F0) ^ y,
        int(a == b or x != 0), wrap(w + a, 16),
        sa & 0xFF, wrap(x * y, 48).to_bytes(6, "big"),
    )


def run(a, b, sa, sb, w, x, y, n1, n2) -> tuple:
    eth = b"\x02" * 12 + b"\x88\xb8"
    inp = struct.pack(IN_FMT, a, b, sa, sb, w, x, y, (n1 << 4) | n2)
    out = switch("arith").process(5, eth + inp)
    assert len(out) == 1 and out[0][0] == 1
    frame = out[0][1]
    assert frame[:len(eth) + len(inp)] == eth + inp
    return struct.unpack(OUT_FMT, frame[len(eth) + len(inp):])


u8 = st.integers(0, 255)
s8 = st.integers(-128, 127)
u32 = st.integers(0, (1 << 32) - 1)


@settings(max_examples=150, deadline=None)
@given(u8, u8, s8, s8, st.integers(0, 0xFFFF), u32, u32, st.integers(0, 15),
       st.integers(0, 15))
def test_random_inputs(a, b, sa, sb, w, x, y, n1, n2):
    assert run(a, b, sa, sb, w, x, y, n1, n2) == expected(a, b, sa, sb, w, x, y, n1, n2)


def test_boundaries():
    for args in [(255, 1, 127, 1, 0xFFFF, 0xFFFFFFFF, 0, 7, 7),
                 (0, 255, -128, 1, 0, 0, 0xFFFFFFFF, 8, 15),
                 (128, 128, -128, -128, 0x8000, 7, 7, 15, 0),
                 (1, 1, -1, -1, 1, 10, 10, 0, 1)]:
        assert run(*args) == expected(*args), args

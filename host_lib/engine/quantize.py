"""Block quantization of float32 gradients to int32 lanes whose n-worker sum cannot overflow.

The scheme and its error bound are specified in docs/protocol.md §5. In short, for a job of n
workers and a block of K = 64 values quantized with the agreed exponent E
(``scale = E + EXP_BIAS``):

    Qmax = 2^j with j = floor(log2((2^31 - 1) / n)),   q = clamp(rint(x * 2^(j - E)), -Qmax, Qmax)

so any sum of n contributions fits int32. Qmax is a power of two so that ``x * 2^(j-E)`` is exact
in float32: the only rounding is the final rint, the kernels run in 8-wide float32 SIMD, and every
implementation (numpy, numba, torch on CUDA) produces bit-identical integers. When no contributor's
block exceeded 2^E, ``sum * 2^(E-j)`` is within ``n * 2^(E-j-1)`` of the exact sum (plus the final
rounding to float32).

The kernels are compiled with numba: a block's maximum, its exponent, the scaling and the rounding
take one pass over memory.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from protocol.constants import EXP_BIAS, EXP_NONE, EXP_NONFINITE, LANES

INT32_MAX = 2**31 - 1
DEFAULT_EXPONENT = 0  # E used for a block with no history: |x| <= 1
HEADROOM_BITS = 1  # predicted E = previous block exponent + headroom
MIN_EXPONENT = -149  # the smallest float32 denormal is 2^-149
MAX_EXPONENT = 128  # every finite float32 is below 2^128

_ABS_MASK = np.int32(0x7FFFFFFF)
_INF_BITS = 0x7F800000
_TWO23 = np.float32(2.0**23)


def qbits(n_workers: int) -> int:
    """j such that Qmax = 2^j is the largest power of two with n * Qmax <= 2^31 - 1."""
    if not 1 <= n_workers <= 32:
        raise ValueError(f"n_workers must be in 1..32, got {n_workers}")
    return (INT32_MAX // n_workers).bit_length() - 1


def num_blocks(length: int) -> int:
    return -(-length // LANES)


@numba.njit(cache=True, nogil=True)
def _exponent_of_max_bits(m):
    """Biased exponent e + EXP_BIAS of the smallest e with v <= 2^e, where m is the bit pattern
    of a non-negative float32 v (m = max |bits| of a block, so NaN/Inf compare highest)."""
    if m >= _INF_BITS:
        return EXP_NONFINITE
    if m == 0:
        return EXP_NONE
    biased = m >> 23
    if biased == 0:  # denormal: v = m * 2^-149
        frac, e = math.frexp(np.float64(m) * 2.0**-149)
        return e - (1 if frac == 0.5 else 0) + EXP_BIAS
    return biased - 127 + (1 if (m & 0x7FFFFF) != 0 else 0) + EXP_BIAS


@numba.njit(cache=True, nogil=True)
def quantize_block(x, xbits, start, scale, j, row):
    """Quantize the LANES values ``x[start:start + LANES]`` (``xbits``: the same memory as
    int32) with the biased ``scale`` into ``row`` (int32); returns the block's own biased
    exponent. The block maximum and the scaling share one loop: the scale is the agreed one, not
    the block's own exponent."""
    lim = np.float32(2.0**j)
    # x * 2^(j-E) as two exact power-of-two products: 2^(j-E) itself exceeds float32's
    # range for tiny blocks (E < j - 127), so such blocks are first lifted by 2^64.
    shift = j + EXP_BIAS - scale
    lift = np.float32(1.0)
    if shift > 127:
        lift = np.float32(2.0**64)
        shift -= 64
    f = np.float32(math.ldexp(1.0, shift)) if scale != 0 else np.float32(0)
    m = np.int32(0)
    first = np.uint64(start)  # unsigned: no negative-index check per value, which would keep
    for i in range(LANES):    # the loop from being vectorized
        at = first + np.uint64(i)
        bits = xbits[at] & _ABS_MASK  # integer max of |bits|; NaN/Inf sort highest
        m = bits if bits > m else m
        v = (x[at] * lift) * f  # exact: powers of two, no overflow or underflow
        v = min(max(v, -lim), lim)
        # Round half to even: adding and removing 2^23 (with v's sign) rounds |v| < 2^23 to
        # an integer in float32 arithmetic; larger floats are integers already.
        magic = np.float32(math.copysign(_TWO23, v))
        row[i] = np.int32(v if abs(v) >= _TWO23 else (v + magic) - magic)
    e = _exponent_of_max_bits(m)
    if e == EXP_NONFINITE:  # the lanes of a non-finite block are not meaningful: send zeros
        for i in range(LANES):
            row[i] = 0
    return e


@numba.njit(cache=True, nogil=True)
def _quantize(x, xbits, scales, j, out, exps):
    """Quantize x (float32, length nblocks*LANES) into out[nblocks, LANES] (int32) with one
    biased scale per block, writing each block's own exponent into exps."""
    for b in range(out.shape[0]):
        exps[b] = quantize_block(x, xbits, b * LANES, scales[b], j, out[b])


@numba.njit(cache=True, nogil=True)
def _dequantize(sums, scales, exps, j, divisors, out):
    """out = sums * 2^(E-j) / divisor, per block; NaN for blocks whose exponent is
    EXP_NONFINITE. out may be shorter than nblocks * LANES (the padding is dropped)."""
    n = out.shape[0]
    for b in range(sums.shape[0]):
        start = b * LANES
        stop = min(start + LANES, n)
        row = sums[b]
        if exps[b] == EXP_NONFINITE:
            for i in range(start, stop):
                out[i] = np.nan
            continue
        factor = math.ldexp(1.0, scales[b] - EXP_BIAS - j) / divisors[b]
        for i in range(stop - start):
            out[start + i] = np.float32(row[i] * factor)


@numba.njit(cache=True, nogil=True, parallel=True)
def _quantize_parallel(x, xbits, scales, j, out, exps, parts):
    per = -(-out.shape[0] // parts)
    for p in numba.prange(parts):
        lo, hi = p * per, min(out.shape[0], (p + 1) * per)
        if lo < hi:
            _quantize(x[lo * LANES:hi * LANES], xbits[lo * LANES:hi * LANES], scales[lo:hi], j,
                      out[lo:hi], exps[lo:hi])


@numba.njit(cache=True, nogil=True, parallel=True)
def _dequantize_parallel(sums, scales, exps, j, divisors, out, parts):
    per = -(-sums.shape[0] // parts)
    for p in numba.prange(parts):
        lo, hi = p * per, min(sums.shape[0], (p + 1) * per)
        if lo < hi:
            _dequantize(sums[lo:hi], scales[lo:hi], exps[lo:hi], j, divisors[lo:hi],
                        out[lo * LANES:min(hi * LANES, out.shape[0])])


PARALLEL_MIN_BLOCKS = 4096  # below this, threads cost more than they save


def block_exponents(x: np.ndarray) -> np.ndarray:
    """Each block's own biased exponent (what a worker reports in ``exp``)."""
    x = _flat_float32(x)
    nb = num_blocks(len(x))
    exps = np.empty(nb, np.uint16)
    BlockQuantizer(1)._run_quantize(x, np.zeros(nb, np.uint16), np.empty((nb, LANES), np.int32),
                                    exps)
    return exps


class BlockQuantizer:
    """Quantizer for a job of ``n_workers``; one per job and worker.

    ``threads`` > 1 splits large tensors across numba threads. The default, 1, suits training
    processes that already share the machine's cores; the kernels are memory-bound, so a second
    thread helps only where memory bandwidth is left over (see ``make bench``)."""

    def __init__(self, n_workers: int, threads: int = 1):
        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        self.n_workers = n_workers
        self.qbits = qbits(n_workers)
        self.threads = threads

    def quantize(self, x: np.ndarray, scales: np.ndarray, out: np.ndarray | None = None
                 ) -> tuple[np.ndarray, np.ndarray]:
        """Quantize flat float32 ``x`` with one biased scale per block.

        Returns ``(lanes, exps)``: int32 lanes of shape (nblocks, LANES), zero-padded, and each
        block's own biased exponent. A block whose exponent exceeds its scale has been clipped;
        the protocol repairs it (docs/protocol.md §5)."""
        x = _flat_float32(x)
        nb = num_blocks(len(x))
        scales = np.ascontiguousarray(scales, np.uint16)
        check_scales(scales, nb)
        if out is None:
            out = np.empty((nb, LANES), np.int32)
        exps = np.empty(nb, np.uint16)
        self._run_quantize(x, scales, out, exps)
        return out, exps

    def dequantize(self, sums: np.ndarray, scales: np.ndarray, exps: np.ndarray, length: int,
                   divisor=1.0, out: np.ndarray | None = None) -> np.ndarray:
        """float32 values of summed lanes, divided by ``divisor``: one number (e.g. n for an
        average) or one per block (the weight of the workers each block sums)."""
        sums = np.ascontiguousarray(sums, np.int32).reshape(-1, LANES)
        if not (sums.shape[0] - 1) * LANES < length <= sums.shape[0] * LANES:
            raise ValueError(f"{sums.shape[0]} blocks cannot hold {length} values")
        if out is None:
            out = np.empty(length, np.float32)
        # always a fresh writable array: one argument type, so one compiled specialization
        divisors = np.full(sums.shape[0], divisor, np.float64)
        args = (sums, np.ascontiguousarray(scales, np.uint16),
                np.ascontiguousarray(exps, np.uint16), self.qbits, divisors, out)
        if self._parallel(sums.shape[0]):
            _dequantize_parallel(*args, self.threads)
        else:
            _dequantize(*args)
        return out

    def error_bound(self, scales: np.ndarray) -> np.ndarray:
        """Per-block bound on |dequantized sum - exact sum| for unclipped blocks of n workers,
        before the final rounding to float32."""
        e = np.asarray(scales, np.int64) - EXP_BIAS - self.qbits - 1
        return self.n_workers * np.ldexp(1.0, e)

    def _parallel(self, nblocks: int) -> bool:
        return self.threads > 1 and nblocks >= PARALLEL_MIN_BLOCKS

    def _run_quantize(self, x, scales, out, exps) -> None:
        """The kernel over the whole blocks of x in place, and over a zero-padded copy of the
        last partial block, so that odd lengths cost no copy of the whole tensor."""
        full = len(x) // LANES
        if full:
            body = x[: full * LANES]
            args = (body, body.view(np.int32), scales[:full], self.qbits, out[:full], exps[:full])
            if self._parallel(full):
                _quantize_parallel(*args, self.threads)
            else:
                _quantize(*args)
        if full < len(scales):
            tail = np.zeros(LANES, np.float32)
            tail[: len(x) - full * LANES] = x[full * LANES:]
            _quantize(tail, tail.view(np.int32), scales[full:], self.qbits, out[full:],
                      exps[full:])


def predict_scales(previous_exps: np.ndarray | None, nblocks: int) -> np.ndarray:
    """The agreed scale of each block from the previous result of the same tensor (§5):
    previous exponent + HEADROOM_BITS, or DEFAULT_EXPONENT where there is no usable history."""
    default = DEFAULT_EXPONENT + EXP_BIAS
    if previous_exps is None or len(previous_exps) != nblocks:
        return np.full(nblocks, default, np.uint16)
    prev = previous_exps.astype(np.int32)
    usable = (prev != EXP_NONE) & (prev != EXP_NONFINITE)
    predicted = np.clip(prev + HEADROOM_BITS, MIN_EXPONENT + EXP_BIAS, MAX_EXPONENT + EXP_BIAS)
    return np.where(usable, predicted, default).astype(np.uint16)


def check_scales(scales: np.ndarray, nblocks: int) -> None:
    if scales.shape != (nblocks,):
        raise ValueError(f"need one scale per block ({nblocks}), got shape {scales.shape}")
    lo, hi = MIN_EXPONENT + EXP_BIAS, MAX_EXPONENT + EXP_BIAS
    if nblocks and (scales.min() < lo or scales.max() > hi):
        raise ValueError(f"scales must lie in [{lo:#x}, {hi:#x}] (exponents {MIN_EXPONENT}.."
                         f"{MAX_EXPONENT} + bias), got {scales.min():#x}..{scales.max():#x}")


def _flat_float32(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x)
    if x.dtype != np.float32:
        raise TypeError(f"quantization takes float32, got {x.dtype}")
    return np.ascontiguousarray(x.reshape(-1))

"""An independent float64 reference for the quantizer and for what an allreduce through the
switch must return (docs/protocol.md §5), used by the quantizer and transport tests."""

from __future__ import annotations

import math

import numpy as np

from host_lib.engine.quantize import DEFAULT_EXPONENT, HEADROOM_BITS, MAX_EXPONENT, qbits
from protocol.constants import EXP_BIAS, EXP_NONE, EXP_NONFINITE, LANES


def blocks_of(x: np.ndarray) -> list[np.ndarray]:
    return [x[i:i + LANES] for i in range(0, len(x), LANES)]


def reference_exponents(x: np.ndarray) -> np.ndarray:
    """Smallest e with max|x| <= 2^e per block, from float64 frexp, biased."""
    out = []
    for block in blocks_of(np.asarray(x, np.float64)):
        if not np.isfinite(block).all():
            out.append(EXP_NONFINITE)
            continue
        m = float(np.abs(block).max())
        if m == 0.0:
            out.append(EXP_NONE)
            continue
        frac, e = math.frexp(m)
        out.append((e - 1 if frac == 0.5 else e) + EXP_BIAS)
    return np.array(out, np.uint16)


def reference_quantize(x: np.ndarray, scales: np.ndarray, j: int) -> np.ndarray:
    """rint(x * 2^(j-E)) clamped to +-2^j, in float64 (exact for float32 inputs)."""
    padded = np.zeros(-(-len(x) // LANES) * LANES)
    padded[:len(x)] = x
    e = scales.astype(np.int64) - EXP_BIAS
    v = padded.reshape(-1, LANES) * np.ldexp(1.0, j - e)[:, None]
    return np.rint(np.clip(v, -(2.0**j), 2.0**j)).astype(np.int64)


class AllreduceReference:
    """What every worker must get from a sequence of float32 allreduce calls with the same tag:
    scales predicted from the previous result (+1 bit) or the default, raised to the true block
    maximum where some worker's block did not fit (the repair), then the exact integer sum."""

    def __init__(self, n_workers: int):
        self.n = n_workers
        self.j = qbits(n_workers)
        self.previous: np.ndarray | None = None

    def __call__(self, inputs: list[np.ndarray], average: bool = False) -> np.ndarray:
        length = len(inputs[0])
        own = np.stack([reference_exponents(x) for x in inputs]).astype(np.int64)
        nb = own.shape[1]
        finite = (own != EXP_NONFINITE).all(axis=0)
        true_max = np.where((own == EXP_NONE).all(axis=0), EXP_NONE,
                            np.where(own == EXP_NONE, 0, own).max(axis=0))
        default = DEFAULT_EXPONENT + EXP_BIAS
        if self.previous is None:
            predicted = np.full(nb, default)
        else:
            prev = self.previous.astype(np.int64)
            usable = (prev != EXP_NONE) & (prev != EXP_NONFINITE)
            predicted = np.where(usable, np.minimum(prev + HEADROOM_BITS, MAX_EXPONENT + EXP_BIAS),
                                 default)
        scales = np.where(finite & (true_max > predicted), true_max, predicted)
        total = sum(reference_quantize(x, scales, self.j) for x in inputs)
        assert np.abs(total).max(initial=0) <= 2**31 - 1
        self.previous = np.where(finite, true_max, EXP_NONFINITE).astype(np.uint16)
        values = total * np.ldexp(1.0, scales - EXP_BIAS - self.j)[:, None]
        if average:
            values = values / self.n
        values[~finite] = np.nan
        return values.reshape(-1)[:length].astype(np.float32)

"""The block quantizer as one Triton kernel per bucket, for CUDA tensors.

:func:`host_lib.pytorch.quantize_torch.quantize` in torch operations passes over a bucket about a
dozen times (block maxima, exponents, scale factors, scaling, clamping, rounding, masking), one
kernel launch each; this kernel reads each value once and writes its lane and its block's
exponent once, with the same arithmetic step for step (docs/protocol.md §5,
:mod:`host_lib.engine.quantize`): the integer maximum of the values' bit patterns, the exponent of
that maximum (the denormal case from the bit pattern, as ``frexp`` would give it), the scaling
by two exact powers of two, the clamp, round half to even by adding and removing 2^23, and zeros
for a non-finite block. So its lanes are bit-identical to the host quantizer's; the CUDA tests
(tests/test_quantize.py, tests/test_device_staging.py) check it where a GPU is present.

Triton ships with PyTorch's CUDA builds; where it is missing, or the tensor is not on a GPU, the
torch operations run instead (:func:`available`).
"""

from __future__ import annotations

import torch

from protocol.constants import EXP_BIAS, EXP_NONE, EXP_NONFINITE, LANES

try:
    import triton
    import triton.language as tl
except ImportError:  # a CPU build of torch: the torch operations quantize
    triton = None

_BLOCKS = 16  # blocks of LANES values per program


def available(x: torch.Tensor) -> bool:
    return triton is not None and x.is_cuda


if triton is not None:
    @triton.jit
    def _quantize(x_ptr, n, scales_ptr, lanes_ptr, exps_ptr, nblocks, qbits, lim,
                  LANES: tl.constexpr, BLOCKS: tl.constexpr, BIAS: tl.constexpr,
                  NONE: tl.constexpr, NONFINITE: tl.constexpr):
        rows = tl.program_id(0) * BLOCKS + tl.arange(0, BLOCKS)
        at = rows[:, None] * LANES + tl.arange(0, LANES)[None, :]
        x = tl.load(x_ptr + at, mask=at < n, other=0.0)  # a partial last block: zeros
        m = tl.max(x.to(tl.int32, bitcast=True) & 0x7FFFFFFF, axis=1)
        biased = m >> 23
        normal = biased - 127 + ((m & 0x7FFFFF) != 0).to(tl.int32)
        # a denormal maximum m * 2^-149: the smallest e with it <= 2^e is -149 + ceil(log2 m);
        # floor(log2 m) is the exponent of m as a float32 (exact: m < 2^23)
        floor_log2 = (m.to(tl.float32).to(tl.int32, bitcast=True) >> 23) - 127
        denormal = -149 + floor_log2 + ((m & (m - 1)) != 0).to(tl.int32)
        exps = tl.where(biased == 0, denormal, normal) + BIAS
        exps = tl.where(m == 0, NONE, exps)
        exps = tl.where(m >= 0x7F800000, NONFINITE, exps)
        scale = tl.load(scales_ptr + rows, mask=rows < nblocks, other=0)
        # x * 2^(j - E) as two exact power-of-two products (2^(j - E) itself may exceed
        # float32's range): the factor's bits built directly, its exponent within range
        shift = qbits + BIAS - scale
        big = shift > 127
        lift = tl.where(big, 18446744073709551616.0, 1.0).to(tl.float32)
        shift = tl.where(big, shift - 64, shift)
        f = ((shift + 127) << 23).to(tl.float32, bitcast=True)
        f = tl.where(scale != 0, f, 0.0)
        v = (x * lift[:, None]) * f[:, None]
        v = tl.minimum(tl.maximum(v, -lim), lim)
        magic = tl.where(v < 0, -8388608.0, 8388608.0).to(tl.float32)
        v = tl.where(tl.abs(v) >= 8388608.0, v, (v + magic) - magic)
        lanes = tl.where((exps == NONFINITE)[:, None], 0, v.to(tl.int32))
        tl.store(lanes_ptr + at, lanes, mask=rows[:, None] < nblocks)
        tl.store(exps_ptr + rows, exps, mask=rows < nblocks)


def quantize(x: torch.Tensor, scales: torch.Tensor, qbits: int
             ) -> tuple[torch.Tensor, torch.Tensor]:
    """As :func:`host_lib.pytorch.quantize_torch.quantize`, in one kernel (``available(x)``)."""
    x = x.reshape(-1).contiguous()
    nblocks = -(-x.numel() // LANES)
    lanes = torch.empty((nblocks, LANES), dtype=torch.int32, device=x.device)
    exps = torch.empty(nblocks, dtype=torch.int32, device=x.device)
    scales = scales.to(device=x.device, dtype=torch.int32)
    grid = (triton.cdiv(nblocks, _BLOCKS),)
    _quantize[grid](x, x.numel(), scales, lanes, exps, nblocks, qbits, float(2**qbits),
                    LANES=LANES, BLOCKS=_BLOCKS, BIAS=EXP_BIAS, NONE=EXP_NONE,
                    NONFINITE=EXP_NONFINITE)
    return lanes, exps

"""The quantizer of :mod:`host_lib.engine.quantize` in torch operations, for tensors that live
on a GPU.

It follows the same arithmetic step for step (integer max of the float bit patterns, exact
power-of-two scaling, round half to even), so a CUDA worker produces bit-identical lanes to a CPU
worker; tests/test_quantize.py checks that on CPU tensors, and on CUDA where one is present.
Only quantization runs on the device: the int32 lanes then go to pinned host memory for the
network, and results are dequantized on the host. On a GPU with Triton, the same arithmetic runs
as one kernel per bucket (:mod:`host_lib.pytorch.quantize_triton`); these operations are the
fallback, and the reference the kernel is tested against.
"""

from __future__ import annotations

import torch

from host_lib.engine.quantize import num_blocks
from host_lib.pytorch import quantize_triton
from protocol.constants import EXP_BIAS, EXP_NONE, EXP_NONFINITE, LANES

_INF_BITS = 0x7F800000


def block_exponents(blocks: torch.Tensor) -> torch.Tensor:
    """Biased exponent of each row of a (nblocks, LANES) float32 tensor, as int32."""
    m = (blocks.view(torch.int32) & 0x7FFFFFFF).amax(dim=1)
    biased = m >> 23
    normal = biased - 127 + ((m & 0x7FFFFF) != 0).to(torch.int32)
    frac, e = torch.frexp(m.to(torch.float64) * 2.0**-149)  # only used for denormal maxima
    denormal = e - (frac == 0.5).to(torch.int32)
    exps = torch.where(biased == 0, denormal, normal) + EXP_BIAS
    exps = torch.where(m == 0, torch.full_like(exps, EXP_NONE), exps)
    return torch.where(m >= _INF_BITS, torch.full_like(exps, EXP_NONFINITE), exps)


def quantize(x: torch.Tensor, scales: torch.Tensor, qbits: int, fused: bool | None = None
             ) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantize a flat float32 tensor with one biased scale per block (int32 tensor on x's
    device). Returns (lanes (nblocks, LANES) int32, exps (nblocks,) int32), on x's device.
    ``fused``: in one kernel (:mod:`host_lib.pytorch.quantize_triton`); by default where it can
    run (a CUDA tensor, Triton present), else in the torch operations below."""
    if x.dtype != torch.float32:
        raise TypeError(f"quantization takes float32, got {x.dtype}")
    if fused or (fused is None and quantize_triton.available(x)):
        return quantize_triton.quantize(x, scales, qbits)
    x = x.reshape(-1)
    nb = num_blocks(x.numel())
    blocks = torch.nn.functional.pad(x, (0, nb * LANES - x.numel())).view(nb, LANES)
    exps = block_exponents(blocks)
    shift = qbits + EXP_BIAS - scales.to(device=x.device, dtype=torch.int32)
    big = shift > 127
    lift = torch.where(big, 2.0**64, 1.0).to(torch.float32)
    f = torch.ldexp(torch.ones_like(lift), torch.where(big, shift - 64, shift).to(torch.float32))
    lim = float(2**qbits)
    v = ((blocks * lift[:, None]) * f[:, None]).clamp_(-lim, lim)
    lanes = torch.round(v).to(torch.int32)
    lanes.masked_fill_((exps == EXP_NONFINITE)[:, None], 0)  # no host sync, unlike a mask index
    return lanes, exps

"""The quantizer against an independent float64 reference and against its documented bounds
(docs/protocol.md §5), including adversarial inputs."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from host_lib.engine.quantize import (
    DEFAULT_EXPONENT,
    HEADROOM_BITS,
    INT32_MAX,
    MAX_EXPONENT,
    MIN_EXPONENT,
    BlockQuantizer,
    block_exponents,
    num_blocks,
    predict_scales,
    qbits,
)
from host_lib.pytorch import quantize_torch
from protocol.constants import EXP_BIAS, EXP_NONE, EXP_NONFINITE, LANES
from tests.quant_reference import reference_exponents, reference_quantize


def float32_rounding(v: np.ndarray) -> np.ndarray:
    """Bound on the error of rounding float64 values v to float32 (half an ulp)."""
    return np.abs(v.astype(np.float64)) * 2.0**-24 + 2.0**-150


def agreed_scales(inputs: list[np.ndarray]) -> np.ndarray:
    """What the protocol converges to: each block's scale is the max over workers of their own
    exponents (after at most one repair)."""
    exps = np.stack([block_exponents(x) for x in inputs]).astype(np.int64)
    exps[exps == EXP_NONE] = DEFAULT_EXPONENT + EXP_BIAS
    return exps.max(axis=0).astype(np.uint16)


def test_qbits_is_the_largest_power_of_two_that_fits():
    for n in range(1, 33):
        j = qbits(n)
        assert n * 2**j <= INT32_MAX < n * 2 ** (j + 1)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 16, 32])
def test_n_extreme_contributions_never_overflow_int32(n):
    q = BlockQuantizer(n)
    scale = np.array([EXP_BIAS + 3], np.uint16)
    worst = np.full(LANES, 8.0, np.float32)  # |x| = 2^E exactly: q = Qmax
    worst[::2] = -8.0
    lanes, exps = q.quantize(worst, scale)
    assert exps[0] == scale[0]
    total = lanes.astype(np.int64) * n
    assert np.abs(total).max() <= INT32_MAX
    # and a clipped worker (|x| > 2^E) is clamped, never wraps
    lanes, exps = q.quantize(worst * 1000, scale)
    assert exps[0] > scale[0]
    assert np.abs(lanes.astype(np.int64)).max() == 2 ** q.qbits


finite_f32 = st.floats(width=32, allow_nan=False, allow_infinity=False)


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 8), st.integers(1, 300), st.data())
def test_sum_within_documented_bound_of_exact_sum(n, length, data):
    magnitude = data.draw(st.sampled_from([1e-30, 1e-6, 1e-2, 1.0, 1e6, 1e30]))
    inputs = [data.draw(hnp.arrays(np.float32, length,
                                   elements=st.floats(-1, 1, width=32))) * np.float32(magnitude)
              for _ in range(n)]
    q = BlockQuantizer(n)
    scales = agreed_scales(inputs)
    total = np.zeros((len(scales), LANES), np.int64)
    for x in inputs:
        lanes, exps = q.quantize(x, scales)
        assert (exps <= scales).all()
        np.testing.assert_array_equal(lanes, reference_quantize(x, scales, q.qbits))
        total += lanes
    assert np.abs(total).max() <= INT32_MAX
    result = q.dequantize(total.astype(np.int32), scales, scales, length).astype(np.float64)
    exact = np.sum([x.astype(np.float64) for x in inputs], axis=0)
    bound = np.repeat(q.error_bound(scales), LANES)[:length]
    assert (np.abs(result - exact) <= bound + float32_rounding(result)).all()


@settings(max_examples=100, deadline=None)
@given(hnp.arrays(np.float32, st.integers(0, 500), elements=finite_f32 | st.sampled_from(
    [0.0, -0.0, 1e-45, -1e-45, 1.4e-40, 3.4028235e38, -3.4028235e38, 2.0**-126, 0.5, 1.0, 2.0])))
def test_block_exponents_equal_the_frexp_reference(x):
    np.testing.assert_array_equal(block_exponents(x), reference_exponents(x))


def test_adversarial_blocks():
    q = BlockQuantizer(4)
    zeros = np.zeros(LANES, np.float32)
    denormal = np.full(LANES, 1e-45, np.float32)  # 2^-149, the smallest float32
    denormal[1::2] = -3e-42
    huge = np.full(LANES, 3.0e38, np.float32)
    huge[::3] = -3.4028235e38
    outlier = np.full(LANES, 1e-3, np.float32)
    outlier[17] = 1e30
    x = np.concatenate([zeros, denormal, huge, outlier])
    exps = block_exponents(x)
    own = exps.astype(np.int64) - EXP_BIAS
    assert exps[0] == EXP_NONE
    assert exps.tolist()[1:] == reference_exponents(x).tolist()[1:]
    assert own[1] == math.frexp(3e-42)[1]
    assert own[2] == MAX_EXPONENT
    scales = np.where(exps == EXP_NONE, EXP_BIAS, exps).astype(np.uint16)
    lanes, _ = q.quantize(x, scales)
    assert not lanes[0].any()
    result = q.dequantize(lanes, scales, exps, len(x))
    assert not result[:LANES].any()
    bound = np.repeat(q.error_bound(scales), LANES)
    err = np.abs(result.astype(np.float64) - x.astype(np.float64))
    assert (err <= bound + float32_rounding(result)).all()
    assert result[3 * LANES + 17] == pytest.approx(1e30, rel=1e-7)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nonfinite_blocks_become_nan_and_never_a_finite_sum(bad):
    q = BlockQuantizer(2)
    x = np.ones(3 * LANES, np.float32)
    x[LANES + 5] = bad
    scales = np.full(3, EXP_BIAS + 1, np.uint16)
    lanes, exps = q.quantize(x, scales)
    assert exps.tolist() == [EXP_BIAS, EXP_NONFINITE, EXP_BIAS]
    assert not lanes[1].any()
    result_exps = np.maximum(exps, block_exponents(np.ones(3 * LANES, np.float32)))
    out = q.dequantize(lanes * 2, scales, result_exps, len(x))
    assert np.isnan(out[LANES:2 * LANES]).all()
    np.testing.assert_allclose(out[:LANES], 2.0)
    np.testing.assert_allclose(out[2 * LANES:], 2.0)


def test_odd_lengths_are_padded_and_trimmed():
    q = BlockQuantizer(3)
    x = np.arange(1, 131, dtype=np.float32)  # 2 full blocks and 2 values
    scales = predict_scales(block_exponents(x) - HEADROOM_BITS, num_blocks(len(x)))
    lanes, exps = q.quantize(x, scales)
    assert lanes.shape == (3, LANES)
    assert not lanes[2, 2:].any()
    out = q.dequantize(lanes, scales, exps, len(x))
    assert out.shape == (130,)
    np.testing.assert_allclose(out, x, atol=float(q.error_bound(scales).max()))


def test_predicted_scales_use_history_with_headroom_and_stay_in_range():
    prev = np.array([EXP_BIAS - 3, EXP_NONE, EXP_NONFINITE, EXP_BIAS + MAX_EXPONENT,
                     EXP_BIAS + MIN_EXPONENT - 5], np.uint16)
    assert predict_scales(prev, 5).tolist() == [
        EXP_BIAS - 3 + HEADROOM_BITS, EXP_BIAS + DEFAULT_EXPONENT, EXP_BIAS + DEFAULT_EXPONENT,
        EXP_BIAS + MAX_EXPONENT, EXP_BIAS + MIN_EXPONENT]
    assert predict_scales(None, 2).tolist() == [EXP_BIAS + DEFAULT_EXPONENT] * 2
    assert predict_scales(prev, 4).tolist() == [EXP_BIAS + DEFAULT_EXPONENT] * 4  # other tensor


def test_bad_arguments_are_refused():
    q = BlockQuantizer(2)
    with pytest.raises(TypeError, match="float32"):
        q.quantize(np.ones(10), np.full(1, EXP_BIAS, np.uint16))
    with pytest.raises(ValueError, match="one scale per block"):
        q.quantize(np.ones(100, np.float32), np.full(1, EXP_BIAS, np.uint16))
    with pytest.raises(ValueError, match="scales must lie"):
        q.quantize(np.ones(10, np.float32), np.zeros(1, np.uint16))
    with pytest.raises(ValueError, match="n_workers"):
        BlockQuantizer(33)


def test_threaded_kernels_equal_single_threaded():
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(5000 * LANES + 7) * 10).astype(np.float32)
    scales = predict_scales(block_exponents(x), num_blocks(len(x)))
    one, two = BlockQuantizer(4), BlockQuantizer(4, threads=2)
    l1, e1 = one.quantize(x, scales)
    l2, e2 = two.quantize(x, scales)
    np.testing.assert_array_equal(l1, l2)
    np.testing.assert_array_equal(e1, e2)
    np.testing.assert_array_equal(one.dequantize(l1 * 3, scales, e1, len(x), divisor=3),
                                  two.dequantize(l1 * 3, scales, e1, len(x), divisor=3))


def torch_matches_numba(x: np.ndarray, device: str, fused: bool | None = None) -> None:
    q = BlockQuantizer(5)
    scales = predict_scales(block_exponents(x) - np.uint16(1), num_blocks(len(x)))
    scales[::3] = np.minimum(scales[::3], EXP_BIAS + MIN_EXPONENT + 2)  # clip and tiny-E paths
    lanes, exps = q.quantize(x, scales)
    t_lanes, t_exps = quantize_torch.quantize(torch.from_numpy(x).to(device),
                                              torch.from_numpy(scales.astype(np.int32)), q.qbits,
                                              fused)
    np.testing.assert_array_equal(t_lanes.cpu().numpy(), lanes)
    np.testing.assert_array_equal(t_exps.cpu().numpy(), exps.astype(np.int32))


@settings(max_examples=60, deadline=None)
@given(hnp.arrays(np.float32, st.integers(1, 400),
                  elements=finite_f32 | st.sampled_from([0.0, 1e-45, np.nan, np.inf, 2.0**-140])))
def test_torch_quantizer_is_bit_identical_on_cpu(x):
    torch_matches_numba(x, "cpu")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("fused", [False, None])  # the torch operations; the default (Triton)
def test_torch_quantizer_is_bit_identical_on_cuda(fused):
    rng = np.random.default_rng(7)
    x = (rng.standard_normal(1 << 20) * np.exp(rng.uniform(-60, 60, 1 << 20))).astype(np.float32)
    x[::977] = 1e-45
    x[12345] = np.nan
    x[-8:-5] = np.inf  # a non-finite last block, partial (the length is not a multiple of 64)
    torch_matches_numba(x[:-5], "cuda", fused)

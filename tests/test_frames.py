"""The compiled frame writers (host_lib/engine/frames.py) against the path they replaced, written
out here: BlockQuantizer's lanes and exponents encoded by FrameBatch. Byte for byte, for every
kind of block (tiny, huge, non-finite, a partial last block), chunk ids that wrap, a window that
is not a power of two, and shards that each write every K-th frame of a call."""

import numpy as np
import pytest

from host_lib.engine.frames import DataFrames, int_frames, lane_frames, quantized_frames
from host_lib.engine.quantize import BlockQuantizer, num_blocks, predict_scales
from protocol import constants as P
from protocol.codec import FRAME_DTYPE, Endpoint, FrameBatch

LOCAL = Endpoint("02:00:00:00:00:01", "10.0.0.1", P.UDP_PORT)
SWITCH = Endpoint("02:00:00:00:00:fe", "10.0.0.254", P.UDP_PORT)
JOB, WORKER, RUN, FANIN = 5, 2, 77, 3


def reference(base: int, window: int, scales, exps, lanes) -> np.ndarray:
    """The frames as the communicator encoded them before: chunk ids, slots and sets by
    numpy, every field through FrameBatch."""
    chunks = (base + np.arange(len(lanes), dtype=np.int64)) & 0xFFFFFFFF
    return FrameBatch(LOCAL, SWITCH).encode(
        op=P.Op.DATA, job=JOB, worker=WORKER, slot=chunks % window, chunk=chunks,
        flags=(chunks // window) % 2, scale=scales, exp=exps, fanin=FANIN, run=RUN, lanes=lanes)


def written(n: int, shards: int, write) -> np.ndarray:
    """n frames, shard k writing rows k, k + K, ... (as the communicator's shards do)."""
    frames = np.zeros(n, FRAME_DTYPE)
    for k in range(shards):
        write(frames[k::shards][:, None].view(np.uint8), k, shards)
    return frames


def gradient(seed: int, length: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(length) * np.exp(rng.uniform(-60, 60, length))
    x[rng.integers(0, length, 3)] = [np.inf, -np.inf, np.nan]
    x[:P.LANES] = 0.0  # an all-zero block
    x[P.LANES:2 * P.LANES] *= 1e-40  # denormals
    return x.astype(np.float32)


@pytest.mark.parametrize("length, base, window, shards, workers", [
    (64 * 300 + 17, 0, 64, 1, 1), (64 * 300, 2**32 - 100, 96, 3, 3),
    (64 * 7 + 1, 2**32 - 3, 5, 1, 32), (64 * 1000 + 63, 12345, 1024, 8, 8)])
def test_quantized_frames_are_the_quantizer_and_encoder_bytes(length, base, window, shards,
                                                              workers):
    x = gradient(length, length)
    nb = num_blocks(length)
    quantizer = BlockQuantizer(workers)
    rng = np.random.default_rng(length)
    history = rng.integers(P.EXP_BIAS - 150, P.EXP_BIAS + 130, nb).astype(np.uint16)
    scales = predict_scales(history, nb)
    lanes, exps = quantizer.quantize(x, scales)
    header = DataFrames(LOCAL, SWITCH, JOB, WORKER, RUN).header(FANIN)
    got_exps = np.zeros(nb, np.uint16)
    frames = written(nb, shards, lambda rows, k, step: quantized_frames(
        rows, header, x, scales, quantizer.qbits, k, step, base, window, got_exps))
    assert frames.tobytes() == reference(base, window, scales, exps, lanes).tobytes()
    np.testing.assert_array_equal(got_exps, exps)


def test_lane_frames_carry_lanes_quantized_elsewhere():
    rng = np.random.default_rng(1)
    nb, base, window = 77, 2**32 - 10, 12
    lanes = rng.integers(-2**31, 2**31, (nb, P.LANES), dtype=np.int64).astype(np.int32)
    scales = rng.integers(0, 2**16, nb).astype(np.uint16)
    exps = rng.integers(0, 2**16, nb).astype(np.uint16)
    header = DataFrames(LOCAL, SWITCH, JOB, WORKER, RUN).header(FANIN)
    frames = written(nb, 4, lambda rows, k, step: lane_frames(
        rows, header, lanes, scales, exps, k, step, base, window))
    assert frames.tobytes() == reference(base, window, scales, exps, lanes).tobytes()


def test_int_frames_sum_as_they_are_with_zeros_after_the_values():
    rng = np.random.default_rng(2)
    values = rng.integers(-2**31, 2**31, 64 * 9 + 5, dtype=np.int64).astype(np.int32)
    nb = num_blocks(values.size)
    lanes = np.zeros((nb, P.LANES), np.int32)
    lanes.reshape(-1)[:values.size] = values
    header = DataFrames(LOCAL, SWITCH, JOB, WORKER, RUN).header(FANIN)
    frames = written(nb, 2, lambda rows, k, step: int_frames(rows, header, values, k, step, 3, 4))
    assert frames.tobytes() == reference(3, 4, 0, 0, lanes).tobytes()

"""A call's DATA frames, written in one compiled pass each: every block of the gradient quantized
straight into the lanes of its frame (in network byte order), beside the header fields of its
chunk.

Quantizing into an int32 array and then encoding frames from it (``protocol.codec.FrameBatch``)
passes over the call's memory three times; here each frame is written once, by the thread that
sends it (each shard writes its own frames, ``host_lib/engine/shards.py``). The frames are
bit-identical to those (tests/test_frames.py checks them against ``BlockQuantizer`` and
``FrameBatch``).

A call's frames are rows of bytes; row i is block (chunk) ``first + step * i`` of the call, so a
shard writes every K-th frame of the call. Every frame starts as :meth:`DataFrames.header` (the
addressing, the job, the worker, the run and the in-band fan-in, which all frames of a call
share); per chunk come the slot ``c mod W``, the chunk id, the set ``(c div W) mod 2``, the scale,
the block's exponent and the lanes (docs/protocol.md §2, §4).
"""

from __future__ import annotations

import numba
import numpy as np

from host_lib.engine.quantize import quantize_block
from protocol import constants as P
from protocol.codec import Endpoint, FrameBatch, field_offset

_SLOT, _CHUNK, _FLAGS = field_offset("slot"), field_offset("chunk"), field_offset("flags")
_SCALE, _EXP = field_offset("scale"), field_offset("exp")
_LANES = P.LANES_OFFSET


class DataFrames:
    """The fields every DATA frame of one worker's call shares."""

    def __init__(self, local: Endpoint, switch: Endpoint, job: int, worker: int, run: int):
        self.batch = FrameBatch(local, switch)
        self.job, self.worker, self.run = job, worker, run

    def header(self, fanin: int = 0) -> np.ndarray:
        """The bytes before the lanes of a DATA frame of this worker (chunk 0, slot 0)."""
        frame = self.batch.encode(op=P.Op.DATA, job=self.job, worker=self.worker, slot=0,
                                  chunk=0, fanin=fanin, run=self.run)
        return frame.view(np.uint8)[:_LANES].copy()


@numba.njit(cache=True, nogil=True)
def words(rows):
    """The rows of frames as 32-bit words (the kernels write headers and lanes a word at a
    time; a frame's length and its lanes' offset are multiples of 4)."""
    return rows.view(np.int32)


@numba.njit(cache=True, nogil=True)
def _put16(row, at, value):
    row[at], row[at + 1] = (value >> 8) & 0xFF, value & 0xFF


@numba.njit(cache=True, nogil=True)
def _put32(row, at, value):
    row[at], row[at + 1] = (value >> 24) & 0xFF, (value >> 16) & 0xFF
    row[at + 2], row[at + 3] = (value >> 8) & 0xFF, value & 0xFF


@numba.njit(cache=True, nogil=True)
def _place(chunk, window):
    """Chunk ``chunk``'s slot and set."""
    return chunk % window, (chunk // window) % 2


@numba.njit(cache=True, nogil=True)
def _next(chunk, slot, flip, step, window):
    """The chunk ``step`` on from ``chunk`` (in slot ``slot`` of set ``flip``), and its slot
    and set, without a division per frame."""
    after = (chunk + step) & 0xFFFFFFFF
    if after < chunk:  # the chunk ids wrapped
        slot, flip = _place(after, window)
        return after, slot, flip
    slot += step
    if slot >= window:
        slot -= window
        flip ^= 1
    return after, slot, flip


@numba.njit(cache=True, nogil=True)
def _start_frame(row, word_row, head, chunk, slot, flip, scale, exp):
    for w in range(_LANES // 4):
        word_row[w] = head[w]
    _put16(row, _SLOT, slot)
    _put32(row, _CHUNK, chunk)
    row[_FLAGS] = flip
    _put16(row, _SCALE, scale)
    _put16(row, _EXP, exp)


@numba.njit(cache=True, nogil=True)
def swap32(v):
    """An int32 in the other byte order (the shifts compile to one byte swap)."""
    u = np.uint32(v)
    return np.int32(((u & 0xFF) << 24) | ((u & 0xFF00) << 8) | ((u >> 8) & 0xFF00) | (u >> 24))


@numba.njit(cache=True, nogil=True)
def _put_lanes(word_row, lanes):
    """The lanes in network byte order."""
    for i in range(P.LANES):
        word_row[_LANES // 4 + i] = swap32(lanes[i])


@numba.njit(cache=True, nogil=True)
def quantized_frames(rows, header, x, scales, j, first, step, first_chunk, window, exps):
    """Row i: the frame of block ``b = first + step * i`` of the float32 values ``x``, quantized
    with ``scales[b]`` for ``2^j`` (:mod:`host_lib.engine.quantize`), chunk id ``first_chunk +
    b``; each block's own exponent goes to ``exps[b]``. The last block may be partial: its
    missing values count as zeros."""
    xbits, word_rows, head = x.view(np.int32), words(rows), header.view(np.int32)
    tail = np.zeros(P.LANES, np.float32)
    lanes = np.empty(P.LANES, np.int32)
    chunk = (first_chunk + first) & 0xFFFFFFFF
    slot, flip = _place(chunk, window)
    for i in range(rows.shape[0]):
        b = first + step * i
        start = b * P.LANES
        if start + P.LANES <= len(x):
            e = quantize_block(x, xbits, start, scales[b], j, lanes)
        else:
            for k in range(len(x) - start):
                tail[k] = x[start + k]
            e = quantize_block(tail, tail.view(np.int32), 0, scales[b], j, lanes)
        exps[b] = e
        _start_frame(rows[i], word_rows[i], head, chunk, slot, flip, scales[b], e)
        _put_lanes(word_rows[i], lanes)
        chunk, slot, flip = _next(chunk, slot, flip, step, window)


@numba.njit(cache=True, nogil=True)
def lane_frames(rows, header, lanes, scales, exps, first, step, first_chunk, window):
    """Row i: the frame of block ``b = first + step * i`` whose lanes are already quantized
    (``lanes[b]``, int32, with its ``scales[b]`` and ``exps[b]``): a bucket quantized on its
    GPU, a repair."""
    word_rows, head = words(rows), header.view(np.int32)
    chunk = (first_chunk + first) & 0xFFFFFFFF
    slot, flip = _place(chunk, window)
    for i in range(rows.shape[0]):
        b = first + step * i
        _start_frame(rows[i], word_rows[i], head, chunk, slot, flip, scales[b], exps[b])
        _put_lanes(word_rows[i], lanes[b])
        chunk, slot, flip = _next(chunk, slot, flip, step, window)


@numba.njit(cache=True, nogil=True)
def int_frames(rows, header, values, first, step, first_chunk, window):
    """Row i: the frame of the int32 values of block ``b = first + step * i`` of ``values``
    (scale and exponent 0: summed as they are); the last block's missing values are zeros."""
    lanes, word_rows, head = np.zeros(P.LANES, np.int32), words(rows), header.view(np.int32)
    chunk = (first_chunk + first) & 0xFFFFFFFF
    slot, flip = _place(chunk, window)
    for i in range(rows.shape[0]):
        b = first + step * i
        start = b * P.LANES
        stop = min(start + P.LANES, len(values))
        for k in range(P.LANES):
            lanes[k] = values[start + k] if start + k < stop else 0
        _start_frame(rows[i], word_rows[i], head, chunk, slot, flip, 0, 0)
        _put_lanes(word_rows[i], lanes)
        chunk, slot, flip = _next(chunk, slot, flip, step, window)

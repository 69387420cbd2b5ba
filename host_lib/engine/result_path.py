"""The transport's hot path, compiled: the first results of a round's chunks, applied straight
from the receive buffer.

A worker receives one RESULT per chunk, some 30,000 in a call of 2 M values. Applied with numpy,
a batch of them cost about 40 array calls, most of a call's time (issue 22). Here one compiled
pass checks, decodes and stores a whole run of them (:func:`take_results`), and a second one
acts on what the run says about earlier chunks (:func:`flag_losses`). Every other frame (bounces,
partials, helper traffic, a second copy of a result, a frame the filter refuses) ends the run
and goes through the transport's Python code, in arrival order.

Header fields are in network byte order (``protocol.codec.FRAME_DTYPE``). The field offsets are
compile-time constants of the kernels, and numba's cache is keyed on this file only: after a
change to the frame layout, touch this file (tests/test_result_path.py decodes with FRAME_DTYPE
and fails on a stale kernel).
"""

from __future__ import annotations

import math

import numba
import numpy as np

from host_lib.engine.frames import swap32
from protocol import constants as P
from protocol.codec import field_offset

# A received frame's row: one byte more than a frame, so that a longer datagram shows (cut to
# the row), rounded up to whole 32-bit words, which the kernels read.
RX_ROW = P.FRAME_LEN + 4

_VER_OP = field_offset("ver_op")
_FLAGS = field_offset("flags")
_CHUNK = field_offset("chunk")
_BITMAP = field_offset("bitmap")
_COUNT = field_offset("count")
_EXP = field_offset("exp")
_LANES = field_offset("lanes")
_RESULT_VER_OP = (P.VERSION << 4) | P.Op.RESULT
_COPY = int(P.Flag.COPY)
_HELPER = int(P.Flag.HELPER)


@numba.njit(cache=True, nogil=True)
def _u16(row, at):
    return (np.int64(row[at]) << 8) | np.int64(row[at + 1])


@numba.njit(cache=True, nogil=True)
def _u32(row, at):
    return ((np.int64(row[at]) << 24) | (np.int64(row[at + 1]) << 16)
            | (np.int64(row[at + 2]) << 8) | np.int64(row[at + 3]))


@numba.njit(cache=True, nogil=True)
def take_results(rows, start, end, template, mask, base, stride, done, sums, exps, bitmaps,
                 counts, sent_at, retries, pending_at, taken_by, run_js, copies):
    """Store the run of results that starts at ``rows[start]`` (rows of :data:`RX_ROW`
    bytes): it ends before ``end`` or at the
    first frame that the filter refuses (``row & mask != template`` over the headers), that is
    not a RESULT, or that is not the first result of a chunk of the round (chunk ids ``base``,
    ``base + stride``, ..., one per element of ``done``).

    Each result sets its chunk's sum, exponents, bitmap and count, and marks it done; its index
    goes to ``run_js``. Returns ``(stop, clean, clean_sent, n_copies, newest_plain)``: the frame
    the run ended before; how many results had a clean round trip (sent once, never answered
    with a PENDING, not taken over: Karn's rule) and the sum of their send times; how many
    results answered our question with a COPY (their indexes in ``copies[:n_copies]``: they
    time a question); and the newest chunk index of a result that did not come from a helper
    (-1 if none), for :func:`flag_losses`."""
    n, n_lanes = len(done), sums.shape[1]
    words, expected, checked = rows.view(np.int32), template.view(np.int32), mask.view(np.int32)
    clean, clean_sent, n_copies, newest_plain = 0, 0.0, 0, -1
    stop = start
    while stop < end:
        row, word = rows[stop], words[stop]
        for w in range(len(checked)):
            if word[w] & checked[w] != expected[w]:
                return stop, clean, clean_sent, n_copies, newest_plain
        if row[_VER_OP] != _RESULT_VER_OP:
            break
        d = (_u32(row, _CHUNK) - base) & 0xFFFFFFFF
        j = d
        if stride != 1:
            j = d // stride
            if d - j * stride:
                break
        if j >= n or done[j]:
            break
        for lane in range(n_lanes):
            sums[j, lane] = swap32(word[_LANES // 4 + lane])
        exps[j] = _u16(row, _EXP)
        bitmaps[j] = _u32(row, _BITMAP)
        counts[j] = row[_COUNT]
        done[j] = True
        run_js[stop - start] = j
        if (retries[j] == 0 and math.isnan(pending_at[j]) and taken_by[j] < 0
                and not math.isnan(sent_at[j])):
            clean += 1
            clean_sent += sent_at[j]
        flags = row[_FLAGS]
        if flags & _COPY and retries[j] == 1:
            copies[n_copies] = j
            n_copies += 1
        if not flags & _HELPER:
            newest_plain = max(newest_plain, j)
        stop += 1
    return stop, clean, clean_sent, n_copies, newest_plain


@numba.njit(cache=True, nogil=True)
def flag_losses(run_js, newest_plain, first_pending, next_to_send, slots, base, stride, workers,
                worker, now, wait, done, lost, taken_by, pending_at, deadline, backoff):
    """What a run of results (``run_js``, stored by :func:`take_results`) says about earlier
    chunks; returns the earliest deadline it set (inf if none).

    Results come back in chunk order: every worker sends its contributions in chunk order, and
    a chunk completes with its last one, so chunk c is complete before any later chunk is
    (whether that one completed with first sends or with resends, each worker sent c before
    it). A chunk before the newest plain result of the run (``newest_plain``: not a helper's),
    sent and still without its own, lost a contribution or its result, as TCP's RACK infers
    from a later packet's ACK. Chunks taken over complete out of order (the timer covers them).
    A chunk a PENDING said was waiting completes when the missing workers send again: later
    chunks may complete first until they have had time to (``wait``, two question timeouts).
    Such a chunk is marked lost and due: now if this worker (``worker``) is the one that asks
    first about it (by chunk id modulo ``workers``, as in ``Transport._send_window``), ``wait``
    s on otherwise. (Positions j are those of a round of chunk ids ``base + stride * j``.)

    And a result for chunk c means chunk c - W (``slots`` positions before) was resolved for
    every worker (each sends c + W only after that): if c - W's result has not come, it was
    lost; it is due now, its backoff reset."""
    earliest = math.inf
    for j in range(first_pending, min(newest_plain, next_to_send)):
        if (not done[j] and not lost[j] and taken_by[j] < 0
                and not pending_at[j] > now - wait):
            lost[j] = True
            asks_first = (base + stride * j) % workers == worker
            deadline[j] = min(deadline[j], now if asks_first else now + wait)
            earliest = min(earliest, deadline[j])
    for j in run_js:
        before = j - slots
        if before >= 0 and before < next_to_send and not done[before]:
            deadline[before] = now
            backoff[before] = 0
            earliest = min(earliest, now)
    return earliest

"""Allreduce through the switch for one job and worker: the object a training process uses.

    # run: the same on every worker (host_lib/engine/runs.py; host_lib/pytorch/connect.py)
    comm = SwitchCommunicator(CommunicatorConfig.from_spec(spec, worker_id, run), link, pg)
    total = comm.allreduce(grad)                      # float32: quantized, exact integer sum
    mean = comm.allreduce(grad, weights=[1] * n)      # divided by the weights of who was summed
    counts = comm.allreduce_int(np.array([...], np.int32))
    fut = comm.allreduce_async(grad)                  # concurrent.futures.Future

Calls run one after another on the communicator's I/O thread, in the order they were made, so
every worker walks the same chunk ids; between calls the thread keeps answering peers for which
this worker is a helper. A float32 call quantizes with the agreed per-block scales
(docs/protocol.md §5), streams the blocks through the switch, repairs any block a worker had to
clip, and dequantizes. A :class:`~host_lib.engine.rounds.RoundPlan` says how this worker takes part
(sits out, in-band fan-in, slot takeover by helpers, or the whole call through the fallback
group's ring where the policy measured that faster). If the switch falls silent and a fallback
process group is given, the workers agree with one small collective and all of them complete
that call through gloo.
"""

from __future__ import annotations

import concurrent.futures
import logging
import queue
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from host_lib.engine.buffers import BufferPool
from host_lib.engine.config import CommunicatorConfig
from host_lib.engine.frames import DataFrames, int_frames, lane_frames, quantized_frames
from host_lib.engine.quantize import BlockQuantizer, num_blocks, predict_scales
from host_lib.engine.rounds import CallStats, ProtocolError, Round, RoundPlan, SwitchSilent
from host_lib.engine.shards import ShardedTransport
from host_lib.metrics import CallMetrics
from protocol import constants as P
from protocol.codec import Endpoint

log = logging.getLogger(__name__)

_IDLE_POLL = 0.5  # longest wait between calls (a new call or a frame ends it at once)
# The interpreter's switch interval while a communicator runs (at most): how long another
# thread that computes in Python (a policy's planner, a data loader) may hold the GIL while the
# I/O thread waits for it between rounds. SA-ATP's planner thread runs during the gradient's
# communication; on the 2-core testbed without a straggler (experiments.harness, none,
# 2026-12-01) its job was 3.7 ms an iteration slower than plain aggregation with CPython's
# default, 5 ms (3 runs), and 2.5 ms slower with 0.5 ms (6 runs; plain aggregation itself
# ranged 49.5-53.3 ms from run to run).
SWITCH_INTERVAL_S = 5e-4


class StagedBucket(Protocol):
    """Values quantized on their device, on their way to host memory
    (host_lib/pytorch/device_staging.py makes them)."""

    size: int  # values in the bucket
    scales: np.ndarray  # the block scales it was quantized with (``scales_for``)

    def wait(self) -> tuple[np.ndarray, np.ndarray]:
        """(lanes, exponents) in host memory, once their copy is done."""

    def requantize(self, blocks: np.ndarray, scales: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
        """Blocks quantized again with larger scales (a repair)."""

    def host_values(self) -> np.ndarray:
        """The float32 values themselves, for the fallback."""


class FallbackGroup(Protocol):
    """How every worker completes a call another way when the switch cannot
    (host_lib/pytorch/fallback.py: through gloo)."""

    def agree(self, failed: bool, next_chunk: int) -> tuple[bool, int]:
        """(did any worker fail, the largest next chunk id any worker reached)."""

    def allreduce(self, values: np.ndarray, divisor: float = 1.0, contribute: bool = True
                  ) -> np.ndarray:
        """The sum over all workers, divided by ``divisor``."""


@dataclass
class _Call:
    values: np.ndarray
    quantized: bool
    weights: np.ndarray | None  # per worker: divide each block by the weights summed in it
    tag: object
    plan: RoundPlan
    staged: StagedBucket | None = None  # quantized on its device: values is None
    out: np.ndarray | None = None  # where the caller wants the float32 result
    future: concurrent.futures.Future = field(default_factory=concurrent.futures.Future)

    @property
    def size(self) -> int:
        return self.values.size if self.staged is None else self.staged.size


class SwitchCommunicator:
    def __init__(self, config: CommunicatorConfig, link,
                 fallback_group: FallbackGroup | None = None):
        self.config = config
        self.link = link
        self.fallback = fallback_group
        self.transport = ShardedTransport(link, config)
        self.quantizer = BlockQuantizer(config.n_workers, threads=config.quantizer_threads)
        self.frames = DataFrames(config.local, config.switch, config.job, config.worker,
                                 config.run)
        self.buffers = BufferPool()
        self.next_chunk = 0
        self.history: dict[object, np.ndarray] = {}  # tag -> last result exponents per block
        self.last_stats: CallStats | None = None
        self.metrics = (CallMetrics(config.job, config.worker).serve(config.metrics_listen)
                        if config.metrics_listen else None)
        self._linger = 0.0
        self._warned_no_ring = False
        if sys.getswitchinterval() > SWITCH_INTERVAL_S:
            sys.setswitchinterval(SWITCH_INTERVAL_S)
        self._load_kernels()
        self._calls: queue.Queue = queue.Queue()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._thread = threading.Thread(target=self._serve, name=f"sa-atp-job{config.job}",
                                        daemon=True)
        self._thread.start()

    # -- API --------------------------------------------------------------------------------

    def allreduce(self, values, weights=None, tag=None, plan: RoundPlan | None = None,
                  out: np.ndarray | None = None) -> np.ndarray:
        """Sum of a float32 array over the job's workers; blocks. With ``weights`` (one per
        worker), each block is divided by the total weight of the workers summed in it (so
        ``[1] * n`` averages, and sample counts give the mean over the samples summed). The
        result is written into ``out`` (a contiguous float32 array of as many values, which may
        be ``values`` itself) if given, else into a new array."""
        return self.allreduce_async(values, weights, tag, plan, out).result()[0]

    def allreduce_int(self, values, plan: RoundPlan | None = None) -> np.ndarray:
        """Exact int32 sum over the job's workers (wraps modulo 2^32 like any int32 sum)."""
        return self.allreduce_int_async(values, plan).result()[0]

    def allreduce_async(self, values, weights=None, tag=None, plan: RoundPlan | None = None,
                        out: np.ndarray | None = None) -> concurrent.futures.Future:
        """Future of (result, CallStats). ``tag`` names the tensor so that its quantization
        scales are predicted from its previous result (default: its length)."""
        values = np.asarray(values)
        if values.dtype != np.float32:
            raise TypeError(f"allreduce takes float32 (use allreduce_int for int32), got "
                            f"{values.dtype}")
        if out is not None and (out.dtype != np.float32 or out.size != values.size
                                or not out.flags.c_contiguous or not out.flags.writeable):
            raise ValueError(f"out must be a writable contiguous float32 array of "
                             f"{values.size} values")
        if weights is not None:
            weights = np.asarray(weights, np.float64)
            if weights.shape != (self.config.n_workers,):
                raise ValueError(f"need one weight per worker ({self.config.n_workers}), got "
                                 f"shape {weights.shape}")
        return self._submit(_Call(values.reshape(-1), True, weights,
                                  ("len", values.size) if tag is None else tag,
                                  plan or RoundPlan(),
                                  out=None if out is None else out.reshape(-1)))

    def scales_for(self, tag, length: int) -> np.ndarray:
        """The quantization scales a call of ``length`` values with ``tag`` will use: what a
        caller that quantizes on its own device (:mod:`host_lib.pytorch.device_staging`) needs."""
        return predict_scales(self.history.get(tag), num_blocks(length))

    def allreduce_staged_async(self, staged: StagedBucket, weights=None, tag=None,
                               plan: RoundPlan | None = None) -> concurrent.futures.Future:
        """As :meth:`allreduce_async`, for values quantized on their device with
        ``scales_for(tag, ...)``; the I/O thread waits for their copy when it gets to them."""
        if weights is not None:
            weights = np.asarray(weights, np.float64)
        return self._submit(_Call(None, True, weights, tag, plan or RoundPlan(), staged))

    def allreduce_int_async(self, values, plan: RoundPlan | None = None
                            ) -> concurrent.futures.Future:
        values = np.asarray(values)
        if values.dtype != np.int32:
            raise TypeError(f"allreduce_int takes int32, got {values.dtype}")
        return self._submit(_Call(values.reshape(-1), False, None, None, plan or RoundPlan()))

    def close(self, linger: float = 0.2) -> None:
        """Stop after the queued calls, first answering peers until the link has been quiet
        for ``linger`` seconds (they may still need a result this worker holds)."""
        self._linger = linger
        self._submit(None)
        self._thread.join(timeout=linger + 10)
        self.transport.close()
        self.link.close()
        if self.metrics is not None:
            self.metrics.close()
        self._wake_r.close()
        self._wake_w.close()

    def __enter__(self) -> SwitchCommunicator:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- the I/O thread -----------------------------------------------------------------------

    def _submit(self, call: _Call | None) -> concurrent.futures.Future | None:
        if call is not None and not self._thread.is_alive():
            raise RuntimeError("communicator is closed")
        self._calls.put(call)
        self._wake_w.send(b"x")  # interrupt serve_idle's wait
        return None if call is None else call.future

    def _serve(self) -> None:
        while True:
            try:
                call = self._calls.get_nowait()
            except queue.Empty:
                # Between calls, answer peers (helper duties) until the next call arrives.
                self.transport.serve_idle(_IDLE_POLL, self._wake_r.fileno())
                self._clear_wakeups()
                continue
            if call is None:
                self.transport.linger(self._linger, limit=self._linger + 5)
                return
            if not call.future.set_running_or_notify_cancel():
                continue
            try:
                call.future.set_result(self._run_call(call))
            except BaseException as exc:  # noqa: BLE001 - handed to the caller's future
                call.future.set_exception(exc)

    def _run_call(self, call: _Call) -> tuple[np.ndarray, CallStats]:
        stats = CallStats(elements=call.size)
        started = time.perf_counter()
        if call.plan.ring and self.fallback is not None:
            # every worker has the same plan: all of them take this call to the ring
            stats.ring = True
            result = self._through_fallback(call)
        else:
            if call.plan.ring and not self._warned_no_ring:
                self._warned_no_ring = True
                log.warning("job %d: the plan sends calls through the hosts' ring, but this "
                            "communicator has no fallback group: they go through the switch",
                            self.config.job)
            result = self._switch_or_fallback(call, stats)
        stats.elapsed_s = time.perf_counter() - started
        self.last_stats = stats
        if self.metrics is not None:
            self.metrics.observe(stats)
        return result, stats

    def _switch_or_fallback(self, call: _Call, stats: CallStats) -> np.ndarray:
        """The call through the switch, or through gloo where any worker could not complete
        it there."""
        base = self.next_chunk
        failure = None
        try:
            result = (self._switch_quantized(call, stats) if call.quantized
                      else self._switch_int(call, stats))
        except (SwitchSilent, ProtocolError) as exc:
            failure, result = exc, None
        if self.fallback is not None:
            fell_back, self.next_chunk = self.fallback.agree(failure is not None, self.next_chunk)
            if fell_back:
                reason = failure or "another worker could not complete through the switch"
                stats.fallback = str(reason)
                log.warning("job %d: call at chunk %d completed through gloo: %s",
                            self.config.job, base, reason)
                self.history.pop(call.tag, None)
                result = self._through_fallback(call)
        elif failure is not None:
            raise failure
        return result

    def _through_fallback(self, call: _Call) -> np.ndarray:
        values = call.values if call.staged is None else call.staged.host_values()
        result = self.fallback.allreduce(values, self._fallback_divisor(call),
                                         call.plan.contribute)
        if call.out is not None:
            call.out[:] = result
            result = call.out
        return result

    def _fallback_divisor(self, call: _Call) -> float:
        """gloo sums every worker (a worker that sits out adds zeros): the divisor is the
        weight of the workers the plan expected to contribute."""
        if call.weights is None:
            return 1.0
        expected = call.plan.expected or (1 << self.config.n_workers) - 1
        return float(sum(w for i, w in enumerate(call.weights) if expected >> i & 1))

    def _clear_wakeups(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except BlockingIOError:
            pass

    # -- the switch path ----------------------------------------------------------------------

    def _load_kernels(self) -> None:
        """Load the compiled kernels a call runs (quantizer, frames, round loop, result path)
        now: in a fresh process that takes ~0.2 s (numba's on-disk cache), which the first
        call, and so the first training step, would otherwise pay, while gloo's set-up is done
        by then."""
        scales = predict_scales(None, 1)
        lanes, exps = self.quantizer.quantize(np.zeros(P.LANES, np.float32), scales)
        self.quantizer.dequantize(lanes, scales, exps, P.LANES)
        self.transport.load_kernels()
        k = self.transport.shards
        frames, _ = self.buffers.take(2 * k).arrays(2 * k, 0, k)
        rows, header = frames[:, None].view(np.uint8), self.frames.header()
        quantized_frames(rows, header, np.zeros(P.LANES, np.float32), scales, 1, 0, 0, 0, 1,
                         exps)
        lane_frames(rows, header, lanes, scales, exps, 0, 0, 0, 1)
        int_frames(rows, header, np.zeros(P.LANES, np.int32), 0, 0, 0, 1)

    def _stream(self, n: int, write, plan: RoundPlan, stats: CallStats) -> dict:
        """Push the next ``n`` chunk ids through the switch, split over the shards; returns
        the call's arrays (``sums``, ``exps``, ``bitmaps``, ...: see CallBuffers). Each shard
        writes its frames itself: ``write(rows, first, step, first_chunk)`` writes blocks
        ``first, first + step, ...`` of the call, chunk ids from ``first_chunk`` on, into
        ``rows``."""
        base, k = self.next_chunk, self.transport.shards
        self.next_chunk = (self.next_chunk + n) & 0xFFFFFFFF
        buffers = self.buffers.take(n)
        hosted = plan.host_chunks(n)
        stats.host_chunks += hosted

        def part(first: int) -> Round:
            frames, arrays = buffers.arrays(n, first, k)
            rnd = Round(frames, (base + first) & 0xFFFFFFFF, plan, k, arrays, keep=buffers)
            write(rnd.rows, first, k, base)
            if not plan.contribute:
                rnd.rows[:, P.LANES_OFFSET:] = 0  # probes only ask
            if first < hosted:  # summed on hosts: each starts taken over by its helper (§7.3)
                mine = -(-(hosted - first) // k)
                rnd.host[:mine] = True
                rnd.taken_by[:mine] = np.asarray(plan.helpers)[
                    rnd.chunk(np.arange(mine)) % len(plan.helpers)]
            return rnd

        parts = [(lambda first=(s - base) % k: part(first)) if (s - base) % k < n else None
                 for s in range(k)]
        started = time.monotonic()
        self.transport.run(parts, stats)
        arrays = buffers.arrays(n)[1]
        for part, name in ((~arrays["host"], "switch_s"), (arrays["host"], "host_s")):
            if part.any():
                setattr(stats, name, getattr(stats, name)
                        + float(np.nanmax(arrays["done_at"][part])) - started)
        return arrays

    def _switch_int(self, call: _Call, stats: CallStats) -> np.ndarray:
        header, window = self.frames.header(call.plan.fanin), self.config.window
        values = call.values

        def write(rows, first, step, base):
            int_frames(rows, header, values, first, step, base, window)
        results = self._stream(num_blocks(values.size), write, call.plan, stats)
        return results["sums"].reshape(-1)[:values.size].copy()

    def _switch_quantized(self, call: _Call, stats: CallStats) -> np.ndarray:
        header, window = self.frames.header(call.plan.fanin), self.config.window
        if call.staged is None:
            x = np.ascontiguousarray(call.values)
            scales = predict_scales(self.history.get(call.tag), num_blocks(x.size))
            exps = np.empty(len(scales), np.uint16)
            bits = self.quantizer.qbits

            def write(rows, first, step, base):
                quantized_frames(rows, header, x, scales, bits, first, step, base, window, exps)

            def requantize(blocks, block_scales):
                return self.quantizer.quantize(_blocks(x, blocks), block_scales)
        else:
            scales, (lanes, exps) = call.staged.scales, call.staged.wait()
            requantize = call.staged.requantize

            def write(rows, first, step, base):
                lane_frames(rows, header, lanes, scales, exps, first, step, base, window)
        results = self._stream(len(scales), write, call.plan, stats)
        sums, result_exps = results["sums"], results["exps"].copy()
        bitmaps = results["bitmaps"].copy()
        clipped = np.nonzero((result_exps > scales) & (result_exps != P.EXP_NONFINITE))[0]
        if len(clipped):
            # Every worker sees the same results, so every worker repairs the same blocks, with
            # the exponent the switch reported as sufficient (docs/protocol.md §5).
            stats.repairs = len(clipped)
            scales = scales.copy()
            scales[clipped] = result_exps[clipped]
            repair_lanes, repair_exps = requantize(clipped, scales[clipped])
            repair_scales = scales[clipped]

            def write_repair(rows, first, step, base):
                lane_frames(rows, header, repair_lanes, repair_scales, repair_exps, first, step,
                            base, window)
            repair = self._stream(len(clipped), write_repair, call.plan, stats)
            sums = sums.copy()
            sums[clipped] = repair["sums"]
            result_exps[clipped] = repair["exps"]
            bitmaps[clipped] = repair["bitmaps"]
        self.history[call.tag] = result_exps
        return self.quantizer.dequantize(sums, scales, result_exps, call.size,
                                         self._divisors(call.weights, bitmaps), call.out)

    def _divisors(self, weights: np.ndarray | None, bitmaps: np.ndarray) -> np.ndarray | float:
        """Per block, the total weight of the workers whose contributions it sums."""
        if weights is None:
            return 1.0
        bits = (bitmaps[:, None] >> np.arange(self.config.n_workers, dtype=np.uint32)) & 1
        divisors = bits @ weights
        return np.where(divisors > 0, divisors, 1.0)


def _blocks(x: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """The given K-value blocks of x, zero-padded, back to back."""
    padded = np.zeros((len(indices), P.LANES), np.float32)
    for row, b in enumerate(indices):
        part = x[b * P.LANES:(b + 1) * P.LANES]
        padded[row, :len(part)] = part
    return padded.reshape(-1)


def compile_kernels() -> None:
    """Compile (or load from numba's cache) every kernel a communicator runs, of one shard and
    of several: once, before starting many worker processes at once. A cold compile takes
    seconds of CPU; workers that each did it at start, on the same cores, would reach their
    first call far apart, and the first ones would wait on the last beyond the silence bound."""
    from host_lib.engine.links import UdpTunnelLink

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sink:
        sink.bind(("127.0.0.1", 0))
        worker = Endpoint("02:00:00:00:00:01", "127.0.0.1")
        for shards in (1, 2):
            config = CommunicatorConfig(job=1, worker=0, n_workers=1, slots=4,
                                        local=worker, switch=worker, run=1, shards=shards)
            link = UdpTunnelLink(sink.getsockname(), reply_to_sender=True)
            SwitchCommunicator(config, link).close(linger=0)

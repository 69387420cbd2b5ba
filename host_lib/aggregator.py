"""Allreduce through the switch for one job and worker: the object a training process uses.

    agg = SwitchAggregator(AggregatorConfig.from_spec(spec, worker_id), link, fallback_group=pg)
    total = agg.allreduce(grad)                      # float32: quantized, exact integer sum
    mean = agg.allreduce(grad, average=True)
    counts = agg.allreduce_int(np.array([...], np.int32))
    fut = agg.allreduce_async(grad)                  # concurrent.futures.Future

Calls run one after another on the aggregator's I/O thread, in the order they were made, so
every worker walks the same chunk ids. A float32 call quantizes with the agreed per-block scales
(docs/protocol.md §5), streams the blocks through the switch, repairs any block a worker had to
clip, and dequantizes. If the switch falls silent and a fallback process group is given, the
workers agree with one small collective, and all of them complete that call through gloo.
"""

from __future__ import annotations

import concurrent.futures
import logging
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from host_lib import protocol as P
from host_lib.codec import Endpoint, FrameBatch
from host_lib.quantize import BlockQuantizer, num_blocks, predict_scales
from host_lib.rto import RtoEstimator
from host_lib.transport import CallStats, ProtocolError, Round, SwitchSilent, Transport

if TYPE_CHECKING:
    from host_lib.fallback import FallbackGroup

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AggregatorConfig:
    job: int
    worker: int
    n_workers: int
    slots: int  # the job's window W
    local: Endpoint  # this worker's MAC, IP and UDP port
    switch: Endpoint  # the address workers send to
    silence_timeout: float = 5.0
    initial_rto: float = 0.05
    quantizer_threads: int = 1

    @classmethod
    def from_spec(cls, spec, worker_id: int, **overrides) -> AggregatorConfig:
        """Configuration of one worker of a control_plane.jobs.JobSpec."""
        w = spec.worker(worker_id)
        return cls(job=spec.id, worker=w.id, n_workers=len(spec.workers), slots=spec.slots,
                   local=Endpoint(w.mac, w.ip, w.udp_port),
                   switch=Endpoint(spec.switch_mac, spec.switch_ip, P.UDP_PORT), **overrides)


@dataclass
class _Call:
    values: np.ndarray
    quantized: bool
    average: bool
    tag: object
    future: concurrent.futures.Future = field(default_factory=concurrent.futures.Future)


class SwitchAggregator:
    def __init__(self, config: AggregatorConfig, link, fallback_group: FallbackGroup | None = None):
        self.config = config
        self.link = link
        self.fallback = fallback_group
        self.transport = Transport(link, config.job, config.worker, config.slots,
                                   RtoEstimator(initial=config.initial_rto),
                                   config.silence_timeout)
        self.quantizer = BlockQuantizer(config.n_workers, threads=config.quantizer_threads)
        self.frames = FrameBatch(config.local, config.switch)
        self.next_chunk = 0
        self.history: dict[object, np.ndarray] = {}  # tag -> last result exponents per block
        self.last_stats: CallStats | None = None
        self._calls: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._serve, name=f"sa-atp-job{config.job}",
                                        daemon=True)
        self._thread.start()

    # -- API --------------------------------------------------------------------------------

    def allreduce(self, values, average: bool = False, tag=None) -> np.ndarray:
        """Sum (or mean) of a float32 array over the job's workers; blocks."""
        return self.allreduce_async(values, average, tag).result()[0]

    def allreduce_int(self, values) -> np.ndarray:
        """Exact int32 sum over the job's workers (wraps modulo 2^32 like any int32 sum)."""
        return self.allreduce_int_async(values).result()[0]

    def allreduce_async(self, values, average: bool = False, tag=None
                        ) -> concurrent.futures.Future:
        """Future of (result, CallStats). ``tag`` names the tensor so that its quantization
        scales are predicted from its previous result (default: its length)."""
        values = np.asarray(values)
        if values.dtype != np.float32:
            raise TypeError(f"allreduce takes float32 (use allreduce_int for int32), got "
                            f"{values.dtype}")
        return self._submit(_Call(values.reshape(-1), True, average,
                                  ("len", values.size) if tag is None else tag))

    def allreduce_int_async(self, values) -> concurrent.futures.Future:
        values = np.asarray(values)
        if values.dtype != np.int32:
            raise TypeError(f"allreduce_int takes int32, got {values.dtype}")
        return self._submit(_Call(values.reshape(-1), False, False, None))

    def close(self) -> None:
        self._calls.put(None)
        self._thread.join(timeout=5)
        self.link.close()

    def __enter__(self) -> SwitchAggregator:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- the I/O thread -----------------------------------------------------------------------

    def _submit(self, call: _Call) -> concurrent.futures.Future:
        if not self._thread.is_alive():
            raise RuntimeError("aggregator is closed")
        self._calls.put(call)
        return call.future

    def _serve(self) -> None:
        while (call := self._calls.get()) is not None:
            if not call.future.set_running_or_notify_cancel():
                continue
            try:
                call.future.set_result(self._run_call(call))
            except BaseException as exc:  # noqa: BLE001 - handed to the caller's future
                call.future.set_exception(exc)

    def _run_call(self, call: _Call) -> tuple[np.ndarray, CallStats]:
        stats = CallStats(elements=call.values.size)
        started = time.perf_counter()
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
                result = self.fallback.allreduce(call.values, call.average, self.config.n_workers)
        elif failure is not None:
            raise failure
        stats.elapsed_s = time.perf_counter() - started
        self.last_stats = stats
        return result, stats

    # -- the switch path ----------------------------------------------------------------------

    def _round(self, lanes: np.ndarray, scales, exps, stats: CallStats) -> Round:
        """Frames for the next ``len(lanes)`` chunk ids, pushed through the switch."""
        n = len(lanes)
        chunks = (self.next_chunk + np.arange(n, dtype=np.int64)) & 0xFFFFFFFF
        slots = chunks % self.config.slots
        sets = (chunks // self.config.slots) % 2
        frames = self.frames.encode(op=P.Op.DATA, job=self.config.job, worker=self.config.worker,
                                    slot=slots, chunk=chunks, flags=sets, scale=scales, exp=exps,
                                    lanes=lanes)
        rnd = Round(frames, self.next_chunk)
        self.next_chunk = (self.next_chunk + n) & 0xFFFFFFFF
        self.transport.run(rnd, stats)
        return rnd

    def _switch_int(self, call: _Call, stats: CallStats) -> np.ndarray:
        nb = num_blocks(call.values.size)
        lanes = np.zeros((nb, P.LANES), np.int32)
        lanes.reshape(-1)[:call.values.size] = call.values
        rnd = self._round(lanes, 0, 0, stats)
        return rnd.sums.reshape(-1)[:call.values.size].copy()

    def _switch_quantized(self, call: _Call, stats: CallStats) -> np.ndarray:
        x = call.values
        nb = num_blocks(x.size)
        scales = predict_scales(self.history.get(call.tag), nb)
        lanes, exps = self.quantizer.quantize(x, scales)
        rnd = self._round(lanes, scales, exps, stats)
        sums, result_exps = rnd.sums, rnd.exps.copy()
        clipped = np.nonzero((result_exps > scales) & (result_exps != P.EXP_NONFINITE))[0]
        if len(clipped):
            # Every worker sees the same results, so every worker repairs the same blocks, with
            # the exponent the switch reported as sufficient (docs/protocol.md §5).
            stats.repairs = len(clipped)
            scales = scales.copy()
            scales[clipped] = result_exps[clipped]
            repair_lanes, repair_exps = self.quantizer.quantize(
                _blocks(x, clipped), scales[clipped])
            repair = self._round(repair_lanes, scales[clipped], repair_exps, stats)
            sums = sums.copy()
            sums[clipped] = repair.sums
            result_exps[clipped] = repair.exps
        self.history[call.tag] = result_exps
        divisor = self.config.n_workers if call.average else 1.0
        return self.quantizer.dequantize(sums, scales, result_exps, x.size, divisor)


def _blocks(x: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """The given K-value blocks of x, zero-padded, back to back."""
    padded = np.zeros((len(indices), P.LANES), np.float32)
    for row, b in enumerate(indices):
        part = x[b * P.LANES:(b + 1) * P.LANES]
        padded[row, :len(part)] = part
    return padded.reshape(-1)

"""Quantize+dequantize throughput as a ratio to a plain numpy copy of the same array."""

from __future__ import annotations

import numpy as np

from bench.timing import interleaved_best
from host_lib.engine.quantize import BlockQuantizer, block_exponents, num_blocks, predict_scales

GOAL = 0.5


def run(elements: int = 1 << 24, n_workers: int = 8) -> dict:
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(elements) * 1e-2).astype(np.float32)
    nb = num_blocks(elements)
    scales = predict_scales(block_exponents(x), nb)
    copy_out = np.empty_like(x)
    result = {"elements": elements, "n_workers": n_workers, "goal_ratio": GOAL}
    for threads in (1, 2):
        q = BlockQuantizer(n_workers, threads=threads)
        lanes, exps = q.quantize(x, scales)
        deq_out = np.empty_like(x)
        times = interleaved_best({
            "copy": lambda: np.copyto(copy_out, x),
            "quantize": lambda q=q, lanes=lanes: q.quantize(x, scales, out=lanes),
            "dequantize": lambda q=q, lanes=lanes, exps=exps, out=deq_out: q.dequantize(
                lanes, scales, exps, elements, out=out),
        })
        ratio = times["copy"] / (times["quantize"] + times["dequantize"])
        result[f"threads_{threads}"] = {
            "copy_s": times["copy"], "quantize_s": times["quantize"],
            "dequantize_s": times["dequantize"], "ratio_to_copy": ratio,
            "quantize_GBps": x.nbytes / times["quantize"] / 1e9,
        }
    return result


def summary(r: dict) -> list[str]:
    lines = []
    for threads in (1, 2):
        t = r[f"threads_{threads}"]
        lines.append(f"quantize+dequantize, {threads} thread(s): ratio to numpy copy "
                     f"{t['ratio_to_copy']:.2f} (goal >= {r['goal_ratio']}); quantize "
                     f"{t['quantize_GBps']:.1f} GB/s over {r['elements']:,} float32")
    return lines

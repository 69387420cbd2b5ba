"""Timing shared by the benchmarks: best-of-N wall time, measured in one process so
that ratios between two measurements taken side by side are meaningful on a shared machine."""

from __future__ import annotations

import time
from collections.abc import Callable


def interleaved_best(fns: dict[str, Callable[[], object]], repeat: int = 15) -> dict[str, float]:
    """Best time of each function, running them in turns so that background load hits each
    about equally."""
    for fn in fns.values():
        fn()
    best = {name: float("inf") for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t0)
    return best

"""Small timing helpers shared by the benchmarks: best-of-N wall time, measured in one process so
that ratios between two measurements taken side by side are meaningful on a shared machine."""

from __future__ import annotations

import time
from collections.abc import Callable


def best_time(fn: Callable[[], object], repeat: int = 15, warmup: int = 2) -> float:
    """Fastest of ``repeat`` runs of ``fn`` in seconds, after ``warmup`` untimed runs."""
    for _ in range(warmup):
        fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


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

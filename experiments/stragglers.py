"""Straggler injection and emulated compute for experiments.

A worker's compute time per iteration is ``base_time * slowdown``, where

* ``base_time`` is either the measured time of the real forward/backward pass on the small model,
  or, in emulated-compute mode, the step time of a real model on a real GPU for the worker's batch
  size, ``t(b) = a * b + c``, from a measured profile (experiments/profiles/h100_step_times.json,
  measured on an H100), so that 2-core experiments reflect GPU clusters;
* ``slowdown`` comes from a :class:`SlowdownSchedule`: static factors per worker (a persistent
  straggler, or a heterogeneous cluster of speed classes, as GPUs of different generations),
  random transient slowdowns, or both.

Workers pad their real compute with a sleep up to the target time.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

PROFILES = Path(__file__).resolve().parent / "profiles" / "h100_step_times.json"


@dataclass(frozen=True)
class StepTimeProfile:
    """t(b) = a * b + c seconds for a mini-batch of b samples."""

    a: float
    c: float
    model: str = ""
    grad_bytes: int = 0  # the model's float32 gradient, where the profile records it

    def time(self, batch: int) -> float:
        return self.a * batch + self.c if batch > 0 else 0.0

    @classmethod
    def load(cls, path: str | Path, model: str) -> StepTimeProfile:
        models = json.loads(Path(path).read_text())["models"]
        if model not in models:
            raise KeyError(f"no profile for {model!r} in {path}; it has {sorted(models)}")
        m = models[model]
        return cls(m["fit_a_s_per_sample"], m["fit_c_s"], model, m.get("grad_bytes_fp32", 0))


@dataclass
class SlowdownSchedule:
    """Per-worker slowdown factors for each iteration.

    ``static``: {rank: factor} for persistent stragglers. ``transient_prob``: each iteration, each
    worker independently starts a transient slowdown of ``transient_factor`` lasting
    ``transient_len`` iterations with this probability (seeded, identical on every worker).
    """

    static: dict[int, float] = field(default_factory=dict)
    transient_prob: float = 0.0
    transient_factor: float = 3.0
    transient_len: int = 5
    seed: int = 0

    def factor(self, rank: int, iteration: int) -> float:
        f = self.static.get(rank, 1.0)
        if self.transient_prob > 0 and self._transient(rank, iteration):
            f *= self.transient_factor
        return f

    def _transient(self, rank: int, iteration: int) -> bool:
        for start in range(max(0, iteration - self.transient_len + 1), iteration + 1):
            if random.Random(hash((self.seed, rank, start))).random() < self.transient_prob:
                return True
        return False

    @classmethod
    def parse(cls, text: str, classes: str = "", n_workers: int = 0,
              **kwargs) -> SlowdownSchedule:
        """'3x@1,2x@2' -> rank 1 three times slower, rank 2 twice; '' -> none. ``classes``
        ('1,1.6,2.5') makes the ``n_workers`` ranks a heterogeneous cluster
        (:func:`speed_classes`); a straggler's factor multiplies its class's."""
        static = {}
        if classes:
            static = speed_classes([float(f) for f in classes.split(",")], n_workers)
        for part in filter(None, (p.strip() for p in text.split(","))):
            factor, _, rank = part.partition("x@")
            if not rank:
                raise ValueError(f"bad straggler spec {part!r}; expected like '3x@1'")
            static[int(rank)] = static.get(int(rank), 1.0) * float(factor)
        return cls(static=static, **kwargs)


def speed_classes(factors: list[float], n_workers: int) -> dict[int, float]:
    """Slowdown per rank of a cluster of ``len(factors)`` speed classes: the ranks are split
    into contiguous classes as evenly as possible, the first classes taking the extra ranks
    (4 ranks, factors 1, 1.6, 2.5: ranks 0 and 1 at 1, rank 2 at 1.6, rank 3 at 2.5)."""
    if not 0 < len(factors) <= n_workers:
        raise ValueError(f"need between 1 and {n_workers} speed classes, got {factors}")
    base, extra = divmod(n_workers, len(factors))
    out, rank = {}, 0
    for i, factor in enumerate(factors):
        for _ in range(base + (i < extra)):
            out[rank] = factor
            rank += 1
    return out


def pad_to(target_s: float, started: float) -> float:
    """Sleep until ``target_s`` seconds after ``started`` (perf_counter); the time slept."""
    remaining = target_s - (time.perf_counter() - started)
    if remaining > 0:
        time.sleep(remaining)
        return remaining
    return 0.0

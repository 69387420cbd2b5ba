"""SA-ATP against plain in-network aggregation: mean iteration time of the main job's training
(4 workers, ResNet-50 step times of an H100, one worker 2x and 3x slower) with no straggler
handling, with slot takeover only and with full SA-ATP (takeover and compute help), all in the
same run, with the perfect-balance bound and each run's time to accuracy and final accuracy.

The bound is what a job could reach if its compute were perfectly balanced and its communication
cost what it costs today. Compute: with step time ``s_i * (a * b_i + c)`` per worker (slowdown
``s_i``, the profile's ``t(b) = a * b + c``), every worker finishes at the same time ``T`` when
``T = (a * B + n * c) / sum(1 / s_i)``: the total work over the total speed, where each worker's
fixed per-step cost counts as work. Communication: what plain in-network aggregation spends in
each iteration after its slowest worker's compute ends (median over the run), measured in the
same run.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from examples import results
from examples.main_job import parse_args, run_method
from examples.stragglers import StepTimeProfile
from examples.train import PROFILES

FACTORS = (2.0, 3.0)
METHODS = ("switch", "sa-atp-takeover", "sa-atp")
WORKERS = 4
GLOBAL_BATCH = 256
MODEL = "resnet50"
TARGET = 0.95


def balanced_compute_s(profile: StepTimeProfile, slowdowns: list[float], batch: int) -> float:
    """The compute time of an iteration whose batch is split so that every worker finishes at
    once (shares may be fractional: this is a bound)."""
    speed = sum(1.0 / s for s in slowdowns)
    return (profile.a * batch + len(slowdowns) * profile.c) / speed


def comm_after_compute_s(run: results.Run) -> float:
    """Median over iterations (the first left out) of the iteration time beyond the slowest
    worker's compute: communication and everything else compute does not hide."""
    return float(np.median((run.iter_s - run.compute_s.max(axis=1))[1:]))


def run(iterations: int = 150) -> dict:
    profile = StepTimeProfile.load(PROFILES, MODEL)
    out = {"workers": WORKERS, "global_batch": GLOBAL_BATCH, "profile": MODEL,
           "iterations": iterations, "target_accuracy": TARGET, "factors": {}}
    with tempfile.TemporaryDirectory(prefix="sa-atp-bench-") as tmp:
        for factor in FACTORS:
            args = parse_args(["--methods", ",".join(METHODS), "--straggler", f"{factor:g}",
                               "--iterations", str(iterations), "--workers", str(WORKERS),
                               "--global-batch", str(GLOBAL_BATCH), "--profile", MODEL,
                               "--target-accuracy", str(TARGET),
                               "--out", str(Path(tmp) / f"{factor:g}x"), "--quiet"])
            runs = {m: run_method(args, m) for m in METHODS}
            compute = balanced_compute_s(profile, [1.0] * (WORKERS - 1) + [factor],
                                         GLOBAL_BATCH)
            comm = comm_after_compute_s(runs["switch"])
            stats = {m: results.summary(r, TARGET) for m, r in runs.items()}
            plain = stats["switch"]["iter_mean_ms"]
            bound_ms = (compute + comm) * 1e3
            out["factors"][f"{factor:g}x"] = {
                "methods": stats,
                "vs_plain": {m: round(s["iter_mean_ms"] / plain, 3) for m, s in stats.items()},
                "bound_ms": round(bound_ms, 2),
                "bound_compute_ms": round(compute * 1e3, 2),
                "bound_comm_ms": round(comm * 1e3, 2),
                "sa_atp_vs_bound": round(stats["sa-atp"]["iter_mean_ms"] / bound_ms, 3),
                "accuracy_loss_pp": round(100 * (stats["switch"]["final_accuracy"]
                                                 - stats["sa-atp"]["final_accuracy"]), 2),
            }
    return out


def summary(result: dict) -> list[str]:
    lines = [f"{result['workers']} workers, {result['profile']} step times, one straggler "
             f"(iteration mean, first iteration left out; goal at 3x: sa-atp <= 0.5x plain "
             f"and <= 1.1x the bound)"]
    for factor, r in result["factors"].items():
        parts = [f"{m} {s['iter_mean_ms']:.1f} ms ({r['vs_plain'][m]:.2f}x)"
                 for m, s in r["methods"].items()]
        lines.append(f"{factor}: " + ", ".join(parts))
        lines.append(f"     bound {r['bound_ms']:.1f} ms (compute {r['bound_compute_ms']:.1f} "
                     f"+ comm {r['bound_comm_ms']:.1f}); sa-atp = {r['sa_atp_vs_bound']:.2f}x "
                     f"the bound")
        accs = ", ".join(f"{m} {s['final_accuracy']:.3f} / "
                         f"{'-' if s['time_to_target_s'] is None else s['time_to_target_s']} s"
                         for m, s in r["methods"].items())
        lines.append(f"     final accuracy / time to {result['target_accuracy']:.0%}: {accs}")
    return lines


"""SA-ATP against plain in-network aggregation, scenario by scenario (the policy harness's:
experiments/harness.py): mean iteration time of plain aggregation, slot takeover only, SA-ATP
without work stealing (takeover and the re-split from history) and full SA-ATP, all in the same
run, with each run's time to accuracy and final accuracy, and, where every worker's slowdown is
static, the perfect-balance bound.

The bound is what a job could reach if its compute were perfectly balanced and its communication
cost what it costs today. Compute: with step time ``s_i * (a * b_i + c)`` per worker (slowdown
``s_i``, the profile's ``t(b) = a * b + c``), every worker finishes at the same time ``T`` when
``T = (a * B + n * c) / sum(1 / s_i)``: the total work over the total speed, where each worker's
fixed per-step cost counts as work. Communication: what plain in-network aggregation spends in
each iteration after its slowest worker's compute ends (median over the run), measured in the
same run on the same job *without* its stragglers, where every worker's contributions reach the
switch together, as they do when compute is balanced. (With the straggler, the leaders'
contributions already wait in the switch when the straggler's arrive, so the tail after its
compute is shorter than a balanced job's can be: 6–10 ms against ~10 ms at static 3x. The bound
with that tail is reported too, as ``sa_atp_vs_straggler_tail_bound``.)

In the multi-job and shared-pool scenarios a second job trains beside the measured one on the
same switch (in shared-pool borrowing from the same pool of aggregators); its
iteration mean beside each method is recorded too (takeover would pay there if the straggler's
held aggregators cost the neighbour anything).

Goals (issue 18): at static 3x, SA-ATP <= 0.5x plain and <= 1.05x the bound; without a
straggler, work stealing costs <= 3 % (SA-ATP vs SA-ATP without stealing); takeover alone
>= 20 % faster than plain in some scenario.
"""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np

from experiments import harness, results
from experiments.stragglers import PROFILES, SlowdownSchedule, StepTimeProfile

SCENARIOS = ("none", "static-2x", "static-3x", "transient", "comm-heavy", "multi-job",
             "shared-pool")
METHODS = ("switch", "sa-atp-takeover", "sa-atp-resplit", "sa-atp")
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


def static_slowdowns(scenario: harness.Scenario) -> list[float] | None:
    """Every worker's slowdown when the scenario's are static, else None."""
    if scenario.transient_prob:
        return None
    schedule = SlowdownSchedule.parse(scenario.stragglers, classes=scenario.speed_classes,
                                      n_workers=WORKERS)
    return [schedule.factor(w, 0) for w in range(WORKERS)]


def without_stragglers(scenario: harness.Scenario) -> harness.Scenario:
    return replace(scenario, description=f"{scenario.description}, without stragglers",
                   stragglers="", speed_classes="", transient_prob=0.0)


def job_key(scenario: harness.Scenario) -> tuple | None:
    """What sets a scenario's communication, for a scenario without stragglers (else None)."""
    if scenario.stragglers or scenario.speed_classes or scenario.transient_prob:
        return None
    return scenario.pad_gradient, scenario.slots, scenario.borrow, scenario.neighbour


def run(iterations: int = 100) -> dict:
    profile = StepTimeProfile.load(PROFILES, MODEL)
    out = {"workers": WORKERS, "global_batch": GLOBAL_BATCH, "profile": MODEL,
           "iterations": iterations, "target_accuracy": TARGET, "scenarios": {}}
    with tempfile.TemporaryDirectory(prefix="sa-atp-bench-") as tmp:
        args = harness.parse_args(["--iterations", str(iterations), "--workers", str(WORKERS),
                                   "--global-batch", str(GLOBAL_BATCH), "--profile", MODEL,
                                   "--target-accuracy", str(TARGET)])
        balanced_tails: dict[tuple, float] = {}  # per job_key: the tail without stragglers
        for name in SCENARIOS:
            scenario = harness.SCENARIOS[name]
            runs = {}
            for method in METHODS:
                print(f"    {name} / {method}", flush=True)
                runs[method] = harness.run(args, scenario, method, Path(tmp) / name / method,
                                             args.seed)
            if job_key(scenario) is not None:
                balanced_tails[job_key(scenario)] = comm_after_compute_s(runs["switch"])
            stats = {m: results.summary(r, TARGET) for m, r in runs.items()}
            if scenario.neighbour:
                for m in METHODS:
                    stats[m]["neighbour_iter_mean_ms"] = harness.neighbour_iter_mean_ms(
                        Path(tmp) / name / m)
            plain = stats["switch"]["iter_mean_ms"]
            row = {"methods": stats,
                   "vs_plain": {m: round(s["iter_mean_ms"] / plain, 3) for m, s in stats.items()},
                   "stealing_vs_without": round(stats["sa-atp"]["iter_mean_ms"]
                                                / stats["sa-atp-resplit"]["iter_mean_ms"], 3),
                   "accuracy_loss_pp": round(100 * (stats["switch"]["final_accuracy"]
                                                    - stats["sa-atp"]["final_accuracy"]), 2)}
            slowdowns = static_slowdowns(scenario)
            if slowdowns is not None:
                compute = balanced_compute_s(profile, slowdowns, GLOBAL_BATCH)
                alone = without_stragglers(scenario)
                if job_key(alone) not in balanced_tails:
                    print(f"    {name} without stragglers / switch", flush=True)
                    balanced_tails[job_key(alone)] = comm_after_compute_s(harness.run(
                        args, alone, "switch", Path(tmp) / f"{name}-alone" / "switch", args.seed))
                comm = balanced_tails[job_key(alone)]
                tail = comm_after_compute_s(runs["switch"])
                sa_atp = stats["sa-atp"]["iter_mean_ms"]
                row.update(bound_ms=round((compute + comm) * 1e3, 2),
                           bound_compute_ms=round(compute * 1e3, 2),
                           bound_comm_ms=round(comm * 1e3, 2),
                           sa_atp_vs_bound=round(sa_atp / ((compute + comm) * 1e3), 3),
                           straggler_tail_ms=round(tail * 1e3, 2),
                           sa_atp_vs_straggler_tail_bound=round(
                               sa_atp / ((compute + tail) * 1e3), 3))
            out["scenarios"][name] = row
    return out


def summary(result: dict) -> list[str]:
    lines = [f"{result['workers']} workers, {result['profile']} step times (iteration mean, "
             "first iteration left out; goals: static-3x sa-atp <= 0.5x plain and <= 1.05x the "
             "bound, none: stealing <= 1.03x without, takeover <= 0.8x plain somewhere)"]
    for name, r in result["scenarios"].items():
        parts = [f"{m} {s['iter_mean_ms']:.1f} ms ({r['vs_plain'][m]:.2f}x)"
                 for m, s in r["methods"].items()]
        lines.append(f"{name}: " + ", ".join(parts))
        extra = f"     sa-atp = {r['stealing_vs_without']:.3f}x sa-atp-resplit"
        if "bound_ms" in r:
            extra += (f"; bound {r['bound_ms']:.1f} ms (compute {r['bound_compute_ms']:.1f} + "
                      f"comm {r['bound_comm_ms']:.1f} without stragglers); sa-atp = "
                      f"{r['sa_atp_vs_bound']:.2f}x the bound "
                      f"({r['sa_atp_vs_straggler_tail_bound']:.2f}x "
                      f"with plain aggregation's tail after the straggler, "
                      f"{r['straggler_tail_ms']:.1f} ms)")
        lines.append(extra)
        if "neighbour_iter_mean_ms" in r["methods"]["switch"]:
            lines.append("     the neighbour job's iteration mean beside each: " + ", ".join(
                f"{m} {s['neighbour_iter_mean_ms']:.1f} ms" for m, s in r["methods"].items()))
        accs = ", ".join(f"{m} {s['final_accuracy']:.3f} / "
                         f"{'-' if s['time_to_target_s'] is None else s['time_to_target_s']} s"
                         for m, s in r["methods"].items())
        lines.append(f"     final accuracy / time to {result['target_accuracy']:.0%}: {accs}")
    return lines

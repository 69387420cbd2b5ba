"""Reading the per-iteration logs of training runs, and turning them into the table and plots
people compare (shared by the main job and the policy harness)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass
class Run:
    name: str
    iter_s: np.ndarray  # per iteration: the slowest rank's iteration time
    t: np.ndarray  # per iteration: wall time since the start (rank 0)
    accuracy: list[tuple[float, float]]  # (wall time, test accuracy), rank 0
    compute_s: np.ndarray  # per iteration and rank
    fallback_calls: int

    @property
    def final_accuracy(self) -> float:
        return self.accuracy[-1][1] if self.accuracy else float("nan")

    def time_to_accuracy(self, target: float) -> float | None:
        return next((t for t, acc in self.accuracy if acc >= target), None)

    def straggler_wait_s(self) -> np.ndarray:
        """Per iteration and rank: how long the rank waited for the slowest rank's compute."""
        return self.compute_s.max(axis=1, keepdims=True) - self.compute_s


def load_run(name: str, log_dir: Path) -> Run:
    ranks = sorted(log_dir.glob("rank*.jsonl"), key=lambda p: int(p.stem[4:]))
    if not ranks:
        raise FileNotFoundError(f"no rank*.jsonl logs in {log_dir}")
    records = [[json.loads(line) for line in p.read_text().splitlines()] for p in ranks]
    n = min(len(r) for r in records)
    iter_s = np.array([[r[i]["iter_s"] for r in records] for i in range(n)])
    compute = np.array([[r[i]["compute_s"] for r in records] for i in range(n)])
    rank0 = records[0][:n]
    acc = [(rec["t"], rec["test_acc"]) for rec in rank0 if "test_acc" in rec]
    fallback = sum(rec.get("fallback", 0) for r in records for rec in r)
    return Run(name, iter_s.max(axis=1), np.array([rec["t"] for rec in rank0]), acc, compute,
               fallback)


def table(runs: list[Run], target: float) -> str:
    """A Markdown table; ratios are to the first run."""
    head = ("| method | iteration mean (ms) | p50 (ms) | p99 (ms) | vs first | "
            f"time to {target:.0%} (s) | final accuracy |")
    lines = [head, "|---|---:|---:|---:|---:|---:|---:|"]
    base = runs[0].iter_s.mean()
    for r in runs:
        tta = r.time_to_accuracy(target)
        lines.append(f"| {r.name} | {r.iter_s.mean() * 1e3:.1f} | "
                     f"{np.percentile(r.iter_s, 50) * 1e3:.1f} | "
                     f"{np.percentile(r.iter_s, 99) * 1e3:.1f} | {r.iter_s.mean() / base:.2f}x | "
                     f"{'not reached' if tta is None else f'{tta:.1f}'} | "
                     f"{r.final_accuracy:.3f} |")
    return "\n".join(lines)


def plot_iteration_times(runs: list[Run], path: Path, title: str = "") -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4.5))
    for r in runs:
        ax.plot(np.arange(len(r.iter_s)), r.iter_s * 1e3, label=r.name, linewidth=1)
    ax.set_xlabel("iteration")
    ax.set_ylabel("iteration time (ms)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path

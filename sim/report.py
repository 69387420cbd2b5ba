"""Tables and plots of the simulation results (docs/results/sim)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from experiments import result_files
from experiments.results import pivot_table
from sim.studies import Study


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt




def label(x) -> str:
    if isinstance(x, str):
        return x
    if x >= 1e9:
        return f"{x / 1e9:g}"
    return f"{x:g}" if x >= 1 else f"1/{round(1 / x)}"


def study_table(study: Study, rows: list[dict], baseline: str) -> str:
    """Markdown: one row per method, one column per x; each cell the mean iteration time in ms
    (and the other jobs'), then its change against ``baseline`` and the time-to-accuracy
    speedup over it."""
    def cell(r: dict) -> str:
        text = f"{r['iter_ms']:.1f}"
        if "others_ms" in r:
            text += f" / {r['others_ms']:.1f}"
        if r["method"] != baseline and "tta_speedup" in r:
            text += f" ({r['iter_vs_base']:+.0%}, {r['tta_speedup']:.2f}x)"
        return text

    return pivot_table([r for r in rows if r["study"] == study.name], "x", study.xlabel, cell,
                       label)


def plot_study(study: Study, rows: list[dict], path: Path, baseline: str) -> Path:
    """Left: mean iteration time per method against x (for several jobs, the straggling
    job's solid and the others' dashed); right: time-to-accuracy speedup over ``baseline``."""
    plt = _plt()
    mine = [r for r in rows if r["study"] == study.name]
    xs = list(dict.fromkeys(r["x"] for r in mine))
    methods = list(dict.fromkeys(r["method"] for r in mine))
    numeric = not any(isinstance(x, str) for x in xs)
    pos = xs if numeric else list(range(len(xs)))
    cmap = plt.get_cmap("tab10")
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for i, m in enumerate(methods):
        got = {r["x"]: r for r in mine if r["method"] == m}
        px = [p for p, x in zip(pos, xs, strict=True) if x in got]
        color = cmap(i % 10)
        left.plot(px, [got[x]["iter_ms"] for x in xs if x in got], "o-", color=color, label=m)
        if any("others_ms" in got[x] for x in got):
            left.plot(px, [got[x]["others_ms"] for x in xs if x in got], "s--", color=color)
        right.plot(px, [got[x].get("tta_speedup", np.nan) for x in xs if x in got], "o-",
                   color=color)
    for ax in (left, right):
        ax.set_xlabel(study.xlabel)
        ax.grid(alpha=0.3)
        if numeric and max(xs) / min(xs) >= 8:
            ax.set_xscale("log")
        ax.set_xticks(pos, [label(x) for x in xs])
        ax.minorticks_off()
    left.set_ylabel("iteration time (ms)" + (" — dashed: the other jobs"
                                             if any("others_ms" in r for r in mine) else ""))
    left.set_ylim(bottom=0)
    right.set_ylabel(f"time-to-accuracy speedup over {baseline}")
    right.axhline(1.0, color="grey", linewidth=0.8)
    fig.suptitle(study.title, fontsize=10)
    fig.legend(loc="lower center", ncol=min(len(methods), 9), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.08, 1, 0.95))
    result_files.save_figure(fig, path, dpi=90)
    plt.close(fig)
    return path


def plot_calibration(rows: list[dict], path: Path, tolerance: float) -> Path:
    """Simulated against testbed iteration times, one point per scenario and method, with the
    tolerance band."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5.5, 5))
    tb = np.array([r["testbed_ms"] for r in rows])
    sim = np.array([r["sim_ms"] for r in rows])
    line = np.array([0, tb.max() * 1.1])
    ax.fill_between(line, line * (1 - tolerance), line * (1 + tolerance), color="grey",
                    alpha=0.2, label=f"±{tolerance:.0%}")
    ax.plot(line, line, color="grey", linewidth=0.8)
    scenarios = list(dict.fromkeys(r["scenario"] for r in rows))
    for i, s in enumerate(scenarios):
        ok = np.array([r["scenario"] == s for r in rows])
        ax.scatter(tb[ok], sim[ok], s=18, label=s, color=plt.get_cmap("tab10")(i))
    ax.set_xlabel("testbed iteration time (ms)")
    ax.set_ylabel("simulated (ms)")
    ax.set_xlim(0, line[1])
    ax.set_ylim(0, line[1])
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    result_files.save_figure(fig, path, dpi=90)
    plt.close(fig)
    return path

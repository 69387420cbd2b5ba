"""Reading the per-iteration logs of training runs, and turning them into the table and plots
people compare (shared by the main job and the policy harness)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from experiments import result_files


@dataclass
class Run:
    name: str
    iter_s: np.ndarray  # per iteration: how long the job took for it (see load_run)
    t: np.ndarray  # per iteration: wall time since the start when it ended
    accuracy: list[tuple[float, float]]  # (wall time, test accuracy of that iteration's model)
    compute_s: np.ndarray  # per iteration and rank
    fallback_calls: int

    @property
    def final_accuracy(self) -> float:
        return self.accuracy[-1][1] if self.accuracy else float("nan")

    def time_to_accuracy(self, target: float) -> float | None:
        return next((t for t, acc in self.accuracy if acc >= target), None)


def load_run(name: str, log_dir: Path) -> Run:
    """A run from its per-rank logs. An iteration ends when its update first exists on some
    rank: with k-of-n a late worker may finish an iteration long after the others, and the
    job's progress is the others'. Iteration times are the gaps between those ends (logs
    without wall-clock ends fall back to the slowest rank's own iteration time)."""
    ranks = sorted(log_dir.glob("rank*.jsonl"), key=lambda p: int(p.stem[4:]))
    if not ranks:
        raise FileNotFoundError(f"no rank*.jsonl logs in {log_dir}")
    records = [[json.loads(line) for line in p.read_text().splitlines()] for p in ranks]
    n = min(len(r) for r in records)
    compute = np.array([[r[i]["compute_s"] for r in records] for i in range(n)])
    rank0 = records[0][:n]
    if all("end" in r[i] for r in records for i in range(n)):
        ends = np.array([[r[i]["end"] for r in records] for i in range(n)]).min(axis=1)
        start = min(r[0]["end"] - r[0]["t"] for r in records)
        t = ends - start
        iter_s = np.diff(t, prepend=0.0)
    else:
        iter_s = np.array([[r[i]["iter_s"] for r in records] for i in range(n)]).max(axis=1)
        t = np.array([rec["t"] for rec in rank0])
    acc = [(float(t[i]), rec["test_acc"]) for i, rec in enumerate(rank0) if "test_acc" in rec]
    fallback = sum(rec.get("fallback", 0) for r in records for rec in r)
    return Run(name, iter_s, t, acc, compute, fallback)


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


WARM_UP = 1  # iterations the plots leave out: the first compiles the quantizer, opens links


def _warm_up_note(runs: list[Run]) -> str:
    """What the plots leave out, so that the steady state fills the axis."""
    times = [r.iter_s[:WARM_UP].sum() * 1e3 for r in runs if len(r.iter_s)]
    span = f"{min(times):.0f}-{max(times):.0f} ms" if times else "-"
    return f"first iteration (warm-up, {span}) not shown"


def plot_iteration_times(runs: list[Run], path: Path, title: str = "") -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4.5))
    for r in runs:
        ax.plot(np.arange(WARM_UP, len(r.iter_s)), r.iter_s[WARM_UP:] * 1e3, label=r.name,
                linewidth=1)
    ax.set_xlabel("iteration")
    ax.set_ylabel("iteration time (ms)")
    ax.set_title(f"{title}\n{_warm_up_note(runs)}" if title else _warm_up_note(runs), fontsize=10)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    result_files.save_figure(fig, path, dpi=120)
    plt.close(fig)
    return path


def summary(run: Run, target: float) -> dict:
    """One run's numbers, as the harness's CSV and tables report them. The iteration-time
    statistics leave out the first iteration, which compiles the quantizer and opens every
    connection whatever the method (it still counts in the time to accuracy)."""
    tta = run.time_to_accuracy(target)
    steady = run.iter_s[1:] if len(run.iter_s) > 1 else run.iter_s
    return {"iterations": len(run.iter_s),
            "iter_mean_ms": round(float(steady.mean()) * 1e3, 2),
            "iter_p50_ms": round(float(np.percentile(steady, 50)) * 1e3, 2),
            "iter_p99_ms": round(float(np.percentile(steady, 99)) * 1e3, 2),
            "time_to_target_s": None if tta is None else round(tta, 2),
            "final_accuracy": round(run.final_accuracy, 4),
            "total_s": round(float(run.t[-1]), 2),
            "fallback_calls": run.fallback_calls}


def write_csv(rows: list[dict], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    return result_files.write_csv(rows, path)


_MEDIAN_FIELDS = ("iter_mean_ms", "iter_p50_ms", "iter_p99_ms", "final_accuracy", "total_s",
                  "neighbour_iter_mean_ms")


def median_rows(rows: list[dict]) -> list[dict]:
    """One row per (scenario, method), in order of appearance, from runs repeated with several
    seeds: the median of each number. In the time to the target, a run that never got there
    counts as longer than any that did (so the median is None when half or more never did);
    ``tta_min_s``/``tta_max_s`` span the runs that got there, ``not_reached`` counts the rest.

    ``iter_vs_first`` and ``tta_vs_first`` compare each method with the scenario's first one
    seed by seed (the median of the per-seed ratios): two runs of one seed, made one after the
    other, share the machine's state of the moment, which moves a cell by more than the
    methods differ (docs/policies.md §7), so a ratio of medians over different moments says
    less than the median of paired ratios."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        groups.setdefault((r["scenario"], r["method"]), []).append(r)
    first_method: dict[str, str] = {}  # per scenario, its first method
    for scenario, method in groups:
        first_method.setdefault(scenario, method)
    first = {(scenario, r.get("seed")): r  # (scenario, seed) -> that method's run
             for scenario, method in first_method.items() for r in groups[(scenario, method)]}
    out = []
    for group in groups.values():
        paired = [(r, first[(r["scenario"], r.get("seed"))]) for r in group
                  if (r["scenario"], r.get("seed")) in first]
        row = dict(group[0])
        row.pop("seed", None)
        for field in _MEDIAN_FIELDS:
            values = [r[field] for r in group if r.get(field) is not None]
            row[field] = round(float(np.median(values)), 4) if values else None
        reached = [r["time_to_target_s"] for r in group if r["time_to_target_s"] is not None]
        tta = float(np.median(reached + [np.inf] * (len(group) - len(reached))))
        row["time_to_target_s"] = round(tta, 2) if np.isfinite(tta) else None
        row["fallback_calls"] = sum(r.get("fallback_calls", 0) for r in group)
        row.update(seeds=len(group), tta_min_s=min(reached, default=None),
                   tta_max_s=max(reached, default=None), not_reached=len(group) - len(reached),
                   iter_vs_first=_median_ratio(paired, "iter_mean_ms"),
                   tta_vs_first=_median_ratio(paired, "time_to_target_s"))
        out.append(row)
    return out


def _median_ratio(paired: list[tuple[dict, dict]], field: str) -> float | None:
    """The median of ``run[field] / reference[field]`` over the pairs where both have one."""
    ratios = [r[field] / ref[field] for r, ref in paired
              if r.get(field) is not None and ref.get(field)]
    return round(float(np.median(ratios)), 4) if ratios else None


def _best_time_to_target(rows: list[dict]) -> float | None:
    return min((r["time_to_target_s"] for r in rows if r["time_to_target_s"] is not None),
               default=None)


def _time_to_target_text(row: dict, best: float | None) -> str:
    """The row's time to the target (s), in bold when it is ``best``."""
    tta = row["time_to_target_s"]
    text = "not reached" if tta is None else f"**{tta:.1f}**" if tta == best else f"{tta:.1f}"
    if row.get("seeds", 1) > 1:  # a median of repeated runs: their range
        spread = ([f"{row['tta_min_s']:.1f}–{row['tta_max_s']:.1f}"]
                  if row["tta_min_s"] is not None else [])
        if row["not_reached"]:
            spread.append(f"{row['not_reached']} of {row['seeds']} not reached")
        text += f" ({', '.join(spread)})"
    return text


def pivot_table(rows: list[dict], column: str, corner: str, cell, heading=str) -> str:
    """Markdown: one row per method, one column per value of ``column`` (both in order of
    appearance); ``cell(row)`` is a row's cell text, a dash where a pair is missing and
    ``heading(value)`` a column's title."""
    columns = list(dict.fromkeys(r[column] for r in rows))
    methods = list(dict.fromkeys(r["method"] for r in rows))
    found = {(r[column], r["method"]): r for r in rows}
    lines = [f"| {corner} | " + " | ".join(heading(c) for c in columns) + " |",
             "|---|" + "---:|" * len(columns)]
    for m in methods:
        cells = [cell(found[(c, m)]) if (c, m) in found else "—" for c in columns]
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def overview_table(rows: list[dict], target: float) -> str:
    """Markdown: one row per method, one column per scenario, each cell the time to the target
    accuracy (s) and the mean iteration time (ms); the best time to accuracy of each scenario
    in bold. Time to accuracy is the fair comparison: policies that drop or delay samples have
    short iterations that each learn less."""
    best = {s: _best_time_to_target([r for r in rows if r["scenario"] == s])
            for s in dict.fromkeys(r["scenario"] for r in rows)}
    return pivot_table(rows, "scenario", f"time to {target:.0%} in s (iteration ms)",
                       lambda r: f"{_time_to_target_text(r, best[r['scenario']])} "
                                 f"({r['iter_mean_ms']:.0f})")


def scenario_tables(rows: list[dict], target: float) -> str:
    """Markdown: per scenario, every method's iteration times (ms), time to the target
    accuracy (s) and final accuracy; the best iteration time and the best time to accuracy of
    each scenario in bold, ratios to the scenario's first method (for repeated runs, the
    median of the per-seed ratios, and a column with the same for the time to accuracy)."""
    out = []
    for scenario in dict.fromkeys(r["scenario"] for r in rows):
        mine = [r for r in rows if r["scenario"] == scenario]
        best_iter = min(r["iter_mean_ms"] for r in mine)
        best_tta = _best_time_to_target(mine)
        # A scenario with a second job on the switch gets a column: that job's iteration mean
        neighbour = any(r.get("neighbour_iter_mean_ms") is not None for r in mine)
        paired = "iter_vs_first" in mine[0]
        reference = mine[0]["method"]
        out += [f"### {scenario}: {mine[0]['scenario_description']}", "",
                f"| method | iteration mean | p50 | p99 | vs {reference}"
                + (" (per seed)" if paired else "") + f" | time to {target:.0%} (s) | "
                + (f"time to {target:.0%} vs {reference} (per seed) | " if paired else "")
                + "final accuracy |" + (" neighbour job's iteration mean |" if neighbour else ""),
                "|---|---:|---:|---:|---:|---:|---:|" + ("---:|" if paired else "")
                + ("---:|" if neighbour else "")]
        for r in mine:
            mean = f"{r['iter_mean_ms']:.1f}"
            if r["iter_mean_ms"] == best_iter:
                mean = f"**{mean}**"
            beside = r.get("neighbour_iter_mean_ms")
            ratio = r["iter_vs_first"] if paired else r["iter_mean_ms"] / mine[0]["iter_mean_ms"]
            tta_ratio = ""
            if paired:
                tta_ratio = ("—" if r["tta_vs_first"] is None
                             else f"{r['tta_vs_first']:.3f}x") + " | "
            out.append(f"| {r['method']} | {mean} | {r['iter_p50_ms']:.1f} | "
                       f"{r['iter_p99_ms']:.1f} | {ratio:.2f}x | "
                       f"{_time_to_target_text(r, best_tta)} | {tta_ratio}"
                       f"{r['final_accuracy']:.3f} |"
                       + ((" — |" if beside is None else f" {beside:.1f} |") if neighbour
                          else ""))
        out.append("")
    return "\n".join(out)


def _colors(names: list[str]) -> dict[str, tuple]:
    import matplotlib

    cmap = matplotlib.colormaps["tab10"]
    return {name: cmap(i % 10) for i, name in enumerate(names)}


def plot_iteration_grid(runs: dict[str, list[Run]], path: Path, window: int = 5) -> Path:
    """One panel per scenario: every method's iteration time per step (moving average over
    ``window`` iterations, so that the lines stay readable)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    methods = list(dict.fromkeys(r.name for rs in runs.values() for r in rs))
    colors = _colors(methods)
    cols = min(3, len(runs))
    rows = -(-len(runs) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 3.3 * rows), squeeze=False)
    kernel = np.ones(window) / window
    for ax, (scenario, scenario_runs) in zip(axes.flat, runs.items(), strict=False):
        for r in scenario_runs:
            smooth = np.convolve(r.iter_s[WARM_UP:] * 1e3, kernel, mode="valid")
            ax.plot(np.arange(len(smooth)) + WARM_UP + window - 1, smooth, color=colors[r.name],
                    label=r.name, linewidth=0.9)
        ax.set_title(f"{scenario}\n{_warm_up_note(scenario_runs)}", fontsize=9)
        ax.set_xlabel("iteration", fontsize=8)
        ax.set_ylabel("iteration time (ms)", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    for ax in axes.flat[len(runs):]:
        ax.axis("off")
    handles = [plt.Line2D([], [], color=colors[m], label=m) for m in methods]
    fig.legend(handles=handles, loc="lower center", ncol=min(len(methods), 8), fontsize=8,
               frameon=False)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    result_files.save_figure(fig, path, dpi=90)
    plt.close(fig)
    return path


def plot_time_to_accuracy(rows: list[dict], path: Path, target: float) -> Path:
    """Grouped bars: per scenario, each method's time to the target accuracy (a hatched bar
    at the run's full length where it never got there)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scenarios = list(dict.fromkeys(r["scenario"] for r in rows))
    methods = list(dict.fromkeys(r["method"] for r in rows))
    colors = _colors(methods)
    width = 0.8 / len(methods)
    fig, ax = plt.subplots(figsize=(max(7.0, 1.9 * len(scenarios)), 4.0))
    for m, method in enumerate(methods):
        label = method  # on the method's first bar, whichever scenario has it first
        for s, scenario in enumerate(scenarios):
            row = next((r for r in rows if r["scenario"] == scenario and r["method"] == method),
                       None)
            if row is None:
                continue
            reached = row["time_to_target_s"] is not None
            ax.bar(s + (m - (len(methods) - 1) / 2) * width,
                   row["time_to_target_s"] if reached else row["total_s"], width,
                   color=colors[method], hatch=None if reached else "//",
                   alpha=1.0 if reached else 0.35, label=label)
            label = None
    ax.set_xticks(range(len(scenarios)), scenarios, fontsize=9)
    ax.set_ylabel(f"time to {target:.0%} test accuracy (s)")
    ax.set_title("hatched: not reached within the run (bar = the run's length)", fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.legend(loc="lower center", ncol=min(len(methods), 8), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    result_files.save_figure(fig, path, dpi=90)
    plt.close(fig)
    return path

"""Calibration: the testbed's policy-harness matrix replayed in the simulator, against the
committed testbed results (docs/results/results.csv).

    python -m sim.calibration               # the full matrix: table and CSV to docs/results/sim
    python -m sim.calibration --quick       # the harness's quick scenarios only
    python -m sim.calibration --fit         # refit the testbed's host costs (prints them)

Every replay is the harness's run: 4 workers, global batch 256, 200 iterations, ResNet-50 H100
step times, the scenario's seeded slowdowns, the method's policy, and the digits MLP trained on
exactly the samples each plan sums (sim.gradients.DigitsTraining), which also gives the time to
95 % test accuracy. Iteration means leave out the first iteration, as the harness does.
"""

from __future__ import annotations

import argparse
import csv
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
from tqdm import tqdm

from experiments import result_files
from experiments.harness import QUICK_SCENARIOS, SCENARIOS
from experiments.launch import METHODS
from host_lib.scheduling.policies.base import Policy
from host_lib.scheduling.policies.registry import make_policy
from sim import testbed
from sim.job import JobResult
from sim.run import simulate

TOLERANCE = 0.10
TARGET_ACCURACY = 0.95
SEEDS = 5  # timing-noise seeds for methods whose policy reads the aggregates
OUT = testbed.ROOT / "docs" / "results" / "sim"


def testbed_rows() -> dict[tuple[str, str], dict]:
    with open(testbed.RESULTS) as f:
        return {(r["scenario"], r["method"]): r for r in csv.DictReader(f)}


# The testbed scenarios the simulator replays: not those whose jobs borrow slots from the
# switch's shared pool (docs/protocol.md §4.6): the testbed claims pool lanes chunk by chunk
# beside a share of its own, and the simulator's pool has no guaranteed shares.
REPLAYED = [name for name, s in SCENARIOS.items() if not s.borrow]


def replay(scenario: str, method: str, fitted: testbed.Fitted = testbed.FITTED,
           train: bool = True, seed: int = testbed.SEED) -> JobResult:
    """One harness run in the simulator, beside its neighbour job where the scenario has one
    (sharing the switch's pipeline); ``seed`` draws the timing noise (the scenario's slowdowns
    stay the harness's)."""
    spec = testbed.spec(scenario, method, fitted, train=train)
    spec.stragglers = replace(spec.stragglers, seed=seed)
    other = testbed.neighbour(scenario, fitted)
    jobs = [spec] if other is None else [spec, other]
    return simulate(jobs, testbed.network(), testbed.switch(scenario))[0]


def time_to_accuracy(result: JobResult, target: float = TARGET_ACCURACY) -> float | None:
    return next((t for t, acc in result.accuracy if acc >= target), None)


def reads_gradients(method: str) -> bool:
    """Whether the method's policy decides from the aggregates (k-of-n's sign flips): its
    decisions then hang on which samples each update happened to sum."""
    return type(make_policy(METHODS[method].policy, testbed.WORKERS, testbed.GLOBAL_BATCH)
                ).observe is not Policy.observe


def compare(scenarios, methods, fitted: testbed.Fitted = testbed.FITTED, train: bool = True,
            progress: bool = True) -> list[dict]:
    """One row per scenario and method: testbed and simulated iteration means (ms), the
    relative error, and both times to the target accuracy (s); cells the committed testbed
    results do not hold (a method added since) are left out. A method whose policy reads
    the aggregates is replayed with SEEDS timing-noise seeds and averaged (the range shown):
    one run of it, on the testbed or here, is one draw of a chaotic trajectory."""
    measured = testbed_rows()
    cells = [(s, m) for s in scenarios for m in methods if (s, m) in measured]
    rows = []
    for scenario, method in tqdm(cells, desc="calibration", disable=not progress):
        chaotic = reads_gradients(method)
        runs = [replay(scenario, method, fitted, train=train or chaotic, seed=seed)
                for seed in (range(SEEDS) if chaotic else [testbed.SEED])]
        ms = [float(r.iter_s[1:].mean() * 1e3) for r in runs]
        ttas = [t for t in map(time_to_accuracy, runs) if t is not None] if train else []
        tb = measured[(scenario, method)]
        sim_ms = float(np.mean(ms))
        rows.append({"scenario": scenario, "method": method,
                     "testbed_ms": float(tb["iter_mean_ms"]), "sim_ms": round(sim_ms, 2),
                     "sim_range_ms": f"{min(ms):.1f}-{max(ms):.1f}" if chaotic else "",
                     "error": round(sim_ms / float(tb["iter_mean_ms"]) - 1, 4),
                     "testbed_tta_s": float(tb["time_to_target_s"] or "nan"),
                     "sim_tta_s": round(float(np.mean(ttas)), 2) if ttas else None,
                     "summed": round(float(np.mean([np.mean(r.summed) for r in runs])), 3)})
    return rows


def table(rows: list[dict]) -> str:
    """Markdown: per scenario and method, testbed vs simulated iteration time and time to
    accuracy; errors beyond the tolerance in bold."""
    lines = ["| scenario | method | testbed (ms) | simulated (ms) | error | testbed time to 95 % "
             "(s) | simulated (s) | samples summed |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        err = f"{r['error']:+.1%}"
        if abs(r["error"]) > TOLERANCE:
            err = f"**{err}**"
        sim_tta = "—" if r["sim_tta_s"] is None else f"{r['sim_tta_s']:.1f}"
        spread = f" ({r['sim_range_ms']})" if r["sim_range_ms"] else ""
        lines.append(f"| {r['scenario']} | {r['method']} | {r['testbed_ms']:.1f} | "
                     f"{r['sim_ms']:.1f}{spread} | {err} | {r['testbed_tta_s']:.1f} | "
                     f"{sim_tta} | {r['summed']:.0%} |")
    return "\n".join(lines)


def fit(progress: bool = True) -> testbed.Fitted:
    """The host costs that make the scenario without stragglers match (least squares of the
    relative errors over every method, Nelder-Mead from the committed values)."""
    from scipy.optimize import minimize

    names = list(asdict(testbed.FITTED))
    bar = tqdm(desc="fit", disable=not progress)

    def loss(x_ms):
        fitted = testbed.Fitted(**dict(zip(names, np.maximum(x_ms, 0) / 1e3, strict=True)))
        rows = compare(["none"], list(METHODS), fitted, train=False, progress=False)
        bar.update(1)
        return sum(r["error"] ** 2 for r in rows)

    x0 = np.array(list(asdict(testbed.FITTED).values())) * 1e3
    best = minimize(loss, x0, method="Nelder-Mead", options={"xatol": 0.05, "fatol": 1e-5})
    bar.close()
    return testbed.Fitted(**dict(zip(names, [round(max(x, 0.0) / 1e3, 5) for x in best.x],
                                     strict=True)))


def write(rows: list[dict], out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    result_files.write_csv(rows, out / "calibration.csv")
    result_files.write_text(
        out / "calibration.md",
        "Simulated vs testbed (docs/results/results.csv): mean iteration time without the "
        f"first iteration; errors beyond {TOLERANCE:.0%} in bold. Fitted host costs "
        f"(sim/testbed.py): {testbed.FITTED}.\n\n" + table(rows) + "\n")
    return out / "calibration.md"


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="the harness's quick scenarios only")
    p.add_argument("--fit", action="store_true", help="refit the host costs on 'none'")
    p.add_argument("--out", type=Path, default=OUT)
    args = p.parse_args(argv)
    if args.fit:
        print(fit())
        return
    rows = compare(QUICK_SCENARIOS if args.quick else REPLAYED, list(METHODS))
    print(table(rows))
    print(f"wrote {write(rows, args.out)}")


if __name__ == "__main__":
    main()

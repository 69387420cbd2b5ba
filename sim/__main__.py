"""Cluster-scale simulation of SA-ATP and every policy (docs/simulation.md).

    python -m sim                    # everything, into docs/results/sim (make sim)
    python -m sim --quick            # a smaller run of everything, for CI (under 2 minutes),
                                     # into runs/sim-quick
    python -m sim --studies workers,jobs --out runs/sim

Writes, into ``--out``: efficiency.json (the statistical-efficiency measurement and fit),
calibration.md/.csv/.png (the testbed replay), studies.csv, summary.md and one plot per study.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from tqdm import tqdm

from experiments import result_files
from experiments.harness import QUICK_SCENARIOS
from experiments.launch import METHODS as TESTBED_METHODS
from sim import calibration, efficiency, report
from sim.studies import SEEDS, add_speedups, run_case, studies

BASELINE = {"jobs": "atp"}  # per study; the others compare with plain in-network aggregation


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true",
                   help="fewer points, iterations and seeds (one); the harness's quick scenarios")
    p.add_argument("--studies", help="comma-separated study names (default: all)")
    p.add_argument("--out", type=Path,
                   help=f"default {calibration.OUT.relative_to(calibration.testbed.ROOT)}, "
                        "quick runs/sim-quick")
    p.add_argument("--iterations", type=int, help="per case (default 60, quick 16)")
    p.add_argument("--warmup", type=int, help="iterations left out of the means (20, quick 8)")
    args = p.parse_args(argv)
    args.iterations = args.iterations or (16 if args.quick else 60)
    args.warmup = args.warmup if args.warmup is not None else (8 if args.quick else 20)
    args.out = args.out or (calibration.testbed.ROOT / "runs" / "sim-quick" if args.quick
                            else calibration.OUT)
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    started = time.time()
    args.out.mkdir(parents=True, exist_ok=True)

    points = efficiency.measure(range(1 if args.quick else 6))
    eff = efficiency.fit(points)
    efficiency.write(points, eff, args.out)
    print(f"statistical efficiency: {eff}")

    scenarios = QUICK_SCENARIOS if args.quick else calibration.REPLAYED
    rows = calibration.compare(scenarios, list(TESTBED_METHODS), train=not args.quick)
    calibration.write(rows, args.out)
    report.plot_calibration(rows, args.out / "calibration.png", calibration.TOLERANCE)
    within = sum(abs(r["error"]) <= calibration.TOLERANCE for r in rows)
    print(f"calibration: {within} of {len(rows)} within {calibration.TOLERANCE:.0%}")

    chosen = [s for s in studies(args.quick)
              if not args.studies or s.name in args.studies.split(",")]
    cases = [c for s in chosen for c in s.cases]
    results = [run_case(c, args.iterations, args.warmup, 1 if args.quick else SEEDS)
               for c in tqdm(cases, desc="studies", unit="case")]
    for s in chosen:
        add_speedups([r for r in results if r["study"] == s.name], eff,
                     BASELINE.get(s.name, "switch"))
    result_files.write_csv(results, args.out / "studies.csv")
    sections = []
    for s in chosen:
        baseline = BASELINE.get(s.name, "switch")
        report.plot_study(s, results, args.out / f"{s.name}.png", baseline)
        sections += [f"## {s.title}", "",
                     f"Mean iteration time (ms); in brackets, against {baseline}: iteration "
                     "time, and time-to-accuracy speedup. ![" + s.name + f"]({s.name}.png)",
                     "", report.study_table(s, results, baseline), ""]
    result_files.write_text(
        args.out / "summary.md",
        f"Simulated with `python -m sim{' --quick' if args.quick else ''}`: "
        f"{args.iterations} iterations per case, the first {args.warmup} left out; "
        f"statistical efficiency rho = {eff.rho}, sigma = {eff.sigma}; calibration "
        f"{within} of {len(rows)} within {calibration.TOLERANCE:.0%} "
        "([calibration.md](calibration.md)); what it all means: "
        "[docs/simulation.md](../../simulation.md).\n\n"
        + "\n".join(sections))
    print(f"wrote {args.out} ({(time.time() - started) / 60:.1f} min)")


if __name__ == "__main__":
    main()

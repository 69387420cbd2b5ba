"""The policy harness: every aggregation method and straggler policy, in one scenario matrix,
on the embedded switch (no root, no bmv2). Each run trains the digits MLP with 4 workers, real
gradients, and compute emulated from the H100 step-time profile with a per-worker slowdown.

    python -m experiments.harness                     # the full matrix (make harness)
    python -m experiments.harness --quick             # two scenarios, fewer iterations
    python -m experiments.harness --scenarios static-3x --methods switch,dpar,boa
    python -m experiments.harness --repeat 3          # each cell with seeds 0, 1, 2; medians

Writes ``results.csv`` (one row per scenario, method and seed), ``summary.md`` (a table per
scenario; with ``--repeat``, the median of the seeds' runs, the range of their times to
accuracy and each method against the scenario's first seed by seed, a seed's methods having
run one after the other), ``iteration_times.png`` (the first seed's runs) and
``time_to_accuracy.png`` into ``--out``, and the runs' logs into ``--logs``
(``<scenario>/<method>``, with ``--repeat`` ``<scenario>/<method>/seed<N>``). One seed
decides close calls by run-to-run noise: repeat to compare methods a few percent apart.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from experiments import result_files
from experiments.emulated_link import LINK_GBPS, wire_ms
from experiments.launch import METHODS, compile_kernels, pick, run_training
from experiments.results import (
    load_run,
    median_rows,
    overview_table,
    plot_iteration_grid,
    plot_time_to_accuracy,
    scenario_tables,
    summary,
    write_csv,
)
from experiments.stragglers import PROFILES
from topologies import lifetime

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Scenario:
    description: str
    stragglers: str = ""  # SlowdownSchedule spec, e.g. '3x@3'
    transient_prob: float = 0.0
    speed_classes: str = ""
    pad_gradient: int = 0  # zero gradient elements communicated with the MLP's 2410
    slots: int = 64  # the job's aggregators on the switch, which bound each worker's window
    borrow: int = 0  # more slots, borrowed from a pool the switch's jobs share (§4.6)
    # A second job on the same switch at the same time, with as many workers and aggregators,
    # no straggler and plain in-network aggregation: whether one job's straggler, or the
    # method that handles it, costs another job anything.
    neighbour: bool = False
    # The links carry this model's gradient at --link-gbps, scaled to the emulated compute:
    # the wire time of a worker's gradient is the same multiple of an even share's compute as
    # this model's gradient's is of its own step (experiments/emulated_link.py).
    network_model: str = "resnet50"

    def wire_ms(self, profiles: Path, compute: str, share: int, gbps: float) -> float:
        """How long a worker's gradient takes to cross its link (0 without emulation)."""
        return wire_ms(profiles, self.network_model, compute, share, gbps)


SCENARIOS = {
    "none": Scenario("no straggler"),
    "static-2x": Scenario("worker 3 is 2x slower throughout", stragglers="2x@3"),
    "static-3x": Scenario("worker 3 is 3x slower throughout", stragglers="3x@3"),
    "transient": Scenario("random transient stragglers: each worker, each iteration, starts a "
                          "3x slowdown of 5 iterations with probability 0.03",
                          transient_prob=0.03),
    "heterogeneous": Scenario("three speed classes: workers 0-1 at 1x, worker 2 at 1.6x, "
                              "worker 3 at 2.5x", speed_classes="1,1.6,2.5"),
    # VGG-16 on an H100 at 100 Gb/s: its 553 MB gradient takes 44 ms to send, a 64-sample step
    # 31 ms: communication is 1.4x the compute, and the links are emulated so (48 ms against
    # the emulated ResNet-50 step of 34 ms). The padding makes this testbed's switch path take
    # about that long on its own, measured as the straggler's communication time (it waits on
    # nobody), so the gradient the switch sums is as large as the time it is given.
    "comm-heavy": Scenario("worker 3 is 3x slower, and communication takes about 1.4x the "
                           "compute (VGG-16's ratio at 100 Gb/s): the gradient is padded with "
                           "32,000 zeros", stragglers="3x@3", pad_gradient=32000,
                           network_model="vgg16"),
    # The switch's aggregators held by chunks that wait for a straggler stall everyone's
    # window when the job has fewer of them than its window wants (ATP's regime): the
    # comm-heavy job with 8 aggregators instead of 64.
    "slot-budget": Scenario("comm-heavy with a slot budget: worker 3 is 3x slower, the "
                            "gradient padded with 32,000 zeros, and the job has 8 aggregators "
                            "(64 elsewhere)", stragglers="3x@3", pad_gradient=32000, slots=8,
                            network_model="vgg16"),
    # The slot-budget job beside a second one (ATP's multi-job setting). Each job's aggregators
    # are its own range on the switch (docs/protocol.md §4), so the straggler's held slots can
    # cost the neighbour only what the two share: the switch's pipeline and the machine's cores.
    "multi-job": Scenario("the slot-budget job (worker 3 3x slower, gradient padded with 32,000 "
                          "zeros, 8 aggregators) beside a second job of 4 workers with its own 8 "
                          "aggregators, no straggler, plain in-network aggregation",
                          stragglers="3x@3", pad_gradient=32000, slots=8, neighbour=True,
                          network_model="vgg16"),
    # ATP's multi-job setting as ATP has it: the two jobs' aggregators are mostly a pool they
    # share (docs/protocol.md §4.6), so the chunks that wait for one job's straggler hold
    # lanes the other job wants, until they complete or a helper takes them over.
    "shared-pool": Scenario("two jobs sharing the switch's aggregators: the comm-heavy job "
                            "(worker 3 3x slower, gradient padded with 32,000 zeros) and a "
                            "second job of 4 workers with no straggler, plain in-network "
                            "aggregation; each has 8 aggregators of its own and borrows 56 "
                            "from a pool of 56 they share", stragglers="3x@3",
                            pad_gradient=32000, slots=8, borrow=56, neighbour=True,
                            network_model="vgg16"),
}
QUICK_SCENARIOS = ("none", "static-3x")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true",
                   help=f"scenarios {', '.join(QUICK_SCENARIOS)} only, 60 iterations, "
                        "target 90 %%")
    p.add_argument("--scenarios", help=f"comma-separated, from: {', '.join(SCENARIOS)}")
    p.add_argument("--methods", default=",".join(METHODS),
                   help=f"comma-separated, from: {', '.join(METHODS)}")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--iterations", type=int, help="per run (default 200, quick 60)")
    p.add_argument("--global-batch", type=int, default=256)
    p.add_argument("--profile", default="resnet50",
                   help="emulated per-sample compute of this model on an H100")
    p.add_argument("--link-gbps", type=float, default=LINK_GBPS,
                   help="emulated host links (experiments/emulated_link.py): each scenario's "
                        "model's gradient at this rate, scaled to the emulated compute; 0: "
                        "this machine's own speed, which is loopback's for gloo")
    p.add_argument("--target-accuracy", type=float, help="default 0.95, quick 0.90")
    p.add_argument("--eval-every", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeat", type=int, default=1,
                   help="run each cell this many times, with seeds --seed, --seed + 1, ...; "
                        "the tables and the bar plot give medians")
    p.add_argument("--out", type=Path, default=ROOT / "runs" / "harness",
                   help="where the CSV, the summary and the plots go")
    p.add_argument("--logs", type=Path, default=ROOT / "runs" / "harness" / "logs")
    p.add_argument("--run-timeout", type=float, default=900.0, help="seconds per run")
    p.add_argument("--report-only", action="store_true",
                   help="train nothing: rebuild the CSV, the summary and the plots from the "
                        "runs' logs in --logs (after re-running some of them, say)")
    args = p.parse_args(argv)
    args.scenarios = pick(args.scenarios or ",".join(QUICK_SCENARIOS if args.quick
                                                      else SCENARIOS), SCENARIOS)
    args.methods = pick(args.methods)
    args.iterations = args.iterations or (60 if args.quick else 200)
    args.target_accuracy = args.target_accuracy or (0.90 if args.quick else 0.95)
    if args.repeat < 1:
        p.error(f"--repeat must be at least 1, got {args.repeat}")
    args.seeds = [args.seed + k for k in range(args.repeat)]
    return args


def log_dir(args, scenario: str, method: str, seed: int) -> Path:
    """Where a run's logs go (see the module doc)."""
    cell = args.logs / scenario / method
    return cell / f"seed{seed}" if args.repeat > 1 else cell


def links(args) -> str:
    return (f"host links emulated at {args.link_gbps:g} Gb/s" if args.link_gbps
            else "no link emulation (gloo at loopback speed)")


def scenario_wire_ms(args, scenario: Scenario) -> float:
    return scenario.wire_ms(PROFILES, args.profile, args.global_batch // args.workers,
                            args.link_gbps)


def run(args, scenario: Scenario, method: str, logs: Path, seed: int):
    comm, policy = METHODS[method].comm, METHODS[method].policy
    common = ["--iterations", str(args.iterations), "--seed", str(seed),
              "--global-batch", str(args.global_batch), "--eval-every", str(args.eval_every),
              "--profile", args.profile, "--pad-gradient", str(scenario.pad_gradient),
              "--wire-ms", f"{scenario_wire_ms(args, scenario):.3f}",
              "--no-progress"]
    # In-band fan-in: the policies that shrink the switch's fan-in per iteration need it.
    run_training(logs, args.workers, comm, [
        "--policy", policy, "--stragglers", scenario.stragglers,
        "--speed-classes", scenario.speed_classes,
        "--transient-prob", str(scenario.transient_prob), *common],
        slots=scenario.slots, borrow=scenario.borrow, inband_fanin=True,
        output=logs / "torchrun.log",
        timeout=args.run_timeout,
        neighbour_args=["--policy", "synchronous", *common] if scenario.neighbour else None)
    return load_run(method, logs)


def neighbour_iter_mean_ms(logs: Path) -> float:
    """The neighbour job's mean iteration time in a run of a scenario that has one."""
    return summary(load_run("neighbour", logs / "neighbour"), 0.0)["iter_mean_ms"]


def main(argv=None) -> None:
    args = parse_args(argv)
    # A seed's methods one after the other: the tables compare them seed by seed
    matrix = [(s, m, seed) for s in args.scenarios for seed in args.seeds for m in args.methods]
    seeds = f" x {args.repeat} seeds" if args.repeat > 1 else ""
    print(f"{len(matrix)} runs: {len(args.scenarios)} scenarios x {len(args.methods)} methods"
          f"{seeds}, {args.workers} workers, {args.iterations} iterations each, compute "
          f"emulated as {args.profile} on an H100, {links(args)}", flush=True)
    started = time.time()
    if not args.report_only:
        compile_kernels(args.workers)
    rows, runs = [], {}
    for i, (name, method, seed) in enumerate(matrix):
        scenario = SCENARIOS[name]
        t0 = time.time()
        logs = log_dir(args, name, method, seed)
        try:
            result = (load_run(method, logs) if args.report_only
                      else run(args, scenario, method, logs, seed))
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired, FileNotFoundError
                ) as exc:
            print(f"[{i + 1}/{len(matrix)}] {name} / {method} / seed {seed}: FAILED ({exc}); "
                  f"see {logs / 'torchrun.log'}", flush=True)
            continue
        if seed == args.seeds[0]:
            runs.setdefault(name, []).append(result)
        row = {"scenario": name, "method": method, "seed": seed,
               **summary(result, args.target_accuracy),
               "neighbour_iter_mean_ms": (neighbour_iter_mean_ms(logs) if scenario.neighbour
                                          else None),
               "scenario_description": scenario.description}
        rows.append(row)
        done = time.time() - started
        eta = done / (i + 1) * (len(matrix) - i - 1)
        tta = row["time_to_target_s"]
        print(f"[{i + 1}/{len(matrix)}] {name} / {method} / seed {seed}: iteration "
              f"{row['iter_mean_ms']:.1f} "
              f"ms (p99 {row['iter_p99_ms']:.1f}), {args.target_accuracy:.0%} "
              f"{'not reached' if tta is None else f'after {tta:.1f} s'}, final accuracy "
              f"{row['final_accuracy']:.3f} ({time.time() - t0:.0f} s; ETA {eta / 60:.1f} min)",
              flush=True)
    if not rows:
        sys.exit("every run failed")
    args.out.mkdir(parents=True, exist_ok=True)
    csv_path = write_csv(rows, args.out / "results.csv")
    cells = median_rows(rows) if args.repeat > 1 else rows
    tables = write_summary(cells, args)
    grid = plot_iteration_grid(runs, args.out / "iteration_times.png")
    bars = plot_time_to_accuracy(cells, args.out / "time_to_accuracy.png", args.target_accuracy)
    print("\n" + tables)
    print(f"wrote {csv_path}, {args.out / 'summary.md'}, {grid}, {bars} "
          f"({(time.time() - started) / 60:.1f} min)")


def write_summary(rows: list[dict], args) -> str:
    """summary.md in ``args.out``: the overview of every scenario and method, then a table per
    scenario (returned, for the console); ``rows`` one per cell (medians, with --repeat)."""
    seeds = (f"seed {args.seed}" if args.repeat == 1 else
             f"seeds {args.seeds[0]}-{args.seeds[-1]}: each number the median of {args.repeat} "
             "runs, times to accuracy with their range")
    header = (f"{args.workers} workers, global batch {args.global_batch}, {args.iterations} "
              f"iterations per run, compute emulated as {args.profile} on an H100, "
              f"{links(args)} ({seeds}). "
              f"Iteration times in ms; time to {args.target_accuracy:.0%} test "
              "accuracy on the job's wall clock; bold: the best of the scenario.\n")
    tables = scenario_tables(rows, args.target_accuracy)
    overview = overview_table(rows, args.target_accuracy)
    result_files.write_text(args.out / "summary.md", header + "\n" + overview + "\n\n" + tables)
    return tables


if __name__ == "__main__":
    lifetime.exit_on_sigterm()   # a SIGTERM stops the run's switch and torchrun, as Ctrl-C does
    main()

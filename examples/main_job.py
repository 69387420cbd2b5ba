"""The main job: the same data-parallel training, 4 workers with one 3x straggler, once per
aggregation method, on the embedded switch (no root, no bmv2). Prints a table of iteration times,
time to a target accuracy and final accuracy, and plots the iteration time of every step.

    python -m examples.main_job                        # what `make run` runs
    python -m examples.main_job --methods gloo,switch --iterations 100 --straggler 2
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from experiments.emulated_link import LINK_GBPS, wire_ms
from experiments.launch import METHODS, compile_kernels, pick, run_training
from experiments.results import Run, load_run, plot_iteration_times, table
from experiments.stragglers import PROFILES
from topologies import lifetime

ROOT = Path(__file__).resolve().parent.parent
MAIN_METHODS = ("gloo", "switch", "sa-atp-takeover", "sa-atp")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--methods", default=",".join(MAIN_METHODS),
                   help=f"comma-separated, from: {', '.join(METHODS)}")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--straggler", type=float, default=3.0,
                   help="slowdown of the last worker (1 = none)")
    p.add_argument("--iterations", type=int, default=150)
    p.add_argument("--global-batch", type=int, default=256,
                   help="samples per iteration over all workers (64 per worker by default)")
    p.add_argument("--profile", default="resnet50",
                   help="emulated per-sample compute of this model on an H100 ('' = real "
                        "compute of the small model)")
    p.add_argument("--link-gbps", type=float, default=LINK_GBPS,
                   help="emulated host links (experiments/emulated_link.py): the profile's "
                        "model's gradient at this rate; 0: this machine's own speed")
    p.add_argument("--target-accuracy", type=float, default=0.95)
    p.add_argument("--out", type=Path, default=ROOT / "runs" / "main_job")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    return p.parse_args(argv)


def run_method(args, method: str) -> Run:
    m = METHODS[method]
    print(f"\n== {method}: {m.description}", flush=True)
    train_args = ["--policy", m.policy, "--iterations", str(args.iterations),
                  "--seed", str(args.seed), "--global-batch", str(args.global_batch)]
    if args.straggler != 1:
        train_args += ["--stragglers", f"{args.straggler}x@{args.workers - 1}"]
    if args.profile:
        train_args += ["--profile", args.profile]
    if args.profile and args.link_gbps:
        wire = wire_ms(PROFILES, args.profile, args.profile,
                       args.global_batch // args.workers, args.link_gbps)
        train_args += ["--wire-ms", f"{wire:.3f}"]
    if args.quiet:
        train_args.append("--no-progress")
    log_dir = args.out / method
    run_training(log_dir, args.workers, m.comm, train_args)
    return load_run(method, log_dir)


def main(argv=None) -> None:
    args = parse_args(argv)
    methods = pick(args.methods)
    started = time.time()
    compile_kernels(args.workers)
    runs = [run_method(args, m) for m in methods]
    print(f"\n{args.workers} workers, worker {args.workers - 1} {args.straggler:g}x slower, "
          f"{args.iterations} iterations, compute emulated as {args.profile or 'real'}, "
          "links " + (f"at {args.link_gbps:g} Gb/s" if args.profile and args.link_gbps
                      else "not emulated"))
    print(table(runs, args.target_accuracy))
    plot = plot_iteration_times(runs, args.out / "iteration_times.png",
                                title=f"{args.workers} workers, one {args.straggler:g}x straggler")
    print(f"\nplot: {plot}\nlogs: {args.out} ({time.time() - started:.0f} s)")


if __name__ == "__main__":
    lifetime.exit_on_sigterm()   # a SIGTERM stops the run's switch and torchrun, as Ctrl-C does
    main()

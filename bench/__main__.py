"""``make bench``: run every benchmark, write bench/results/latest.json, print a summary.

Usage: python -m bench [--only NAME ...] [--out FILE]

The results file is replaced whole once every section has run (``--only`` merges its sections
into it; a file that cannot be read is kept aside with a warning).
"""

from __future__ import annotations

import argparse
import importlib
import json
import platform
import time
from pathlib import Path

from experiments import result_files
from topologies import lifetime

SECTIONS = ["quantizer", "codec", "softswitch", "transport", "loss", "sa_atp", "gpu"]
RESULTS = Path(__file__).resolve().parent / "results" / "latest.json"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="SA-ATP benchmarks")
    parser.add_argument("--only", nargs="*", choices=SECTIONS, help="run only these sections")
    parser.add_argument("--out", type=Path, default=RESULTS, help="results file (JSON)")
    args = parser.parse_args(argv)

    results = {"machine": {"cpu": platform.processor() or platform.machine(),
                           "python": platform.python_version()},
               "date": time.strftime("%Y-%m-%d")}
    for name in args.only or SECTIONS:
        module = importlib.import_module(f"bench.{name}")
        print(f"[bench] {name} ...", flush=True)
        started = time.perf_counter()
        results[name] = module.run()
        results[name]["wall_s"] = time.perf_counter() - started
        for line in module.summary(results[name]):
            print(f"  {line}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    # --only adds its sections to what the file holds; one it cannot read is kept aside
    previous = result_files.read_json_or_keep_aside(args.out) if args.only else {}
    previous.update(results)
    result_files.write_text(args.out, json.dumps(previous, indent=1, sort_keys=True) + "\n")
    print(f"[bench] results written to {args.out}")


if __name__ == "__main__":
    lifetime.exit_on_sigterm()   # a SIGTERM stops the switches and workers a section started
    main()

"""``make bench``: run every benchmark, write bench/results/latest.json, print a summary.

Usage: python -m bench [--only NAME ...]
"""

from __future__ import annotations

import argparse
import importlib
import json
import platform
import time
from pathlib import Path

SECTIONS = ["quantizer", "codec", "softswitch", "transport", "loss", "sa_atp", "gpu"]
RESULTS = Path(__file__).resolve().parent / "results" / "latest.json"


def main() -> None:
    parser = argparse.ArgumentParser(description="SA-ATP benchmarks")
    parser.add_argument("--only", nargs="*", choices=SECTIONS, help="run only these sections")
    parser.add_argument("--out", type=Path, default=RESULTS, help="results file (JSON)")
    args = parser.parse_args()

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
    previous = json.loads(args.out.read_text()) if args.out.exists() and args.only else {}
    previous.update(results)
    args.out.write_text(json.dumps(previous, indent=1, sort_keys=True) + "\n")
    print(f"[bench] results written to {args.out}")


if __name__ == "__main__":
    main()

"""SA-ATP end to end on Mininet: build a star (or a leaf-spine tree), start bmv2 or the embedded
switch, admit a job, run allreduce calls from a worker process in every host, check every sum
against numpy, tear everything down. Needs root.

    python -m topologies.mininet_demo --switch bmv2 --workers 4 --loss 0.01
    python -m topologies.mininet_demo --switch embedded --topology leaf-spine --leaves 2 --workers 4

The calls alternate float32 and int32. The float32 inputs are multiples of 2^-10 below 1 in
magnitude, which the quantizer represents exactly: it sends x * 2^(j - E) rounded, with j >= 25 for
up to 32 workers and an agreed exponent E <= 1 for such blocks (docs/protocol.md §5), so every
float32 result must equal numpy's sum to the bit, as every int32 result must (modulo 2^32).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
from mininet.log import setLogLevel
from tqdm import tqdm

from topologies.mininet_cluster import MininetCluster
from topologies.mininet_nodes import TARGETS
from topologies.mininet_topos import LeafSpineTopo, StarTopo
from topologies.switch_process import BMV2, bmv2_available


def demo_calls(workers: int, calls: int, elements: int, seed: int = 0
               ) -> dict[int, list[np.ndarray]]:
    """Per worker: float32 (even calls) and int32 (odd calls) inputs."""
    out = {}
    for w in range(workers):
        rng = np.random.default_rng((seed, w))
        out[w] = [(rng.integers(-1023, 1024, elements) * 2.0**-10).astype(np.float32)
                  if c % 2 == 0 else
                  rng.integers(-2**31, 2**31, elements, dtype=np.int64).astype(np.int32)
                  for c in range(calls)]
    return out


def expected_sum(inputs: list[np.ndarray]) -> np.ndarray:
    """numpy's sum of one call over the workers: exact in float64 for the float32 inputs above,
    and int32 sums wrap modulo 2^32 as the switch's adders do."""
    if inputs[0].dtype == np.int32:
        total = np.sum([x.astype(np.int64) for x in inputs], axis=0)
        return ((total + 2**31) % 2**32 - 2**31).astype(np.int32)
    return np.sum([x.astype(np.float64) for x in inputs], axis=0).astype(np.float32)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m topologies.mininet_demo",
                                description=__doc__.splitlines()[0])
    p.add_argument("--switch", choices=sorted(TARGETS), default=None,
                   help="the switch program (default: bmv2 where installed, else embedded)")
    p.add_argument("--topology", choices=["star", "leaf-spine"], default="star")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--leaves", type=int, default=2, help="leaf-spine: leaf switches (the "
                   "workers are spread evenly over them)")
    p.add_argument("--loss", type=float, default=0.0,
                   help="drop probability at ingress and at egress of the aggregating switch")
    p.add_argument("--calls", type=int, default=4)
    p.add_argument("--elements", type=int, default=100_000, help="elements per call")
    p.add_argument("--run-dir", default="runs/mininet", help="logs, inputs and results")
    p.add_argument("--verbose", action="store_true", help="Mininet's own messages too")
    args = p.parse_args(argv)
    if os.geteuid() != 0:
        p.error("Mininet needs root")
    if args.switch == "bmv2" and not bmv2_available():
        p.error(f"{BMV2} is not installed; use --switch embedded")
    if args.topology == "leaf-spine":
        if args.workers % args.leaves:
            p.error(f"{args.workers} workers do not split evenly over {args.leaves} leaves")
        topo = LeafSpineTopo(args.leaves, args.workers // args.leaves)
    else:
        topo = StarTopo(args.workers)
    setLogLevel("info" if args.verbose else "warning")

    started = time.monotonic()

    def say(message: str) -> None:
        tqdm.write(f"[{time.monotonic() - started:6.1f} s] {message}")

    calls = demo_calls(args.workers, args.calls, args.elements)
    say(f"{args.topology}: {len(topo.switches())} switch(es), {args.workers} workers, "
        f"{args.calls} calls of {args.elements} elements")
    with MininetCluster(topo, args.run_dir, target=args.switch, progress=say) as cluster:
        if args.loss:
            cluster.set_loss(args.loss)
        with tqdm(total=args.workers * args.calls, unit="call", desc="allreduce") as bar:
            retransmissions = 0

            def on_call(worker: int, record: dict) -> None:
                nonlocal retransmissions
                retransmissions += record["retransmissions"]
                bar.update()
                bar.set_postfix(retransmissions=retransmissions)
            run = cluster.run_allreduces(calls, on_call=on_call)
    say("network stopped: switches, hosts and links removed")

    wrong = 0
    for c in range(args.calls):
        want = expected_sum([calls[w][c] for w in range(args.workers)])
        bad = [w for w in range(args.workers) if not np.array_equal(run.results[w][c], want)]
        wrong += len(bad)
        retx = sum(run.stats[w][c]["retransmissions"] for w in range(args.workers))
        seconds = max(run.stats[w][c]["seconds"] for w in range(args.workers))
        verdict = "exact on every worker" if not bad else f"WRONG on workers {bad}"
        say(f"call {c} ({want.dtype}, {args.elements} elements): {verdict}; {seconds:.2f} s, "
            f"{retx} retransmissions")
    say(f"switch counters of the job: {run.counters}")
    if wrong:
        say(f"FAILED: {wrong} wrong results (logs and results in {args.run_dir})")
        return 1
    say("all sums equal numpy's")
    return 0


if __name__ == "__main__":
    sys.exit(main())

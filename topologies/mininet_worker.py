"""One SA-ATP worker in a Mininet host: runs a sequence of allreduce calls through the switch on
the host's interface (raw Ethernet frames) and saves the results.

    python -m topologies.mininet_worker --spec job.toml --worker 0 --interface h1-eth0 \\
        --calls h1.calls.npz --results h1.results.npz

``--calls`` holds arrays call0, call1, ...: float32 arrays are summed with ``allreduce``
(quantized), int32 arrays with ``allreduce_int`` (exact). Prints one JSON line per finished call to
stdout, which is how the runner (topologies.mininet_cluster) shows progress.
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from host_lib.communicator import CommunicatorConfig, SwitchCommunicator
from host_lib.engine.links import RawEthernetLink
from protocol.jobspec import load_spec


def load_calls(path) -> list[np.ndarray]:
    with np.load(path) as f:
        return [f[f"call{i}"] for i in range(len(f.files))]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m topologies.mininet_worker",
                                description=__doc__.splitlines()[0])
    p.add_argument("--spec", required=True, help="the job spec (TOML)")
    p.add_argument("--worker", type=int, required=True, help="this worker's id in the job")
    p.add_argument("--interface", required=True, help="the host's interface to the switch")
    p.add_argument("--calls", required=True, help=".npz with the inputs call0, call1, ...")
    p.add_argument("--results", required=True, help=".npz to write the results to")
    p.add_argument("--run", type=int, required=True,
                   help="the run's identity, the same for every worker (host_lib/engine/runs.py)")
    p.add_argument("--silence-timeout", type=float, default=20.0,
                   help="fail a call when the switch says nothing for this long (s)")
    args = p.parse_args(argv)

    spec = load_spec(args.spec)
    me = spec.worker(args.worker)
    link = RawEthernetLink(args.interface, me.ip, me.udp_port)
    config = CommunicatorConfig.from_spec(spec, args.worker, args.run,
                                          silence_timeout=args.silence_timeout)
    results = {}
    with SwitchCommunicator(config, link) as comm:
        for i, values in enumerate(load_calls(args.calls)):
            if values.dtype == np.int32:
                results[f"call{i}"] = comm.allreduce_int(values)
            else:
                results[f"call{i}"] = comm.allreduce(values)
            s = comm.last_stats
            print(json.dumps({"call": i, "dtype": str(values.dtype), "elements": s.elements,
                              "packets": s.packets_sent, "retransmissions": s.retransmissions,
                              "repairs": s.repairs, "seconds": round(s.elapsed_s, 3)}),
                  flush=True)
    np.savez(args.results, **results)
    return 0


if __name__ == "__main__":
    sys.exit(main())

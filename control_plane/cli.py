"""``sa-atp-ctl``: command line of the SA-ATP controller.

The controller's desired state (ports, jobs, drop simulator) is kept in a state file, so that
``reconcile`` can restore a restarted switch and every command sees the jobs admitted by the
ones before it.

    sa-atp-ctl --switch 127.0.0.1:9559 --ports 1-4 pipeline       # load the program, base state
    sa-atp-ctl job add examples/jobs/four_workers.toml
    sa-atp-ctl counters --job 7
    sa-atp-ctl metrics --listen 127.0.0.1:9560                     # counters for Prometheus
    sa-atp-ctl drop-sim 0.01
    sa-atp-ctl host 02:00:00:00:00:99 8                            # a host that is no worker
    sa-atp-ctl reconcile                                           # after a switch restart

A Tofino switch is reached over BF Runtime instead, its ports given by a config file
(control_plane/tofino/config.py, docs/tofino.md):

    sa-atp-ctl --target tofino --switch-config switch.toml --switch 10.0.0.1:50052 pipeline
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from control_plane.connection import SwitchError
from control_plane.controller import Controller
from control_plane.desired_state import DesiredState
from control_plane.tofino.bfrt import BfrtError, BfrtUnavailable
from control_plane.tofino.config import load_config
from control_plane.tofino.controller import TofinoController
from control_plane.tofino.names import PROGRAM
from protocol.jobspec import SpecError, load_spec

DEFAULT_STATE = Path("sa-atp-controller.json")


def parse_ports(text: str) -> list[int]:
    """'1-4,7' -> [1, 2, 3, 4, 7]."""
    ports: list[int] = []
    try:
        for part in text.split(","):
            lo, _, hi = part.partition("-")
            ports += range(int(lo), int(hi or lo) + 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad port list {text!r} (example: 1-4,7)") from None
    return ports


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="sa-atp-ctl", description=__doc__.splitlines()[0])
    p.add_argument("--target", choices=["p4runtime", "tofino"], default="p4runtime",
                   help="p4runtime: bmv2 or the embedded target; tofino: BF Runtime")
    p.add_argument("--switch", help="the switch's P4Runtime (default 127.0.0.1:9559) or BF "
                   "Runtime (default 127.0.0.1:50052) address")
    p.add_argument("--switch-config", type=Path, help="tofino: the switch's ports (TOML)")
    p.add_argument("--program", default=PROGRAM, help="tofino: the P4 program bf_switchd runs")
    p.add_argument("--pool-slots", type=int, help="slots of the switch's shared pool, which "
                   "jobs with `borrow` draw on (docs/protocol.md §4.6; kept in --state)")
    p.add_argument("--device-id", type=int, default=0)
    p.add_argument("--election-id", type=int, default=1)
    p.add_argument("--ports", type=parse_ports, help="the switch's data ports, e.g. 1-4 "
                   "(needed once; then kept in the state file)")
    p.add_argument("--state", type=Path, default=DEFAULT_STATE,
                   help=f"controller state file (default: ./{DEFAULT_STATE})")
    p.add_argument("-v", "--verbose", action="store_true")
    sub = p.add_subparsers(dest="command", required=True)

    pipe = sub.add_parser("pipeline", help="load the P4 program (if not loaded) and base state")
    pipe.add_argument("--force", action="store_true", help="push even if already loaded")

    job = sub.add_parser("job", help="admit, remove, list jobs, change membership")
    jsub = job.add_subparsers(dest="job_command", required=True)
    add = jsub.add_parser("add", help="admit a job from a TOML spec")
    add.add_argument("spec", type=Path)
    rm = jsub.add_parser("remove", help="remove a job")
    rm.add_argument("job_id", type=int)
    jsub.add_parser("list", help="jobs as the switch holds them")
    mem = jsub.add_parser("membership", help="change a running job's fan-in or expected set")
    mem.add_argument("job_id", type=int)
    mem.add_argument("--fan-in", type=int)
    mem.add_argument("--expected", type=lambda s: int(s, 0), help="worker bitmap, e.g. 0x7")

    cnt = sub.add_parser("counters", help="packets and drops per op and reason")
    cnt.add_argument("--job", type=int, help="job id (default: traffic of no job)")
    met = sub.add_parser("metrics", help="serve every job's counters to Prometheus until "
                         "interrupted")
    met.add_argument("--listen", default="127.0.0.1:9560", metavar="HOST:PORT",
                     help="where to serve /metrics (default: 127.0.0.1:9560; port 0: any)")
    slot = sub.add_parser("slot", help="both aggregators of one slot of a job")
    slot.add_argument("job_id", type=int)
    slot.add_argument("slot", type=int)
    sub.add_parser("status", help="pipeline, ports, jobs and drop simulator")
    drop = sub.add_parser("drop-sim", help="set the drop simulator's loss probability")
    drop.add_argument("probability", type=float)
    drop.add_argument("--port", type=int, help="only this port (default: every other port)")
    drop.add_argument("--egress", action="store_true", help="at egress instead of ingress")
    host = sub.add_parser("host", help="forward frames for a MAC address to a port (a host "
                          "that is no worker of a job here; kept in --state)")
    host.add_argument("mac")
    host.add_argument("port", type=int)
    sub.add_parser("reconcile", help="make the switch match the state file")
    return p


def read_only(args) -> bool:
    """Commands that only read: they leave the switch's writer role (P4Runtime's primary, BF
    Runtime's binding) to another client, so they run beside it. (On P4Runtime ``slot`` is no
    such command: it reads the aggregators with management packets, which need the stream a
    primary client has.)"""
    return args.command in ("counters", "metrics", "status") or (
        args.command == "job" and args.job_command == "list") or (
        args.command == "slot" and args.target == "tofino")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(message)s")
    state = DesiredState.from_json(args.state.read_text()) if args.state.exists() else None
    try:
        controller = make_controller(args, state)
        if controller is None:
            return 2
        with controller.connect(read_only=read_only(args)):
            output = run(controller, args)
    except (SpecError, SwitchError, BfrtUnavailable, BfrtError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    controller.save_state(args.state)
    if output is not None:
        print(json.dumps(output, indent=1, default=str))
    return 0


def make_controller(args, state: DesiredState | None):
    """The controller for ``--target``, with the saved desired state if there is one."""
    if args.target == "tofino":
        if args.switch_config is None:
            print("error: --target tofino needs --switch-config (docs/tofino.md)", file=sys.stderr)
            return None
        config = load_config(args.switch_config)
        controller = TofinoController(args.switch or "127.0.0.1:50052", config,
                                      device_id=args.device_id, program=args.program)
        ports = list(config.data_ports)
    else:
        ports = args.ports or (list(state.ports) if state else None)
        if not ports:
            print("error: give the switch's ports once with --ports (e.g. --ports 1-4)",
                  file=sys.stderr)
            return None
        controller = Controller(args.switch or "127.0.0.1:9559", ports,
                                device_id=args.device_id, election_id=args.election_id)
    if state is not None:
        controller.desired = state
        controller.desired.ports = tuple(sorted(set(ports)))
    if args.pool_slots is not None:
        controller.resize_pool(args.pool_slots)
    return controller


def run(controller, args) -> object:
    if args.command == "pipeline":
        controller.load_pipeline(force=args.force)
        return controller.reconcile()
    if args.command == "reconcile":
        return controller.reconcile()
    if args.command == "job":
        if args.job_command == "add":
            job = controller.admit(load_spec(args.spec))
            return {"job": job.spec.id, "job_index": job.job_index,
                    "window": [job.slot_base, job.slot_base + job.spec.window - 1]}
        if args.job_command == "remove":
            controller.remove(args.job_id)
            return None
        if args.job_command == "list":
            return {jid: vars(cfg) for jid, cfg in controller.read_jobs().items()}
        if args.job_command == "membership":
            job = controller.set_membership(args.job_id, args.fan_in, args.expected)
            return {"job": job.spec.id, "fan_in": job.spec.effective_fan_in,
                    "expected": f"{job.spec.effective_expected:#x}"}
    if args.command == "counters":
        return controller.counters(args.job)
    if args.command == "metrics":
        from control_plane.metrics import export

        return export(controller, args.listen)
    if args.command == "slot":
        return [vars(s) for s in controller.read_slot(args.job_id, args.slot)]
    if args.command == "status":
        return controller.status()
    if args.command == "host":
        controller.add_host(args.mac, args.port)
        return None
    if args.command == "drop-sim":
        controller.set_loss(args.probability, args.port,
                            "egress" if args.egress else "ingress")
        return controller.status()["loss"]
    raise AssertionError(args.command)


if __name__ == "__main__":
    sys.exit(main())

"""``softswitch-grpc``: command line compatible with bmv2's ``simple_switch_grpc``.

    softswitch-grpc [options] <path to JSON config file> [-- target options]
    softswitch-grpc --no-p4 -i 1@veth1 -i 2@udp:127.0.0.1:0 -- --grpc-server-addr 127.0.0.1:9559

Options common to bmv2 are accepted with bmv2's meaning; the few that configure parts bmv2 has
and this target does not (Thrift, nanomsg, the debugger) are accepted and ignored with a note.
Unlike ``simple_switch_grpc`` the gRPC server listens on 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path

from .core.errors import SoftSwitchError
from .dataplane import Dataplane
from .p4runtime_server import P4RuntimeServer
from .ports import PortManager, parse_interface
from .v1model import DEFAULT_DROP_PORT

log = logging.getLogger("softswitch")

_LEVELS = {"trace": logging.DEBUG, "debug": logging.DEBUG, "info": logging.INFO,
           "warn": logging.WARNING, "error": logging.ERROR, "off": logging.CRITICAL + 10}


STOP_S = 10.0  # how long stopping may take after the signal before the process ends anyway


class StopRequest:
    """SIGINT or SIGTERM asks the switch to stop; the handler only records the signal and puts
    both back to their default, so a second one ends the process at once. A handler that does
    more (a ``threading.Event.set``, which takes a lock) deadlocks when the next signal
    interrupts it holding that lock: a parent SIGKILLed sends its children's death signal once
    per thread it had, and a switch, its handler stuck, outlived it (tests/test_lifetime.py)."""

    def __init__(self):
        self.requested = 0
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._handle)

    def _handle(self, signum, _frame) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_DFL)
        self.requested = signum


def _main_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="softswitch-grpc",
        description="Embedded bmv2-JSON software switch with a P4Runtime server "
                    "(simple_switch_grpc compatible).",
        epilog="Target options (after --): --grpc-server-addr ADDR (default 127.0.0.1:9559), "
               "--cpu-port N, --drop-port N, --no-register-access.")
    p.add_argument("config", nargs="?", help="bmv2 JSON produced by p4c-bm2-ss")
    p.add_argument("-i", "--interface", action="append", default=[], metavar="N@IFACE",
                   help="attach interface IFACE (or udp:HOST:PORT) as port N; repeatable")
    p.add_argument("--pcap", nargs="?", const=".", default=None, metavar="DIR",
                   help="write <iface>_in.pcap / <iface>_out.pcap for every port in DIR")
    p.add_argument("--use-files", type=int, metavar="WAIT",
                   help="not supported by this target (bmv2 pcap-file ports)")
    p.add_argument("--thrift-port", type=int, help="accepted and ignored (no Thrift server)")
    p.add_argument("--device-id", type=int, default=0)
    p.add_argument("--log-console", action="store_true", help="log to stderr")
    p.add_argument("--log-file", help="log to this file")
    p.add_argument("-L", "--log-level", choices=sorted(_LEVELS), default=None)
    p.add_argument("--log-flush", action="store_true", help="accepted (logs are always flushed)")
    p.add_argument("--notifications-addr", help="accepted and ignored (no nanomsg)")
    p.add_argument("--debugger", action="store_true", help="accepted and ignored")
    p.add_argument("--no-p4", action="store_true", help="start without a P4 program")
    p.add_argument("--udp-port-file", metavar="FILE",
                   help="once all ports are bound, write their UDP addresses to FILE as JSON "
                        '({"<port>": ["host", udp_port], ...})')
    return p


def _target_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="softswitch-grpc ... --", add_help=False)
    p.add_argument("--grpc-server-addr", default="127.0.0.1:9559")
    p.add_argument("--cpu-port", type=int, default=0)
    p.add_argument("--drop-port", type=int, default=DEFAULT_DROP_PORT)
    p.add_argument("--no-register-access", action="store_true",
                   help="answer P4Runtime register reads/writes with UNIMPLEMENTED, as bmv2 does")
    p.add_argument("--grpc-server-ssl", action="store_true")
    return p


def _setup_logging(args: argparse.Namespace) -> None:
    if args.log_console and args.log_file:
        raise SystemExit("Error: --log-console and --log-file are exclusive")
    level = _LEVELS[args.log_level or "info"]
    handler: logging.Handler
    if args.log_file:
        handler = logging.FileHandler(args.log_file)
    else:
        handler = logging.StreamHandler(sys.stderr)
        if not args.log_console:
            level = logging.WARNING  # bmv2 logs nothing without a log option; we keep warnings
    handler.setFormatter(logging.Formatter("[%(asctime)s] [%(name)s] [%(levelname)s] "
                                           "%(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    target_argv: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, target_argv = argv[:cut], argv[cut + 1:]
    args = _main_parser().parse_args(argv)
    targs = _target_parser().parse_args(target_argv)
    _setup_logging(args)

    if args.no_p4 == bool(args.config):
        print("Error: give either a JSON config file or --no-p4", file=sys.stderr)
        return 1
    if args.use_files is not None:
        print("Error: --use-files is not supported by this target; use -i N@udp:HOST:PORT",
              file=sys.stderr)
        return 1
    if targs.grpc_server_ssl:
        print("Error: --grpc-server-ssl is not supported by this target", file=sys.stderr)
        return 1
    if args.thrift_port is not None:
        log.warning("--thrift-port ignored: this target has no Thrift server; use P4Runtime")
    if args.notifications_addr or args.debugger:
        log.warning("--notifications-addr / --debugger ignored: not supported by this target")

    dataplane = Dataplane(args.device_id, targs.cpu_port, targs.drop_port)
    if args.config:
        try:
            dataplane.install(dataplane.load_program(Path(args.config).read_text()))
        except (OSError, SoftSwitchError) as exc:
            print(f"Error: cannot load {args.config}: {exc}", file=sys.stderr)
            return 1
    if args.pcap is not None:
        Path(args.pcap).mkdir(parents=True, exist_ok=True)
    ports = PortManager(dataplane, args.pcap)
    server = P4RuntimeServer(dataplane, targs.grpc_server_addr,
                             register_access=not targs.no_register_access)
    try:
        for spec in args.interface:
            number, name = parse_interface(spec)
            ports.add(number, name)
        port = server.start()
    except (OSError, ValueError) as exc:
        print(f"Error: {exc}", file=sys.stderr)
        ports.stop()
        return 1
    ports.start()
    if args.udp_port_file:
        ports.write_udp_port_file(args.udp_port_file)
    for number, (host, udp_port) in sorted(ports.udp_addresses().items()):
        print(f"Port {number} bound to udp:{host}:{udp_port}", flush=True)
    host = targs.grpc_server_addr.rpartition(":")[0]
    print(f"Server listening on {host}:{port}", flush=True)

    stop = StopRequest()
    while not stop.requested:
        time.sleep(0.2)
    watchdog = threading.Timer(STOP_S, os._exit, args=(128 + stop.requested,))
    watchdog.daemon = True
    watchdog.start()
    ports.stop()
    server.stop()
    log.info("stopped")
    return 0

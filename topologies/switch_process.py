"""A switch in a subprocess: bmv2's ``simple_switch_grpc`` or the embedded ``softswitch-grpc``,
started with the same command line (the embedded target is a drop-in), with its log in a run
directory.

    switch = SwitchProcess({1: "udp:127.0.0.1:0", 2: "udp:127.0.0.1:0"}, run_dir).start()
    switch.grpc_address, switch.udp_ports      # "127.0.0.1:40123", {1: ("127.0.0.1", 51234), ...}
    switch.stop()

UDP-tunnel ports (no root) exist only on the embedded target; interfaces (``veth1``) work on both.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import grpc

from control_plane.connection import serves_p4runtime
from protocol.constants import CPU_PORT
from topologies import lifetime

EMBEDDED = "softswitch-grpc"
BMV2 = "simple_switch_grpc"


def bmv2_available() -> bool:
    return shutil.which(BMV2) is not None


def default_binary() -> str:
    """bmv2 where installed, else the embedded target."""
    return BMV2 if bmv2_available() else EMBEDDED


def free_tcp_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def udp_ports(ports) -> dict[int, str]:
    """Interface specs for UDP-tunnel ports on loopback, each on a free UDP port."""
    return {p: "udp:127.0.0.1:0" for p in ports}


class SwitchProcess:
    def __init__(self, interfaces: dict[int, str], run_dir: str | Path, binary: str | None = None,
                 device_id: int = 0, cpu_port: int = CPU_PORT, log_level: str = "warn",
                 netns: str | None = None, grpc_port: int | None = None,
                 pcap_dir: str | Path | None = None):
        self.interfaces = dict(interfaces)
        self.run_dir = Path(run_dir)
        self.binary = binary or default_binary()
        self.device_id = device_id
        self.cpu_port = cpu_port
        self.log_level = log_level
        self.netns = netns
        self.grpc_port = grpc_port or free_tcp_port()
        self.pcap_dir = pcap_dir  # capture every port's frames in and out (--pcap)
        self.proc: subprocess.Popen | None = None
        self.udp_ports: dict[int, tuple[str, int]] = {}
        if any(spec.startswith("udp:") for spec in self.interfaces.values()) and \
                Path(self.binary).name != EMBEDDED:
            raise ValueError(f"UDP-tunnel ports need the embedded target, not {self.binary}")

    @property
    def grpc_address(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def name(self) -> str:
        return "bmv2" if Path(self.binary).name == BMV2 else "embedded"

    def command(self) -> list[str]:
        if self.name == "embedded":  # this interpreter's copy, whatever PATH says
            cmd = [sys.executable, "-m", "softswitch"]
        else:
            cmd = [shutil.which(self.binary) or self.binary]
        cmd += ["--no-p4", "--device-id", str(self.device_id), "--log-file",
                str(self.run_dir / f"{self.name}.log"), "--log-level", self.log_level]
        for port, spec in sorted(self.interfaces.items()):
            cmd += ["-i", f"{port}@{spec}"]
        if self.name == "embedded":
            cmd += ["--udp-port-file", str(self._port_file)]
        if self.pcap_dir is not None:
            cmd += ["--pcap", str(self.pcap_dir)]
        cmd += ["--", "--grpc-server-addr", self.grpc_address, "--cpu-port", str(self.cpu_port)]
        if self.netns:
            cmd = ["ip", "netns", "exec", self.netns, *cmd]
        return cmd

    @property
    def _port_file(self) -> Path:
        return self.run_dir / "udp_ports.json"

    def start(self, timeout: float = 30.0) -> SwitchProcess:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._port_file.unlink(missing_ok=True)
        stderr = open(self.run_dir / f"{self.name}.stderr", "ab")
        self.proc = lifetime.popen(self.command(), stdout=stderr, stderr=stderr,
                                   start_new_session=True)
        deadline = time.monotonic() + timeout
        with grpc.insecure_channel(self.grpc_address) as channel:
            while not serves_p4runtime(channel, 0.2):
                if self.proc.poll() is not None:
                    raise RuntimeError(f"{self.binary} exited with {self.proc.returncode}: "
                                       f"{self._stderr_tail()}")
                if time.monotonic() > deadline:
                    self.stop()
                    raise TimeoutError(f"{self.binary} did not serve gRPC within {timeout} "
                                       f"s: {self._stderr_tail()}")
        if self.name == "embedded" and any(s.startswith("udp:") for s in self.interfaces.values()):
            while not self._port_file.exists():
                if time.monotonic() > deadline:
                    raise TimeoutError("the embedded switch did not report its UDP ports")
                time.sleep(0.02)
            self.udp_ports = {int(k): (v[0], v[1])
                              for k, v in json.loads(self._port_file.read_text()).items()}
        return self

    def stop(self, kill: bool = False) -> None:
        """Terminate (or kill) the switch and wait for it."""
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL if kill else signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def restart(self) -> SwitchProcess:
        """Stop and start again with the same ports and address (all state is lost)."""
        self.stop()
        pinned = {p: f"udp:{h}:{port}" for p, (h, port) in self.udp_ports.items()}
        self.interfaces.update(pinned)
        return self.start()

    def _stderr_tail(self) -> str:
        try:
            return (self.run_dir / f"{self.name}.stderr").read_text()[-1000:]
        except OSError:
            return ""

    def __enter__(self) -> SwitchProcess:
        return self if self.proc else self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

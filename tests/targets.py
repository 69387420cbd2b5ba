"""Switch targets for tests: the same P4 program behind P4Runtime, with a way to put a frame on
a port and collect what comes out.

* :class:`EmbeddedTarget`: the software switch in this process, its P4Runtime server on a free
  loopback port; a frame is processed synchronously, so its outputs are exactly the frames it
  caused.
* :class:`Bmv2Target`: ``simple_switch_grpc`` in a network namespace of its own, one veth pair
  per port; frames are sent and captured with AF_PACKET sockets opened inside the namespace, and
  a frame's outputs are what arrives until the ports go quiet. Needs bmv2 and root; skipped
  otherwise.
"""

from __future__ import annotations

import ctypes
import os
import select
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from protocol.constants import CPU_PORT
from softswitch.dataplane import Dataplane
from softswitch.p4runtime_server import P4RuntimeServer

TARGETS = ["embedded", "bmv2"]
BMV2 = shutil.which("simple_switch_grpc")


class EmbeddedTarget:
    name = "embedded"

    def __init__(self, ports):
        self.ports = tuple(ports)
        self._outputs: list[tuple[int, bytes]] = []
        self._start()

    def _dataplane(self) -> Dataplane:
        return Dataplane(cpu_port=CPU_PORT)

    def _start(self) -> None:
        self.dataplane = self._dataplane()
        self.dataplane.set_transmit(lambda port, frame: self._outputs.append((port, frame)))
        self.server = P4RuntimeServer(self.dataplane, "127.0.0.1:0")
        port = self.server.start()
        self.address = f"127.0.0.1:{port}"

    def send(self, port: int, frame: bytes) -> list[tuple[int, bytes]]:
        self._outputs = []
        self.dataplane.receive(port, frame)
        return self._outputs

    def send_many(self, port: int, frames) -> list[tuple[int, bytes]]:
        outputs = []
        for frame in frames:
            outputs += self.send(port, frame)
        return outputs

    def restart(self) -> None:
        """A switch restart: all state, the pipeline included, is lost; same address."""
        address = self.address
        self.server.stop(grace=None)
        self.dataplane = self._dataplane()
        self.dataplane.set_transmit(lambda port, frame: self._outputs.append((port, frame)))
        self.server = P4RuntimeServer(self.dataplane, address)
        self.server.start()

    def close(self) -> None:
        self.server.stop(grace=None)


_libc = ctypes.CDLL("libc.so.6", use_errno=True)
_CLONE_NEWNET = 0x40000000


class _InNamespace:
    """Run the body in network namespace ``name`` (this thread only), then come back."""

    def __init__(self, name: str):
        self.name = name

    def __enter__(self):
        self._home = os.open("/proc/self/ns/net", os.O_RDONLY)
        target = os.open(f"/run/netns/{self.name}", os.O_RDONLY)
        try:
            if _libc.setns(target, _CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns failed")
        finally:
            os.close(target)

    def __exit__(self, *exc):
        _libc.setns(self._home, _CLONE_NEWNET)
        os.close(self._home)


class Bmv2Target:
    name = "bmv2"
    quiet = 0.15  # a frame's outputs are complete when nothing arrives for this long

    def __init__(self, ports):
        self.ports = tuple(ports)
        self.ns = f"saatp-{uuid.uuid4().hex[:8]}"
        self.workdir = Path(tempfile.mkdtemp(prefix="saatp-bmv2-"))
        _ip("netns", "add", self.ns)
        try:
            self._setup()
        except BaseException:
            self.close()
            raise

    def _setup(self) -> None:
        self.socks: dict[int, socket.socket] = {}
        for p in self.ports:
            _ip("-n", self.ns, "link", "add", f"sw{p}", "type", "veth", "peer", "name", f"h{p}")
            for end in (f"sw{p}", f"h{p}"):
                _ip("netns", "exec", self.ns, "sysctl", "-qw",
                    f"net.ipv6.conf.{end}.disable_ipv6=1")
                _ip("-n", self.ns, "link", "set", end, "up")
        with _InNamespace(self.ns):
            for p in self.ports:
                s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
                s.bind((f"h{p}", 0))
                s.setblocking(False)
                self.socks[p] = s
        self._launch()

    def _launch(self) -> None:
        # A unix socket for gRPC: reachable from the test's namespace, unlike the loopback of
        # the switch's namespace.
        sock = self.workdir / "grpc.sock"
        sock.unlink(missing_ok=True)
        args = ["ip", "netns", "exec", self.ns, BMV2, "--no-p4"]
        for p in self.ports:
            args += ["-i", f"{p}@sw{p}"]
        args += ["--", "--grpc-server-addr", f"unix:{sock}", "--cpu-port", str(CPU_PORT)]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL,
                                     stderr=open(self.workdir / "stderr", "wb"))
        self.address = f"unix:{sock}"
        deadline = time.monotonic() + 10
        while not sock.exists():
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError(f"simple_switch_grpc did not start: "
                                   f"{(self.workdir / 'stderr').read_text()[-500:]}")
            time.sleep(0.05)

    def send(self, port: int, frame: bytes) -> list[tuple[int, bytes]]:
        self._drain()
        self.socks[port].send(frame)
        return self._collect(self.quiet)

    def send_many(self, port: int, frames) -> list[tuple[int, bytes]]:
        """Send a burst without waiting between frames; what came out once all is quiet
        (bmv2 queues at most 64 frames per egress port: keep bursts below that)."""
        outputs = []
        for frame in frames:
            self.socks[port].send(frame)
            outputs += self._collect(0.0)
        return outputs + self._collect(self.quiet)

    def _collect(self, quiet: float) -> list[tuple[int, bytes]]:
        outputs = []
        fds = {s.fileno(): p for p, s in self.socks.items()}
        deadline = time.monotonic() + quiet
        while True:
            ready, _, _ = select.select(list(fds), [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                return outputs
            for fd in ready:
                data, addr = self.socks[fds[fd]].recvfrom(65535)
                if addr[2] != socket.PACKET_OUTGOING:
                    outputs.append((fds[fd], data))
                    deadline = time.monotonic() + quiet

    def _drain(self) -> None:
        for s in self.socks.values():
            while True:
                try:
                    s.recv(65535)
                except BlockingIOError:
                    break

    def restart(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)
        self._launch()

    def close(self) -> None:
        if getattr(self, "proc", None) is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        for s in getattr(self, "socks", {}).values():
            s.close()
        subprocess.run(["ip", "netns", "del", self.ns], check=False, capture_output=True)
        shutil.rmtree(self.workdir, ignore_errors=True)


def _ip(*args: str) -> None:
    cmd = args if args[0] in ("ip",) else ("ip", *args)
    subprocess.run(cmd, check=True, capture_output=True)


def make_target(name: str, ports):
    if name == "embedded":
        return EmbeddedTarget(ports)
    if BMV2 is None:
        pytest.skip("simple_switch_grpc is not installed")
    if os.geteuid() != 0:
        pytest.skip("the bmv2 target needs root for its network namespace")
    return Bmv2Target(ports)

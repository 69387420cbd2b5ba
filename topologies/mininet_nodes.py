"""Mininet node classes for SA-ATP: a switch that runs the P4 program on bmv2's
``simple_switch_grpc`` or on the embedded target, and a host without IPv6.

    net = Mininet(topo, switch=P4RuntimeSwitch, host=Ipv4OnlyHost, controller=None)

The switch lives in the root namespace (so its P4Runtime server, on 127.0.0.1 only, is reachable
by a controller there); its data ports are its Mininet interfaces, numbered as Mininet numbers
them. Neither class puts IPv6 on a link: router solicitations and MLD reports would otherwise be
the only traffic a switch sees besides SA-ATP's.
"""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path

from mininet.log import info
from mininet.node import Host, Switch

from topologies.switch_process import BMV2, EMBEDDED, SwitchProcess, default_binary, free_tcp_port

TARGETS = {"bmv2": BMV2, "embedded": EMBEDDED}
FIRST_GRPC_PORT = 9559  # s1 serves P4Runtime here by default, s2 on the next port, ...


class P4RuntimeSwitch(Switch):
    """A Mininet switch running ``simple_switch_grpc`` or the embedded target.

    target: "bmv2", "embedded", or None for bmv2 where installed, else the embedded target.
    run_dir: its logs go to run_dir/<name>/.
    grpc_port: P4Runtime port on 127.0.0.1; None: 9559 + (switch number - 1), as ``mn`` users
        expect; 0: any free port.

    Mininet's ``self.pid`` stays the node's shell; the switch program is ``self.process`` (a
    :class:`SwitchProcess`, which builds the same command line for both targets).
    """

    def __init__(self, name, target: str | None = None, run_dir: str | Path = "runs/mininet",
                 grpc_port: int | None = None, log_level: str = "warn", **params):
        if params.get("inNamespace"):
            raise ValueError(f"{name}: a P4RuntimeSwitch runs in the root namespace, where its "
                             f"controller reaches 127.0.0.1")
        if target is not None and target not in TARGETS:
            raise ValueError(f"{name}: target must be one of {sorted(TARGETS)}, not {target!r}")
        super().__init__(name, **params)
        self.binary = TARGETS[target] if target else default_binary()
        self.run_dir = Path(run_dir) / name
        if grpc_port is None:
            grpc_port = FIRST_GRPC_PORT + int(self.dpid, 16) - 1
        self.grpc_port = grpc_port or free_tcp_port()
        self.log_level = log_level
        self.process: SwitchProcess | None = None

    @property
    def grpc_address(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def data_ports(self) -> dict[int, str]:
        """Port number -> interface name, without the control interface (lo, port 0)."""
        return {port: intf.name for port, intf in self.intfs.items() if intf.name != "lo"}

    def addIntf(self, intf, port=None, **kwargs):
        super().addIntf(intf, port=port, **kwargs)
        conf = Path(f"/proc/sys/net/ipv6/conf/{intf.name}/disable_ipv6")
        if intf.name != "lo" and conf.exists():  # still down here: it never gets IPv6
            conf.write_text("1\n")

    def start(self, controllers) -> None:
        self.process = _MininetSwitchProcess(self.data_ports(), self.run_dir, binary=self.binary,
                                             log_level=self.log_level, grpc_port=self.grpc_port)
        self.process.start()
        info(f"({self.name}: {self.process.name} on {self.grpc_address}, log in "
             f"{self.run_dir}) ")

    def stop(self, deleteIntfs: bool = True) -> None:
        """Stop the switch program (idempotent), then delete the interfaces if asked."""
        if self.process is not None:
            self.process.stop()
        super().stop(deleteIntfs)


class _MininetSwitchProcess(SwitchProcess):
    """A SwitchProcess that gives bmv2 a Thrift port of its own: bmv2 builds with Thrift would
    otherwise all take 9090, and the second switch of a topology would fail to start. (A bmv2
    built without Thrift has no such option and refuses it.)"""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.thrift_port = free_tcp_port()

    def command(self) -> list[str]:
        cmd = super().command()
        if self.name == "bmv2" and _has_thrift(cmd[0]):
            cut = cmd.index("--")
            cmd[cut:cut] = ["--thrift-port", str(self.thrift_port)]
        return cmd


class Ipv4OnlyHost(Host):
    """A Mininet host whose namespace has IPv6 disabled before any interface exists."""

    def __init__(self, name, **params):
        super().__init__(name, **params)
        for conf in ("all", "default"):  # /proc/sys/net is the namespace's own
            self.cmd(f"echo 1 > /proc/sys/net/ipv6/conf/{conf}/disable_ipv6")


@functools.cache
def _has_thrift(binary: str) -> bool:
    """Whether this bmv2 binary was built with Thrift (it then takes --thrift-port)."""
    usage = subprocess.run([binary, "--help"], capture_output=True, text=True)
    return "--thrift-port" in usage.stdout + usage.stderr

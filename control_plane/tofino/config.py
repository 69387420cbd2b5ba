"""A Tofino switch's ports, from a TOML file (docs/tofino.md has a complete example)::

    [switch]
    cpu_port = 64            # where management requests come in (docs/tofino.md, Ports)

    [[ports]]                # the data ports, named by device port as in job specs
    port = 0
    speed = "100G"           # 10G 25G 40G 50G 100G 200G 400G
    fec = "rs"               # none | fc | rs
    autoneg = "default"      # default | on | off

    [[loop_ports]]           # the ports that take packets round to pass 3, in each pipe
    port = 68                # pipe 0's recirculation port ...
    mac_loopback = false     # ... or a front port put in MAC loopback (true)

A job's aggregators live in one pipe, so every pipe with data ports needs a loop port; the
pipe of a device port is its bits 8:7 on Tofino 1 and 2.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from control_plane.tofino import names
from protocol.jobspec import SpecError, parse_toml, read_file


def pipe_of(port: int) -> int:
    return port >> 7


@dataclass(frozen=True)
class PortConfig:
    port: int
    speed: str = "100G"
    fec: str = "rs"
    autoneg: str = "default"
    mac_loopback: bool = False

    def validate(self, where: str) -> None:
        if not isinstance(self.port, int) or not 0 <= self.port < 512:
            raise SpecError(f"{where}.port must be a device port in 0..511, got {self.port!r}")
        for key, choices in (("speed", names.SPEEDS), ("fec", names.FEC_TYPES),
                             ("autoneg", names.AUTONEG_MODES)):
            if getattr(self, key) not in choices:
                raise SpecError(f"{where}.{key} must be one of {sorted(choices)}, "
                                f"got {getattr(self, key)!r}")


@dataclass(frozen=True)
class SwitchConfig:
    cpu_port: int
    ports: tuple[PortConfig, ...]
    loop_ports: tuple[PortConfig, ...]

    @property
    def data_ports(self) -> tuple[int, ...]:
        return tuple(sorted(p.port for p in self.ports))

    def loop_port_for(self, port: int) -> int:
        """The loop port that serves ``port``: one of its pipe's, spread over them."""
        mine = sorted(p.port for p in self.loop_ports if pipe_of(p.port) == pipe_of(port))
        if not mine:
            raise SpecError(f"port {port} is in pipe {pipe_of(port)}, which has no loop port")
        return mine[port % len(mine)]

    def validate(self) -> None:
        if not isinstance(self.cpu_port, int) or not 0 <= self.cpu_port < 512:
            raise SpecError(f"switch.cpu_port must be a device port, got {self.cpu_port!r}")
        seen: set[int] = set()
        for kind, ports in (("ports", self.ports), ("loop_ports", self.loop_ports)):
            for i, p in enumerate(ports):
                p.validate(f"{kind}[{i}]")
                if p.port in seen or p.port == self.cpu_port:
                    raise SpecError(f"{kind}[{i}]: port {p.port} is configured twice")
                seen.add(p.port)
        for port in self.data_ports + (self.cpu_port,):
            self.loop_port_for(port)


def parse_config(text: str, source: str = "<config>") -> SwitchConfig:
    doc = parse_toml(text, source)
    unknown = set(doc) - {"switch", "ports", "loop_ports"}
    if unknown:
        raise SpecError(f"{source}: unknown top-level keys {sorted(unknown)}")
    try:
        config = SwitchConfig(cpu_port=doc["switch"]["cpu_port"],
                              ports=tuple(PortConfig(**p) for p in doc.get("ports", [])),
                              loop_ports=tuple(PortConfig(**p) for p in doc.get("loop_ports", [])))
    except (KeyError, TypeError) as exc:
        raise SpecError(f"{source}: {exc}") from None
    config.validate()
    return config


def load_config(path: str | Path) -> SwitchConfig:
    return parse_config(read_file(path, "switch config"), str(path))


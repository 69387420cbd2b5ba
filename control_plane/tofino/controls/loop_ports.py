"""control LoopPorts (p4src/tofino/sa_atp_tna.p4) and the ingress parser's value sets: which
ports are the CPU's and the loop ports' (so that their packets are parsed as management
requests and as pass 3), and which loop port serves each port."""

from __future__ import annotations

from control_plane.tofino import names
from control_plane.tofino.bfrt import BfrtEntry
from control_plane.tofino.config import SwitchConfig


class LoopPorts:
    table = names.table(names.LOOP_PORT_TABLE)
    tables = (names.CPU_PORT_SET, names.LOOP_PORT_SET, table)

    def entries(self, config: SwitchConfig) -> list[BfrtEntry]:
        out = [_member(names.CPU_PORT_SET, config.cpu_port)]
        out += [_member(names.LOOP_PORT_SET, p.port) for p in config.loop_ports]
        out += [BfrtEntry.make(self.table, {names.INGRESS_PORT: port},
                               {"port": config.loop_port_for(port)}, names.LOOP_PORT_ACTION)
                for port in config.data_ports + (config.cpu_port,)]
        return out


def _member(value_set: str, port: int) -> BfrtEntry:
    """A port in a parser value set: its key is ternary (a value and a mask)."""
    return BfrtEntry.make(value_set, {names.VALUE_SET_FIELD: (port, names.PORT_MASK)})

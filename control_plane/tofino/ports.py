"""The switch's ports in the SDE's ``$PORT`` table: those the switch config lists, and how the
switch's are brought to them.

``$PORT`` is the port manager's, not the program's: bf_switchd may have added ports of its own
(uplinks, ports from its own port configuration), so reconciliation adds and changes only the
ports the config lists and never deletes one. It compares what it reads back by meaning (the
port manager reads firecode back as ``BF_FEC_TYP_FC``), and a change sends only the fields that
differ: a change that names ``$SPEED`` disables, deletes and adds the port again (a link flap),
so speed is sent only when it differs.
"""

from __future__ import annotations

from control_plane.tofino import names
from control_plane.tofino.bfrt import BfrtEntry
from control_plane.tofino.config import SwitchConfig


def port_entries(config: SwitchConfig) -> list[BfrtEntry]:
    """``$PORT`` entries: the data ports, and the front ports put in MAC loopback as loop ports
    (internal recirculation ports need none)."""
    ports = [(p, names.LOOPBACK_NONE) for p in config.ports]
    ports += [(p, names.LOOPBACK_MAC_NEAR) for p in config.loop_ports if p.mac_loopback]
    return [BfrtEntry.make(names.PORT, {names.DEV_PORT: p.port},
                           {names.SPEED: names.SPEEDS[p.speed], names.FEC: names.FEC_TYPES[p.fec],
                            names.AUTO_NEGOTIATION: names.AUTONEG_MODES[p.autoneg],
                            names.PORT_ENABLE: True, names.LOOPBACK_MODE: loopback})
            for p, loopback in ports]


def port_changes(want: list[BfrtEntry], have: list[BfrtEntry]) -> list[tuple[str, BfrtEntry]]:
    """The writes that give the ports of ``want`` their settings, given the ports the switch
    has (``have``, read back): an add for a missing port, a change of only the differing
    fields for another; nothing for ports ``want`` does not name."""
    current = {entry.key: dict(entry.data) for entry in have}
    ops: list[tuple[str, BfrtEntry]] = []
    for entry in want:
        if entry.key not in current:
            ops.append(("insert", entry))
            continue
        differ = {f: v for f, v in entry.data if not _same(f, v, current[entry.key].get(f))}
        if differ:
            ops.append(("modify", BfrtEntry.make(entry.table, dict(entry.key), differ)))
    return ops


def _same(field: str, want, have) -> bool:
    if field == names.FEC:
        return names.FEC_ALIASES.get(have, have) == names.FEC_ALIASES.get(want, want)
    return want == have

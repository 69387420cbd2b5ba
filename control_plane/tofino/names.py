"""The BF Runtime names the controller uses, in one place: how the TNA program's (p4src/tofino/)
objects are named, and the SDE's own (``$`` names: fixed tables, index and counter fields, and
the values of the port settings). The P4 names under those prefixes (tables, actions, registers)
stay with the control class that writes them, as on v1model.

bf-p4c names a table ``pipe.<control instance path>.<table>`` (``pipe`` is the Pipeline's
instance name in sa_atp_tna.p4), an action ``<control instance path>.<action>``, a key field by
its P4 expression and an action's data fields by its parameters. The TNA program keeps the
v1model program's controls, tables, keys, actions and parameters, so a planned entry
(``control_plane/plan.py``, v1model names) becomes a BF Runtime entry by prefixing the table and
renaming the one key that differs: the ingress port, ``standard_metadata`` on v1model and
``ig_intr_md`` on TNA. Fixed tables (``$pre.*``, ``$PORT``) and register and counter fields
follow the SDE's BF Runtime conventions. The names that depend on the compiler's conventions
(the parser value sets, their key field and its match type) are checked against the compiled
bfrt.json (tests/tofino/test_tna_compiled.py), and every name here was written through Intel's
own client (tests/tofino/test_real_client.py).
"""

from __future__ import annotations

from control_plane.entries import TableEntry
from control_plane.tofino.bfrt import BfrtEntry

PROGRAM = "sa_atp_tna"
PIPE = "pipe"
INGRESS_PORT = "ig_intr_md.ingress_port"
KEY_RENAMES = {"sm.ingress_port": INGRESS_PORT}

REGISTER_INDEX = "$REGISTER_INDEX"
COUNTER_INDEX = "$COUNTER_INDEX"
COUNTER_PACKETS = "$COUNTER_SPEC_PKTS"

AGGREGATOR = "SaAtpIngress.aggregator"
LANES = "SaAtpIngress.lanes"
LOOP_PORT_TABLE = "SaAtpIngress.passes.loop_port"
LOOP_PORT_ACTION = "SaAtpIngress.passes.to_loop"
CPU_PORT_SET = f"{PIPE}.SaAtpIngressParser.cpu_port"        # parser value sets
LOOP_PORT_SET = f"{PIPE}.SaAtpIngressParser.loop_ports"
VALUE_SET_FIELD = "f1"       # bf-p4c names a value set's one key field f1, and makes it Ternary:
PORT_MASK = 0x1FF            # a port is written with the mask of all its 9 bits

# The SDE's fixed tables: multicast groups and their nodes, and the ports.
PRE_MGID = "$pre.mgid"
PRE_NODE = "$pre.node"
MGID = "$MGID"
MULTICAST_NODE_ID = "$MULTICAST_NODE_ID"
MULTICAST_NODE_L1_XID_VALID = "$MULTICAST_NODE_L1_XID_VALID"
MULTICAST_NODE_L1_XID = "$MULTICAST_NODE_L1_XID"
MULTICAST_RID = "$MULTICAST_RID"
MULTICAST_LAG_ID = "$MULTICAST_LAG_ID"
DEV_PORT = "$DEV_PORT"

PORT = "$PORT"
SPEED = "$SPEED"
FEC = "$FEC"
AUTO_NEGOTIATION = "$AUTO_NEGOTIATION"
PORT_ENABLE = "$PORT_ENABLE"
LOOPBACK_MODE = "$LOOPBACK_MODE"
# The values of those port fields, by the words of the switch config (config.py).
SPEEDS = {s: f"BF_SPEED_{s}" for s in ("10G", "25G", "40G", "50G", "100G", "200G", "400G")}
FEC_TYPES = {"none": "BF_FEC_TYP_NONE", "fc": "BF_FEC_TYP_FIRECODE",
             "rs": "BF_FEC_TYP_REED_SOLOMON"}
# The port manager's other names for the same FEC types: a port reads back with the first name
# of its type in alphabetical order, so firecode reads back as BF_FEC_TYP_FC.
FEC_ALIASES = {"BF_FEC_TYP_FC": "BF_FEC_TYP_FIRECODE", "BF_FEC_TYP_RS": "BF_FEC_TYP_REED_SOLOMON"}
AUTONEG_MODES = {"default": "PM_AN_DEFAULT", "on": "PM_AN_FORCE_ENABLE",
                 "off": "PM_AN_FORCE_DISABLE"}
LOOPBACK_NONE = "BF_LPBK_NONE"
LOOPBACK_MAC_NEAR = "BF_LPBK_MAC_NEAR"


def table(name: str) -> str:
    """``SaAtpIngress.admission.jobs`` -> ``pipe.SaAtpIngress.admission.jobs``."""
    return f"{PIPE}.{name}"


def register(control: str, name: str) -> str:
    return table(f"{control}.{name}")


def register_field(control: str, name: str, part: str = "f1") -> str:
    """A register's data field: ``f1`` for a plain register, ``lo``/``hi`` for a lane pair."""
    return f"{control}.{name}.{part}"


def to_bfrt(entry: TableEntry) -> BfrtEntry:
    return BfrtEntry.make(table(entry.table),
                          {KEY_RENAMES.get(k, k): v for k, v in entry.match},
                          dict(entry.params), entry.action, entry.is_default)


def from_bfrt(entry: BfrtEntry) -> TableEntry:
    back = {v: k for k, v in KEY_RENAMES.items()}
    name = entry.table.removeprefix(f"{PIPE}.")
    if entry.is_default:
        return TableEntry.default(name, entry.action, dict(entry.data))
    return TableEntry.make(name, {back.get(k, k): v for k, v in entry.key}, entry.action,
                           dict(entry.data))

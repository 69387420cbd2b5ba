"""An embedded software switch that runs p4c's bmv2 JSON (v1model) in pure Python and serves
P4Runtime: a drop-in for bmv2's ``simple_switch_grpc`` where bmv2 is not installed.

    program = load_program(json_text)
    sw = V1Switch(program)
    sw.tables["MyIngress.fwd"].add({"hdr.ethernet.dstAddr": 0x0a}, "MyIngress.forward", {"port": 2})
    out = sw.process(1, frame)          # [(egress_port, frame), ...]

Its floors, as bmv2's: ``core`` runs any bmv2 JSON program (``bm_sim``); ``v1model`` is the
target (``targets/simple_switch``); ``p4runtime_server`` serves P4Runtime for whatever switch the
dataplane runs (PI); the modules here put them together: the dataplane, the ports, the
``softswitch-grpc`` command (``simple_switch_grpc``) and the tools that measure and compare it.
"""

from .core.errors import (
    PacketDropped,
    ProgramError,
    SoftSwitchError,
    StateError,
    TableError,
    UnsupportedConstruct,
)
from .core.program import Program
from .core.tables import TableEntry
from .v1model import V1Switch, load_program

__all__ = ["load_program", "Program", "V1Switch", "TableEntry", "SoftSwitchError", "ProgramError",
           "UnsupportedConstruct", "TableError", "StateError", "PacketDropped"]

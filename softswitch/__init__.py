"""An embedded software switch that runs p4c's bmv2 JSON (v1model) in pure Python and serves
P4Runtime: a drop-in for bmv2's ``simple_switch_grpc`` where bmv2 is not installed.

    program = load_program(json_text)
    sw = V1Switch(program)
    sw.tables["MyIngress.fwd"].add({"hdr.ethernet.dstAddr": 0x0a}, "MyIngress.forward", {"port": 2})
    out = sw.process(1, frame)          # [(egress_port, frame), ...]
"""

from .errors import (
                     PacketDropped,
                     ProgramError,
                     SoftSwitchError,
                     StateError,
                     TableError,
                     UnsupportedConstruct,
)
from .program import Program, load_program
from .switch import V1Switch
from .tables import TableEntry

__all__ = ["load_program", "Program", "V1Switch", "TableEntry", "SoftSwitchError", "ProgramError",
           "UnsupportedConstruct", "TableError", "StateError", "PacketDropped"]

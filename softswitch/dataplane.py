"""The running switch as the ports and the P4Runtime server share it: here the v1model target
(``simple_switch_grpc``'s part).  The ports and the server use only what any target's dataplane
would offer (the switch and its generic objects, ``load_program``, ``install``, ``receive``,
``packet_out``), so they run another target's dataplane unchanged.

A pipeline push replaces the whole ``V1Switch``, multicast groups and clone sessions included.
bmv2 resets its tables, registers and counters on a push, but not its replication engine, whose
groups its P4Runtime server (PI) forgets: groups created after the push add their copies to the
old ones. We do not model that (see softswitch/README.md, "P4Runtime"); the
controller deletes groups before it pushes a pipeline, so both targets end up the same.
Frames leaving on the CPU port go to the controller as P4Runtime PacketIn, like
``simple_switch_grpc --cpu-port``; every other frame goes to the port layer.
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Callable

from .core.program import Program
from .v1model import DEFAULT_DROP_PORT, V1Switch, load_program

log = logging.getLogger("softswitch")

Transmit = Callable[[int, bytes], None]


class Dataplane:
    def __init__(self, device_id: int = 0, cpu_port: int = 0,
                 drop_port: int = DEFAULT_DROP_PORT):
        self.device_id = device_id
        self.cpu_port = cpu_port  # 0: no CPU port, as in bmv2
        self.drop_port = drop_port
        self.switch: V1Switch | None = None
        self._transmit: Transmit | None = None
        self._packet_in: Callable[[bytes], None] | None = None

    def set_transmit(self, transmit: Transmit | None) -> None:
        """Where frames leaving on a data port go (the port layer)."""
        self._transmit = transmit

    def set_packet_in(self, packet_in: Callable[[bytes], None] | None) -> None:
        """Where frames leaving on the CPU port go (the P4Runtime server)."""
        self._packet_in = packet_in

    @staticmethod
    def load_program(source: str | bytes) -> Program:
        """Load a program for this dataplane's target (a pushed pipeline is loaded with it)."""
        return load_program(source)

    def install(self, program: Program) -> V1Switch:
        """Start running ``program`` with fresh state."""
        self.switch = V1Switch(program, drop_port=self.drop_port)
        # The compiled program and its state live as long as the pipeline: move them out of
        # the cyclic collector's reach, whose full passes over them stall packets for tens of
        # milliseconds.
        gc.collect()
        gc.freeze()
        return self.switch

    def receive(self, port: int, frame: bytes) -> None:
        """A frame arrived on ``port``: run it and deliver what leaves."""
        switch = self.switch
        if switch is None:
            return  # no pipeline yet (--no-p4): bmv2 drops everything
        debug = log.isEnabledFor(logging.DEBUG)
        if debug:
            log.debug("Processing packet received on port %d (%d bytes)", port, len(frame))
        for out_port, data in switch.process(port, frame):
            if debug:
                log.debug("Transmitting packet of size %d out of port %d", len(data), out_port)
            if self.cpu_port and out_port == self.cpu_port:
                if self._packet_in is not None:
                    self._packet_in(data)
            elif self._transmit is not None:
                self._transmit(out_port, data)

    def packet_out(self, frame: bytes) -> bool:
        """Inject a controller frame as if received on the CPU port; False without a CPU port."""
        if not self.cpu_port:
            log.error("PacketOut received but no CPU port is configured (use --cpu-port)")
            return False
        self.receive(self.cpu_port, frame)
        return True

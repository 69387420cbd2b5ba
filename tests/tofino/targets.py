"""The TNA program's targets for the packet-level tests of tests/p4/:

* ``tna-model``: the reference model alone, programmed by the BF Runtime controller over the
  fake client; it runs wherever the tests run, whatever the compiled v1model program is.
* ``tna-twin``: the v1model program on the embedded target with the model in lockstep
  (twin.py); it needs the compiled program to be protocol v2 and skips otherwise.
"""

from __future__ import annotations

import pytest

from control_plane.controller import Controller, Pipeline
from control_plane.tofino.config import PortConfig, SwitchConfig
from control_plane.tofino.controller import TofinoController
from protocol import constants as P
from tests.tofino.fake_bfrt import FakeClient
from tests.tofino.fake_switch import FakeSwitch
from tests.tofino.model.pipeline import TnaModel
from tests.tofino.twin import TwinTarget

TNA_TARGETS = ["tna-model", "tna-twin"]
LOOP_PORTS = (68, 196)   # the recirculation ports of pipes 0 and 1


def switch_config(ports, cpu_port: int = P.CPU_PORT) -> SwitchConfig:
    return SwitchConfig(cpu_port, tuple(PortConfig(p) for p in ports),
                        tuple(PortConfig(p) for p in LOOP_PORTS))


def compiled_is_v2() -> bool:
    """Whether the committed compiled v1model program is protocol v2 (it has run_id)."""
    p4info, _, _ = Pipeline().load()
    return any(r.preamble.name == "SaAtpIngress.aggregator.run_id"
               for r in p4info.message.registers)


REQUIRES_V2 = ("the committed p4src/compiled is protocol v1 (no SaAtpIngress.aggregator.run_id):"
               " the v1model program and the TNA model can be compared once it is recompiled")


class ModelTarget:
    name = "tna-model"

    def __init__(self, ports, actions=None):
        self.ports = tuple(ports)
        self.fake = FakeSwitch()
        self.model = TnaModel(self.fake, actions=actions)
        self.client = FakeClient({"tofino": self.fake})

    def send(self, port: int, frame: bytes) -> list[tuple[int, bytes]]:
        return self.model.process(port, frame)

    def send_many(self, port: int, frames) -> list[tuple[int, bytes]]:
        return [out for frame in frames for out in self.send(port, frame)]

    def controller(self) -> TofinoController:
        return TofinoController("tofino", switch_config(self.ports), client=self.client).connect()

    def close(self) -> None:
        pass


class TwinController(Controller):
    """The P4Runtime controller of the embedded target, repeating every change through the BF
    Runtime controller of the model's switch."""

    def __init__(self, target: TwinTarget, ports):
        super().__init__(target.address, ports)
        self.tofino = TofinoController("tofino", switch_config(ports), client=target.client)

    def connect(self, read_only: bool = False) -> TwinController:
        super().connect(read_only)
        self.tofino.connect(read_only)
        return self

    def reconcile(self) -> dict[str, int]:
        counts = super().reconcile()
        self.tofino.reconcile()
        return counts

    def resize_pool(self, pool_slots: int) -> None:
        super().resize_pool(pool_slots)
        self.tofino.resize_pool(pool_slots)

    def admit(self, spec):
        job = super().admit(spec)
        twin = self.tofino.admit(spec)
        assert (twin.slot_base, twin.job_index) == (job.slot_base, job.job_index)
        return job

    def remove(self, job_id: int) -> None:
        super().remove(job_id)
        self.tofino.remove(job_id)

    def set_membership(self, job_id: int, fan_in=None, expected=None):
        self.tofino.set_membership(job_id, fan_in, expected)
        return super().set_membership(job_id, fan_in, expected)

    def set_loss(self, probability: float, port=None, direction: str = "ingress") -> None:
        super().set_loss(probability, port, direction)
        self.tofino.set_loss(probability, port, direction)

    def add_transit(self, job_id: int) -> None:
        super().add_transit(job_id)
        self.tofino.add_transit(job_id)

    def add_host(self, mac: str, port: int) -> None:
        super().add_host(mac, port)
        self.tofino.add_host(mac, port)


def make_tna_target(name: str, ports, actions=None):
    if name == "tna-model":
        return ModelTarget(ports, actions)
    if not compiled_is_v2():
        pytest.skip(REQUIRES_V2)
    return TwinTarget(ports, actions)


def make_tna_controller(target, ports):
    if isinstance(target, ModelTarget):
        ctl = target.controller()
    else:
        ctl = TwinController(target, ports).connect()
    ctl.reconcile()
    return ctl

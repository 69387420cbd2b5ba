"""The v1model program on the embedded target and the TNA reference model, in lockstep.

:class:`TwinTarget` is the embedded target whose switch runs every packet (from a port or,
for management requests, from the controller) through the model as well, and requires the same
frames out of the same ports, the same register cells where the model touched them and the same
counts where it counted; :class:`TwinController` is the P4Runtime controller that repeats every
change it makes through the BF Runtime controller on the model's FakeSwitch, so both programs
run with the entries their own backends write for the same job specs. The drop simulator's
random draws are the one thing the model takes from the embedded target (:class:`OracleDraws`).
"""

from __future__ import annotations

from protocol import constants as P
from softswitch.dataplane import Dataplane
from tests.targets import EmbeddedTarget
from tests.tofino.fake_bfrt import FakeClient
from tests.tofino.fake_switch import FakeSwitch
from tests.tofino.model.pipeline import TnaModel
from tests.tofino.model.respond import STATES

V1_STATE = ("chunk_id", "run_id", "contributors", "agreed_scale", "max_exp", "helper_id")
COUNTERS = ("SaAtpIngress.stats.packets", "SaAtpIngress.stats.drops",
            "SaAtpEgress.stats.packets", "SaAtpEgress.stats.drops",
            "SaAtpIngress.aggregator.evictions", "SaAtpIngress.aggregator.management")


class Disagreement(AssertionError):
    """The v1model program and the TNA model did something different."""


def tna_cells(fake: FakeSwitch, index: int) -> dict[str, int]:
    """Aggregator ``index`` of the model, in the v1model program's registers and values."""
    def cell(register: str, part: str = "f1", control: str = "aggregator") -> int:
        name = f"pipe.SaAtpIngress.{control}.{register}"
        return fake.register(name, 0, index)[f"SaAtpIngress.{control}.{register}.{part}"]

    progress = cell("progress")
    found = {r: cell(r) for r in V1_STATE}
    found["slot_state"] = STATES[(progress >> 16) & 3]
    found["contribution_count"] = progress & 0xFF
    found["lane_holder"] = cell("lane_holder", "hi")   # lo is hi without POOL_HELD
    for i in range(P.LANES // 2):
        found[f"lane_{i:02d}"] = cell(f"lanes_{i:02d}", "lo", "lanes")
        found[f"lane_{i + P.LANES // 2:02d}"] = cell(f"lanes_{i:02d}", "hi", "lanes")
    if bool(cell("valid")) != (found["slot_state"] != P.SlotState.EMPTY):
        raise Disagreement(f"aggregator {index}: the model's valid {cell('valid')} does not "
                           f"match its state {found['slot_state']}")
    return found


def v1_cells(switch, index: int) -> dict[str, int]:
    names = [n.rsplit(".", 1)[1] for n in switch.registers if ".aggregator." in n]
    return {n: switch.registers[f"SaAtpIngress.aggregator.{n}"].read(index) for n in names}


def compare_cells(switch, fake: FakeSwitch, indices) -> None:
    for index in sorted(indices):
        v1, tna = v1_cells(switch, index), tna_cells(fake, index)
        diff = {k: (v1[k], tna[k]) for k in v1 if v1[k] != tna[k]}
        if diff:
            raise Disagreement(f"aggregator {index} (v1model, TNA model): {diff}")


def compare_counts(switch, fake: FakeSwitch, cells) -> None:
    for name, index in sorted(cells):
        v1 = switch.counters[name.removeprefix("pipe.")].read(index)
        if tuple(v1) != fake.counter(name, index):
            raise Disagreement(f"{name}[{index}] (v1model, TNA model): {v1} "
                               f"{fake.counter(name, index)}")


def compare_outputs(port: int, frame: bytes, v1: list, tna: list) -> None:
    v1, tna = _without_holder(v1), _without_holder(tna)
    if sorted(v1) != sorted(tna):
        raise Disagreement(f"a {len(frame)}-byte frame on port {port}: the v1model program "
                           f"sent {_described(v1)}, the TNA model {_described(tna)}")


# A report to the controller (packet_in, Ethernet, IPv4, UDP): where its SA-ATP header's slot
# is, which the v1model program fills with the aggregator's lane_holder and the TNA program
# leaves as the request had it (its BF Runtime controller reads the register; docs/tofino.md,
# 'Management and the v1model program'). Both programs' lane_holder cells are compared.
REPORT_SLOT = slice(7 + 14 + 20 + 8 + 4, 7 + 14 + 20 + 8 + 6)


def _without_holder(outputs: list) -> list:
    return [(port, data[:REPORT_SLOT.start] + bytes(2) + data[REPORT_SLOT.stop:])
            if port == P.CPU_PORT else (port, data) for port, data in outputs]


def _described(outputs: list) -> str:
    return "nothing" if not outputs else "; ".join(
        f"{len(data)} bytes to port {port}: {data[:80].hex()}" for port, data in sorted(outputs))


class OracleDraws:
    """The drop simulator's outcomes as the embedded target drew them: an ingress draw lost
    the packet if the target counted one more SIM drop for its job than the model, an egress
    draw lost a copy if the target did not send it."""

    def __init__(self, switch, fake: FakeSwitch, outputs: list):
        self.switch, self.fake, self.outputs = switch, fake, outputs

    def lost(self, direction: str, threshold: int, port: int, job_index: int, copy=None) -> bool:
        if direction == "egress":
            return (port, copy) not in self.outputs
        index = job_index * P.STATS_PER_JOB + P.DropReason.SIM
        counted = self.switch.counters["SaAtpIngress.stats.drops"].read(index)[0]
        return counted > self.fake.counter("pipe.SaAtpIngress.stats.drops", index)[0]


class CheckedSwitch:
    """The embedded switch with the model beside it: ``process`` runs both and compares."""

    def __init__(self, switch, model: TnaModel):
        self._switch, self._model = switch, model

    def __getattr__(self, name):
        return getattr(self._switch, name)

    def process(self, port: int, frame: bytes) -> list[tuple[int, bytes]]:
        outputs = self._switch.process(port, frame)
        self._model.draws = OracleDraws(self._switch, self._model.switch, outputs)
        compare_outputs(port, frame, outputs, self._model.process(port, frame))
        compare_cells(self._switch, self._model.switch, {i for _, i in self._model.touched})
        compare_counts(self._switch, self._model.switch, self._model.counted)
        return outputs


class TwinTarget(EmbeddedTarget):
    name = "tna-twin"

    def __init__(self, ports, actions=None):
        self.fake = FakeSwitch()
        # the embedded target's ports, its CPU port included, stand for one pipe of a Tofino
        self.model = TnaModel(self.fake, actions=actions, pipe_of=lambda port: 0)
        self.client = FakeClient({"tofino": self.fake})
        super().__init__(ports)

    def _dataplane(self) -> Dataplane:
        target = self

        class Checked(Dataplane):
            def install(self, program):
                target.fake.restart()   # a pipeline push: bf_switchd loads the program again
                self.switch = CheckedSwitch(super().install(program), target.model)
                return self.switch

        return Checked(cpu_port=P.CPU_PORT)

    def check_everything(self) -> None:
        """Every aggregator and every counter, not only those the last packet touched."""
        switch = self.dataplane.switch
        if switch is None:
            return
        used = {i for (_, i) in (k for cells in self.fake.cells.values() for k in cells)
                if i < P.NUM_AGGREGATORS}
        for name, register in switch.registers.items():
            if ".aggregator." in name:
                used |= {i for i, v in enumerate(register.read_range()) if v}
        compare_cells(switch, self.fake, used)
        for name in COUNTERS:
            counts = switch.counters[name]
            used = {i for i in range(len(counts.packets)) if counts.read(i) != (0, 0)}
            used |= set(self.fake.counts[f"pipe.{name}"])
            compare_counts(switch, self.fake, {(f"pipe.{name}", i) for i in used})

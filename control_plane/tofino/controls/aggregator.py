"""control Aggregator and control Lanes (p4src/tofino/aggregator.p4, lanes.p4): the
aggregators' registers, read and cleared over BF Runtime in the pipe that holds the job, and
the ``evictions`` and ``management`` counters (``contracts.AggregatorControl``)."""

from __future__ import annotations

from control_plane.contracts import AggregatorState, aggregator_indices
from control_plane.tofino import names
from control_plane.tofino.bfrt import BfrtConnection, BfrtEntry
from control_plane.tofino.controls.packet_stats import read_counter
from protocol import constants as P

STATE_REGISTERS = ("valid", "run_id", "chunk_id", "generation", "agreed_scale", "progress",
                   "contributors", "max_exp", "helper_id")
LANE_REGISTERS = tuple(f"lanes_{i:02d}" for i in range(P.LANES // 2))
# The lanes' gate (lanes.p4): which aggregation the lane cells hold and whose lanes are in. A
# cleared generation restarts at 1, so a gate left from before a clear could take a new
# aggregation for its own: it is cleared with the lanes.
GATE_REGISTER = "lanes_gate"
# The slot state as the TNA program keeps it (the phase, bits 17:16 of `progress`, PHASE_* in
# p4src/tofino/include/types.p4) -> the protocol's.
PHASES = {0: P.SlotState.EMPTY, 1: P.SlotState.COMPLETE, 2: P.SlotState.TAKEN,
          3: P.SlotState.AGGREGATING}


class Aggregator:
    evictions_counter = names.table(f"{names.AGGREGATOR}.evictions")
    management_counter = names.table(f"{names.AGGREGATOR}.management")

    def read(self, conn: BfrtConnection, indices, pipe: int = 0) -> list[AggregatorState]:
        indices = aggregator_indices(indices)
        cells = {name: _read(conn, names.AGGREGATOR, name, indices, pipe)
                 for name in STATE_REGISTERS}
        lanes = {name: _read(conn, names.LANES, name, indices, pipe, ("lo", "hi"))
                 for name in LANE_REGISTERS}
        holders = _read(conn, names.AGGREGATOR, "lane_holder", indices, pipe, ("lo", "hi"))
        states = []
        for i in indices:
            progress = cells["progress"][i]["f1"]
            low = [lanes[n][i]["lo"] for n in LANE_REGISTERS]
            high = [lanes[n][i]["hi"] for n in LANE_REGISTERS]
            states.append(AggregatorState(
                index=i, state=PHASES[(progress >> 16) & 3], chunk=cells["chunk_id"][i]["f1"],
                bitmap=cells["contributors"][i]["f1"], count=progress & 0xFF,
                scale=cells["agreed_scale"][i]["f1"], exp=cells["max_exp"][i]["f1"],
                helper=cells["helper_id"][i]["f1"], run=cells["run_id"][i]["f1"],
                lanes=tuple(_int32(v) for v in low + high), holder=holders[i]["hi"]))
        return states

    def clear(self, conn: BfrtConnection, indices, pipe: int = 0) -> None:
        """Zero every register of the aggregators (a pool aggregator's lane holder and the
        lanes' gate too), and their workers' `member` cells (a zero generation is never
        current: the first aggregation bumps it to 1): one request per register, with all
        its cells."""
        indices = aggregator_indices(indices)
        writes = [("modify", _cell(names.AGGREGATOR, name, i, {"f1": 0}))
                  for name in STATE_REGISTERS for i in indices]
        writes += [("modify", _cell(names.AGGREGATOR, "member", i * P.MAX_WORKERS + w, {"f1": 0}))
                   for i in indices for w in range(P.MAX_WORKERS)]
        writes += [("modify", _cell(names.LANES, name, i, {"lo": 0, "hi": 0}))
                   for name in (*LANE_REGISTERS, GATE_REGISTER) for i in indices]
        writes += [("modify", _cell(names.AGGREGATOR, "lane_holder", i, {"lo": 0, "hi": 0}))
                   for i in indices]
        conn.write(writes, pipe)

    def evictions(self, conn: BfrtConnection, job_index: int) -> int:
        return read_counter(conn, self.evictions_counter, [job_index])[0]

    def management(self, conn: BfrtConnection) -> dict[str, int]:
        """Management requests the switch handled, per kind."""
        read, clear = read_counter(conn, self.management_counter,
                                   [P.MGMT_READ_AGGREGATOR, P.MGMT_CLEAR_AGGREGATOR])
        return {"READ_AGGREGATOR": read, "CLEAR_AGGREGATOR": clear}


def _cell(control: str, register: str, index: int, values: dict) -> BfrtEntry:
    return BfrtEntry.make(names.register(control, register), {names.REGISTER_INDEX: index},
                          {names.register_field(control, register, f): v
                           for f, v in values.items()})


def _read(conn: BfrtConnection, control: str, register: str, indices: list[int], pipe: int,
          parts=("f1",)) -> dict[int, dict[str, int]]:
    """One register's cells at ``indices`` in ``pipe``, in one request (a read of one pipe
    returns one value per field; a read of all pipes would return one per active pipe)."""
    found = conn.read(names.register(control, register), pipe=pipe,
                      keys=[{names.REGISTER_INDEX: i} for i in indices], from_hw=True)
    cells = {}
    for entry in found:
        data = dict(entry.data)
        cells[dict(entry.key)[names.REGISTER_INDEX]] = {
            part: _one(data[names.register_field(control, register, part)]) for part in parts}
    return cells


def _one(value) -> int:
    """A register field read from one pipe: BF Runtime returns it as a list of one value."""
    if isinstance(value, tuple):
        if len(value) != 1:
            raise ValueError(f"a register read of one pipe returned {len(value)} values")
        (value,) = value
    return value


def _int32(value: int) -> int:
    return value - (1 << 32) if value & 0x80000000 else value

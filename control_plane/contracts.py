"""What a backend of the controller provides, written down: the controls that reach a switch's
aggregators and packet counters, the primitives ``switch_controller.SwitchController`` builds the
job API on, and the values they return (an aggregator's state, a job index's packet counts).

Both backends satisfy these: P4Runtime (``controller.py``, ``controls/``) and BF Runtime
(``tofino/``); tests/test_control_plane.py holds their classes to the signatures here, so a
backend that drifts fails there. This module imports neither P4Runtime nor BF Runtime code, so
each backend takes these types without the other's libraries.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from protocol import constants as P

if TYPE_CHECKING:
    from control_plane.entries import MulticastGroup, TableEntry
    from protocol.jobspec import JobSpec

# A planned change: ("insert" | "modify" | "delete", a table entry or a multicast group).
Write = tuple[str, "TableEntry | MulticastGroup"]

# One job index's counts: {'packets': {op name: count}, 'drops': {drop reason name: count}}.
PacketCounts = dict[str, dict[str, int]]


@dataclass(frozen=True)
class AggregatorState:
    """One aggregator as the switch holds it, in the protocol's terms (docs/protocol.md §4)."""

    index: int
    state: P.SlotState
    chunk: int
    bitmap: int
    count: int
    scale: int
    exp: int
    helper: int
    run: int
    lanes: tuple[int, ...]
    holder: int = 0  # a pool aggregator's: the holding aggregator's index + 1 | POOL_HELD

    @property
    def held_by(self) -> int | None:
        """The aggregator whose chunk holds these (pool) lanes, if any."""
        return (self.holder & ~P.POOL_HELD) - 1 if self.holder else None


def aggregator_indices(indices: Iterable[int]) -> list[int]:
    """``indices`` as a list, each checked to name an aggregator of the switch."""
    indices = list(indices)
    for index in indices:
        if not 0 <= index < P.NUM_AGGREGATORS:
            raise ValueError(f"aggregator index {index} outside 0..{P.NUM_AGGREGATORS - 1}")
    return indices


def summarize(packets: list[int], drops: list[int], zeros: bool = False) -> PacketCounts:
    """One job index's counter cells (indexed by op and by drop reason) by name; zeros left out
    unless ``zeros``."""
    ops, reasons = _op_names(), _reason_names()
    return {"packets": {ops[i]: n for i, n in enumerate(packets) if (n or zeros) and i in ops},
            "drops": {reasons[i]: n for i, n in enumerate(drops)
                      if (n or zeros) and i in reasons}}


def _op_names() -> dict[int, str]:
    """Every index the switch counts: op 0 is non-SA-ATP traffic, and ops no host may send
    (BAD_OP drops) are counted under their number."""
    names = {i: f"OP_{i}" for i in range(P.STATS_PER_JOB)}
    return {**names, 0: "OTHER", **{op.value: op.name for op in P.Op}}


def _reason_names() -> dict[int, str]:
    return {r.value: r.name for r in P.DropReason if r.value}


# ``conn`` is the backend's own connection (P4Runtime's SwitchConnection, BF Runtime's
# BfrtConnection); the controls are only ever handed their own backend's.


@runtime_checkable
class AggregatorControl(Protocol):
    """control Aggregator: the aggregators' registers in one pipe (a v1model switch has only
    pipe 0; on Tofino a job's aggregators are its workers' pipe's), and the ``evictions`` and
    ``management`` counters, summed over the pipes."""

    def read(self, conn: Any, indices: Iterable[int], pipe: int = 0) -> list[AggregatorState]:
        """The aggregators at ``indices``, in that order."""

    def clear(self, conn: Any, indices: Iterable[int], pipe: int = 0) -> None:
        """Zero every register of the aggregators at ``indices``."""

    def evictions(self, conn: Any, job_index: int) -> int:
        """Unfinished aggregations of a job overwritten by a newer chunk."""

    def management(self, conn: Any) -> dict[str, int]:
        """Management requests the switch handled, per kind."""


@runtime_checkable
class PacketStatsControl(Protocol):
    """control PacketStats, at ingress or at egress: packets per op and drops per reason."""

    def read(self, conn: Any, job_index: int, zeros: bool = False) -> PacketCounts:
        """One job index's counts (0: traffic that matched no job), zeros left out unless
        ``zeros``."""


class SwitchBackend(Protocol):
    """What a subclass of ``SwitchController`` implements: its controls, and the primitives the
    job API is built on."""

    conn: Any  # the backend's connection; None until connect()
    aggregator: AggregatorControl
    ingress_stats: PacketStatsControl
    egress_stats: PacketStatsControl

    def connect(self, read_only: bool = False) -> SwitchBackend:
        """Open the session; ``read_only`` leaves writing (and the switch's primary role) to
        another client."""

    def load_pipeline(self, force: bool = False) -> bool:
        """Make sure the switch runs the program; True if it had to be pushed (which leaves
        every table, register and counter cleared)."""

    def pipe_of(self, spec: JobSpec) -> int:
        """The pipe whose registers hold the aggregators of a job of ``spec`` (a pipe's
        registers are its own: jobs of different pipes may use the same slots)."""

    def read_groups(self) -> dict[int, MulticastGroup]:
        """The multicast groups as the switch holds them."""

    def _write(self, writes: list[Write]) -> None:
        """Apply planned changes, in order."""

    def _read_table(self, table: str) -> list[TableEntry]:
        """A table's entries as the switch holds them, its default entry included."""

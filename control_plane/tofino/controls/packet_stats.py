"""control PacketStats (p4src/tofino/packet_stats.p4), at ingress and at egress: counters
``packets`` and ``drops``, read over BF Runtime."""

from __future__ import annotations

from control_plane.contracts import PacketCounts, summarize
from control_plane.tofino import names
from control_plane.tofino.bfrt import BfrtConnection
from protocol import constants as P


class PacketStats:
    def __init__(self, path: str):
        self.packets = names.table(f"{path}.packets")
        self.drops = names.table(f"{path}.drops")

    def read(self, conn: BfrtConnection, job_index: int, zeros: bool = False) -> PacketCounts:
        """Counts by op and reason (``contracts.PacketStatsControl``)."""
        indices = range(job_index * P.STATS_PER_JOB, (job_index + 1) * P.STATS_PER_JOB)
        return summarize(read_counter(conn, self.packets, indices),
                         read_counter(conn, self.drops, indices), zeros)


def read_counter(conn: BfrtConnection, table: str, indices) -> list[int]:
    """Packet counts of an indirect counter at ``indices``, summed over the pipes."""
    found = {dict(e.key)[names.COUNTER_INDEX]: dict(e.data)[names.COUNTER_PACKETS]
             for e in conn.read(table, keys=[{names.COUNTER_INDEX: i} for i in indices],
                                from_hw=True)}
    return [_total(found.get(i, 0)) for i in indices]


def _total(value) -> int:
    return sum(value) if isinstance(value, tuple) else value

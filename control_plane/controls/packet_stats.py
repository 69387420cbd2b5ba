"""control PacketStats (p4src/packet_stats.p4), instantiated at ingress and at egress: counters
``packets`` (per job index and op) and ``drops`` (per job index and drop reason)."""

from __future__ import annotations

from p4.v1 import p4runtime_pb2

from control_plane.connection import SwitchConnection
from control_plane.contracts import PacketCounts, summarize
from protocol import constants as P


class PacketStats:
    def __init__(self, path: str):
        self.packets = f"{path}.packets"
        self.drops = f"{path}.drops"

    def read(self, conn: SwitchConnection, job_index: int, zeros: bool = False) -> PacketCounts:
        """{'packets': {op name: count}, 'drops': {reason name: count}} for one job index
        (0 = traffic that matched no job); zero entries are left out unless ``zeros``."""
        start = job_index * P.STATS_PER_JOB
        return summarize(_read_counter(conn, self.packets, start, P.STATS_PER_JOB),
                         _read_counter(conn, self.drops, start, P.STATS_PER_JOB), zeros)


def _read_counter(conn: SwitchConnection, name: str, start: int, count: int) -> list[int]:
    """Packet counts of indices start..start+count-1 of an indirect counter."""
    counter_id = conn.p4info.counter(name).preamble.id
    entities = []
    for i in range(start, start + count):
        entity = p4runtime_pb2.Entity()
        entity.counter_entry.counter_id = counter_id
        entity.counter_entry.index.index = i
        entities.append(entity)
    values = [0] * count
    for e in conn.read(*entities):
        values[e.counter_entry.index.index - start] = e.counter_entry.data.packet_count
    return values

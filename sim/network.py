"""The cluster's network and switch, as parameters, and the links of a job's workers.

Links are full duplex and first-in first-out: a transfer starts when it is ready and the link
has finished the transfers queued on it before, and takes ``packets / pps`` on it (the link's
packet rate: bandwidth over on-wire frame size, capped by what the host can send). Each worker
has one link to its switch (one GPU, one NIC); the arrays hold every worker's link at once so a
transfer to or from many workers is one array operation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from protocol import constants as P

WIRE_OVERHEAD = 20  # Ethernet preamble, start delimiter and inter-frame gap, bytes


@dataclass(frozen=True)
class Network:
    bandwidth_bps: float = 100e9  # per worker link, each direction
    latency_s: float = 2.5e-6  # one way, host to switch: NIC, cable, switch
    host_pps: float = math.inf  # packets per second a host's sender reaches
    host_add_Bps: float = 20e9  # bytes per second a helper or server host sums
    rto_s: float = 1e-3  # retransmission timeout (protocol §7.1; backs off x2)
    loss: float = 0.0  # per packet, each direction
    frame_bytes: int = P.FRAME_LEN + WIRE_OVERHEAD  # one SA-ATP packet on the wire
    payload_bytes: int = P.PAYLOAD_LEN
    bulk_efficiency: float = 0.97  # payload share of the wire for bulk TCP/RDMA transfers
    step_s: float = 0.0  # software cost per message of a ring step or a PS request
    # the hosts' and the switch's software between a window's results and its next chunks,
    # beyond the latencies and the packet times: a round trip of the window takes this longer
    turnaround_s: float = 0.0

    @property
    def pps(self) -> float:
        """SA-ATP packets per second on one link."""
        return min(self.bandwidth_bps / (8 * self.frame_bytes), self.host_pps)

    @property
    def bulk_Bps(self) -> float:
        """Payload bytes per second of a bulk (ring, parameter server) transfer on one link."""
        return self.bandwidth_bps / 8 * self.bulk_efficiency

    def packets(self, nbytes: int) -> int:
        return -(-nbytes // self.payload_bytes)


@dataclass(frozen=True)
class SwitchConfig:
    """An aggregation switch. ``slots`` aggregators of K lanes (one packet each) are a job's
    window (SwitchML's pool); with ``shared_pool`` set, jobs instead claim aggregators from one
    pool of that many, first come first served, and a block that finds none free is summed on
    a host: ``pool_overflow`` 'server' sends it to the job's parameter server unaggregated
    (ATP's best effort), 'sender' starts it taken over by its first sender, which the others'
    contributions then go to (SA-ATP's switch, docs/protocol.md §4.6)."""

    slots: int = 512
    shared_pool: int | None = None
    pool_overflow: str = "server"
    pipeline_pps: float = math.inf  # contributions aggregated per second (whole switch)
    complete_pps: float = math.inf  # completing contributions (sum read + multicast) per second
    rack_size: int = P.MAX_WORKERS  # workers per leaf switch: bitmaps are 32 bits wide
    spine_bandwidth_bps: float | None = None  # leaf-spine links (None: as the workers')
    spine_latency_s: float | None = None


@dataclass
class Links:
    """Uplinks and downlinks of ``n`` endpoints (workers, or a job's servers)."""

    pps: np.ndarray  # per endpoint
    up_free: np.ndarray = field(init=False)
    down_free: np.ndarray = field(init=False)

    def __post_init__(self):
        self.pps = np.asarray(self.pps, np.float64)
        self.up_free = np.zeros(len(self.pps))
        self.down_free = np.zeros(len(self.pps))

    @classmethod
    def uniform(cls, n: int, pps: float) -> Links:
        return cls(np.full(n, pps))

    def send(self, who, ready, packets) -> tuple[np.ndarray, np.ndarray]:
        """Queue ``packets`` on the uplinks of ``who`` once ``ready``: (start, end) of each."""
        start = np.maximum(ready, self.up_free[who])
        end = start + packets / self.pps[who]
        self.up_free[who] = end
        return start, end

    def stream_up(self, who, last_ready, packets) -> np.ndarray:
        """A stream of ``packets`` forwarded as it is produced, its last packet ready at
        ``last_ready`` (the others just before it, at the link's rate): when the last one has
        left (earlier transfers on the link push it back)."""
        end = self._stream(self.up_free, who, last_ready, packets)
        self.up_free[who] = end
        return end

    def stream_down(self, who, last_ready, packets) -> np.ndarray:
        """As :meth:`stream_up`, on the downlinks (a result stream)."""
        end = self._stream(self.down_free, who, last_ready, packets)
        self.down_free[who] = end
        return end

    def _stream(self, free, who, last_ready, packets) -> np.ndarray:
        per = 1.0 / self.pps[who]
        return np.maximum(last_ready + per, free[who] + packets * per)

    def receive(self, who, ready, packets) -> np.ndarray:
        """A bulk transfer of ``packets`` to ``who`` whose first packet is ready at ``ready``."""
        end = np.maximum(ready, self.down_free[who]) + packets / self.pps[who]
        self.down_free[who] = end
        return end


def drain(free: float, first, last, work) -> float:
    """When a server has taken in every stream: stream k arrives between ``first[k]`` and
    ``last[k]`` and takes ``work[k]`` seconds of the server (an aggregation pipeline, or the
    downlink of a parameter server under incast), which works whenever anything is waiting and
    is free from ``free`` on; it cannot finish a stream before its last part arrived."""
    t = free
    for k in np.argsort(first, kind="stable"):
        t = max(t, first[k]) + work[k]
    return float(max(t, np.max(last)))

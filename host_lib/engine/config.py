"""One worker's configuration for one job and run: who it is, where the switch and its peers are,
its slots and its timers. The communicator and its transport share it; ``from_spec`` builds it
from a job spec (protocol/jobspec.py).

Slots as everywhere in the project (docs/protocol.md §4, §4.6): ``slots`` are the job's own,
``borrow`` more are borrowed per chunk from the switch's shared pool, and the window
``W = slots + borrow`` is how many chunks a worker keeps in flight, chunk c in slot c mod W.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from protocol import constants as P
from protocol.codec import Endpoint
from protocol.jobspec import JobSpec


@dataclass(frozen=True)
class CommunicatorConfig:
    job: int
    worker: int
    n_workers: int
    slots: int  # the job's own slots
    local: Endpoint  # this worker's MAC, IP and UDP port
    switch: Endpoint  # the address workers send to
    run: int  # the run's identity, the same on every worker (host_lib/engine/runs.py)
    peers: dict[int, Endpoint] = field(default_factory=dict)  # every worker, for helpers
    borrow: int = 0  # slots borrowed per chunk from the switch's shared pool
    silence_timeout: float = 5.0  # longest silence of the switch while chunks are pending
    stall_timeout: float = 60.0  # longest wait for any chunk to complete, whatever arrives
    initial_rto: float = 0.05
    quantizer_threads: int = 1
    # Shards of a call, each on a thread and socket of its own (host_lib/engine/shards.py);
    # None: as many as cores where the link opens a socket per shard, else one.
    shards: int | None = None
    metrics_listen: str | None = None  # "HOST:PORT": serve per-call statistics to Prometheus

    @property
    def window(self) -> int:
        """W: the chunks in flight, one per slot, own and borrowed."""
        return self.slots + self.borrow

    @property
    def all_workers(self) -> int:
        """The bitmap of every worker of the job."""
        return (1 << self.n_workers) - 1

    @classmethod
    def from_spec(cls, spec: JobSpec, worker_id: int, run: int, **overrides
                  ) -> CommunicatorConfig:
        """Configuration of one worker of a job spec, in run ``run``."""
        w = spec.worker(worker_id)
        peers = {p.id: Endpoint(p.mac, p.ip, p.udp_port) for p in spec.workers}
        return cls(job=spec.id, worker=w.id, n_workers=len(spec.workers), slots=spec.slots,
                   borrow=spec.borrow, local=peers[w.id],
                   switch=Endpoint(spec.switch_mac, spec.switch_ip, P.UDP_PORT), run=run,
                   peers=peers, **overrides)

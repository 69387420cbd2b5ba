"""control ReplicaRewrite (p4src/replica_rewrite.p4): table ``replicas``, the addresses
of each worker of a job, for its multicast copies and the HELPER_DATA forwarded to it."""

from __future__ import annotations

from control_plane.allocation import AdmittedJob
from control_plane.entries import TableEntry
from protocol.codec import Endpoint


class ReplicaRewrite:
    def __init__(self, path: str = "SaAtpEgress.replica_rewrite"):
        self.table = f"{path}.replicas"
        self.to_worker = f"{path}.to_worker"

    @property
    def tables(self) -> tuple[str, ...]:
        return (self.table,)

    def entries(self, job: AdmittedJob) -> list[TableEntry]:
        out = []
        for w in job.spec.workers:
            ep = Endpoint(w.mac, w.ip, w.udp_port)
            out.append(TableEntry.make(
                self.table, {"hdr.sa.job": job.spec.id, "meta.dest_worker": w.id}, self.to_worker,
                {"mac": int.from_bytes(ep.mac_raw, "big"),
                 "ip": int.from_bytes(ep.ip_raw, "big"), "udp_port": w.udp_port}))
        return out

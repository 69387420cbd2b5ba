"""Mininet topologies for one SA-ATP job: a star (one switch, N workers) and a leaf-spine tree
(leaf switches under a spine that aggregates). Each topology also says where every worker sits and
which switch does what, so that a controller can program it (topologies.mininet_cluster).

Worker w is host h<w+1> with MAC 02:00:00:00:00:<w+1> and IP 10.0.0.<w+1>/24; workers send to
the virtual switch address 02:00:00:00:00:fe / 10.0.0.254 (examples/jobs/four_workers.toml is
the star's job with 4 workers).

From Python::

    topo = StarTopo(4)                     # or LeafSpineTopo(leaves=2, hosts_per_leaf=2)
    spec = topo.job_spec(job_id=7)         # the job the aggregating switch admits

With ``mn``, through topologies/mn_custom.py (docs/topologies.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from mininet.topo import Topo

from protocol.jobspec import JobSpec, WorkerSpec

SWITCH_MAC = "02:00:00:00:00:fe"
SWITCH_IP = "10.0.0.254"
PREFIX_LEN = 24


@dataclass(frozen=True)
class WorkerPlace:
    """Where worker ``worker`` sits: its host and addresses, and the port of the aggregating
    switch its packets arrive on."""

    worker: int
    host: str
    mac: str
    ip: str
    aggregator_port: int


@dataclass(frozen=True)
class LeafRole:
    """A switch that forwards the job: port per worker MAC below it, and its uplink."""

    hosts: dict[str, int]  # worker MAC -> port
    uplink: int  # port towards the aggregating switch

    def routes(self) -> dict[str, int]:
        """MAC -> port entries the leaf needs: workers down, the switch address up."""
        return {**self.hosts, SWITCH_MAC: self.uplink}


class SaAtpTopo(Topo):
    """A topology for one job: ``aggregating_switch`` names the switch that aggregates it,
    ``workers`` the worker places, ``leaves`` the switches that only forward it (name ->
    LeafRole)."""

    aggregating_switch: str
    workers: list[WorkerPlace]
    leaves: dict[str, LeafRole]

    def _add_worker(self, worker: int, aggregator_port: int) -> str:
        place = WorkerPlace(worker, f"h{worker + 1}", f"02:00:00:00:00:{worker + 1:02x}",
                            f"10.0.0.{worker + 1}", aggregator_port)
        self.workers.append(place)
        return self.addHost(place.host, mac=place.mac, ip=f"{place.ip}/{PREFIX_LEN}")

    def job_spec(self, job_id: int = 7, slots: int = 64) -> JobSpec:
        """The job of every worker of this topology, as the aggregating switch admits it."""
        return JobSpec(job_id, slots,
                       tuple(WorkerSpec(p.worker, p.aggregator_port, p.mac, p.ip)
                             for p in self.workers),
                       switch_mac=SWITCH_MAC, switch_ip=SWITCH_IP)


class StarTopo(SaAtpTopo):
    """One switch s1; worker w on its port w + 1."""

    def build(self, workers: int = 4) -> None:
        if not 1 <= workers <= 32:
            raise ValueError(f"a job has 1..32 workers, not {workers}")
        self.workers, self.leaves = [], {}
        self.aggregating_switch = self.addSwitch("s1")
        for w in range(workers):
            self.addLink(self._add_worker(w, w + 1), self.aggregating_switch, port1=0, port2=w + 1)


class LeafSpineTopo(SaAtpTopo):
    """Spine s1 aggregates; leaf s<i+2> hangs off spine port i + 1 by its last port and forwards.
    Leaf i's k-th worker (worker i * hosts_per_leaf + k) is on the leaf's port k + 1."""

    def build(self, leaves: int = 2, hosts_per_leaf: int = 2) -> None:
        if leaves < 1 or hosts_per_leaf < 1 or not leaves * hosts_per_leaf <= 32:
            raise ValueError(f"{leaves} leaves x {hosts_per_leaf} hosts: a job has 1..32 "
                             f"workers")
        self.workers, self.leaves = [], {}
        self.aggregating_switch = self.addSwitch("s1")
        uplink = hosts_per_leaf + 1
        for i in range(leaves):
            leaf = self.addSwitch(f"s{i + 2}")
            hosts = {}
            for k in range(hosts_per_leaf):
                host = self._add_worker(i * hosts_per_leaf + k, aggregator_port=i + 1)
                self.addLink(host, leaf, port1=0, port2=k + 1)
                hosts[self.workers[-1].mac] = k + 1
            self.addLink(leaf, self.aggregating_switch, port1=uplink, port2=i + 1)
            self.leaves[leaf] = LeafRole(hosts, uplink)


"""In-network aggregation of one job's gradient through a switch, or a leaf-spine hierarchy of
switches, as SimPy processes.

The gradient is cut into *blocks*: runs of consecutive packets (chunks of K lanes) of one DDP
bucket. Each worker streams its blocks in order over its uplink, as soon as the bucket is ready
and the window allows: block j waits for the result of block j - w (w: the job's ``slots``
aggregators in blocks), which is SwitchML's self-clocking at block grain. A block holds its
aggregators from its first contribution until its result leaves (or a helper takes it over).
The switch aggregates contributions at its pipeline rate (the completing one at the multicast
rate) and multicasts the result stream to every worker of the job.

Contributors are the plan's; its fan-in is what the switch waits for (k-of-n: the first k, a
later contribution is answered with a copy). With more workers than a switch's 32-bit bitmap
(``rack_size``), each leaf switch aggregates its rack's contributors (the plan's bitmap sliced
per rack; fan-in in proportion) and a spine switch sums the racks' partials (a 32-bit bitmap of
racks, as ATP's two aggregation levels), then the results go back down.

Slot takeover (protocol §7.2): a block's helper (``plan.helpers`` of its rack, in duty order)
asks for the slots once ``max(2 RTO, takeover_after)`` has passed since it sent the block (2 RTO
for a block of a shared pool, as for a chunk in a borrowed slot) and only stragglers are
missing; the switch hands it the partial and frees the aggregators, the other workers' windows
move on, the missing workers' data go to the helper, which sums on its host and has the switch
multicast the result. Helper traffic has its own FIFO per helper, beside the helper's data and
result streams (which it would share the link with).

Shared pool: a block that finds too few free aggregators is summed on a host instead, either
ATP's way (the job's parameter server: every contribution goes there) or SA-ATP's (the block
starts taken over by its first sender, whose own contribution is the partial: the others' go to
it as to a helper, docs/protocol.md §4.6); the host sends the result back through the switch's
multicast.

Loss: each packet is lost with probability ``loss``; a lost data packet delays its worker's
contribution, a lost result its receiver, by the retransmission timeouts it takes (doubling).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np
import simpy

from sim.network import Links, Network, SwitchConfig, drain


@dataclass
class Outcome:
    """One allreduce call: per worker, when it holds every result; what happened on the way."""

    delivered: np.ndarray
    taken: int = 0  # block-racks resolved by a helper
    hosted: int = 0  # blocks part of which the helpers summed on their hosts (host_share)
    fallback: int = 0  # blocks summed on a host because the pool had no free aggregators
    retransmissions: int = 0
    summed: np.ndarray | None = None  # whose contributions the (last) result sums
    # per worker, how long its calls took together (a block's call from when the block is
    # ready, or the worker's previous call ended, to its result), and of that until the
    # switch's part and the hosts' part of each block were in: None where not measured
    busy_s: np.ndarray | None = None
    switch_s: np.ndarray | None = None
    host_s: np.ndarray | None = None


@dataclass(frozen=True)
class CallPlan:
    """What the switch needs of an iteration's plan: who contributes, how many it waits for,
    who may take over whose slots."""

    contributors: np.ndarray  # bool per worker
    fanin: int
    helpers: tuple[int, ...] = ()
    stragglers: frozenset[int] = frozenset()
    takeover_after: float = 0.0
    host_share: float = 0.0
    ring: bool = False  # the calls go through the hosts' ring, not the switch (RoundPlan.ring)

    @classmethod
    def of(cls, plan) -> CallPlan:
        contributors = np.array([plan.contributes(w) for w in range(plan.n_workers)])
        return cls(contributors, plan.fanin or int(contributors.sum()), plan.helpers,
                   plan.stragglers, plan.takeover_after, plan.host_share, plan.ring)


def retransmission_delay(packets: int, loss: float, rto: float, rng, size: int) -> np.ndarray:
    """Per stream of ``packets``, the delay its unluckiest packet adds: rto (2^k - 1) for k
    consecutive losses."""
    if loss <= 0:
        return np.zeros(size)
    u = rng.random(size)
    k = np.zeros(size)
    i = 1
    while True:
        hit = u < 1 - (1 - loss ** i) ** packets
        if not hit.any():
            return rto * (2 ** k - 1)
        k[hit] = i
        i += 1


def block_plan(bucket_bytes: list[int], net: Network, max_blocks: int) -> list[tuple[int, int]]:
    """(bucket, packets) of each block, in sending order: about ``max_blocks`` per call."""
    packets = [net.packets(b) for b in bucket_bytes]
    size = max(1, math.ceil(sum(packets) / max_blocks))
    out = []
    for b, p in enumerate(packets):
        full, rest = divmod(p, size)
        out += [(b, size)] * full + ([(b, rest)] if rest else [])
    return out


class SwitchPipeline:
    """When a single switch's pipeline is next free, shared by every job it aggregates for:
    one process's packet loop on the testbed's embedded switch. (A job over several racks
    keeps its own leaves' and spine's.)"""

    def __init__(self):
        self.free = np.zeros(2)  # the switch's, then the spine's slot a single switch leaves


class SlotPool:
    """Aggregators shared by the jobs of one switch, claimed without waiting (ATP)."""

    def __init__(self, env: simpy.Environment, size: int):
        self.env = env
        self.container = simpy.Container(env, capacity=size, init=size)

    def claim(self, n: int) -> bool:
        if self.container.level < n:
            return False
        self.container.get(n)
        return True

    def release_at(self, when: float, n: int) -> None:
        def release():
            yield self.env.timeout(max(0.0, when - self.env.now))
            yield self.container.put(n)
        self.env.process(release())


class SwitchAggregation:
    """One job's aggregation through its switch (or switches); ``run`` is one allreduce."""

    def __init__(self, env: simpy.Environment, n_workers: int, net: Network,
                 switch: SwitchConfig, bucket_bytes: list[int], rng: np.random.Generator,
                 pool: SlotPool | None = None, max_blocks: int = 32,
                 pipeline: SwitchPipeline | None = None):
        self.env, self.n, self.net, self.switch, self.rng = env, n_workers, net, switch, rng
        self.blocks = block_plan(bucket_bytes, net, max_blocks)
        size = max(p for _, p in self.blocks)
        self.window = max(1, switch.slots // size)  # blocks in flight per worker
        self.holds = min(size, switch.slots)  # aggregators a block holds
        self.pool = pool
        # A block larger than the window streams at most ``slots`` packets per round trip
        # (the hosts' turnaround included: a block that waits for a result waits for it too).
        rtt = 2 * net.latency_s + 2 / net.pps + net.turnaround_s
        self.window_pps = net.pps if size <= switch.slots else min(net.pps, switch.slots / rtt)
        self.links = Links.uniform(n_workers, net.pps)
        self.helper_links = Links.uniform(n_workers, net.pps)  # takeover traffic
        self.ps = Links.uniform(1, net.pps)  # the job's parameter server
        rs = switch.rack_size
        self.racks = [np.arange(r, min(n_workers, r + rs)) for r in range(0, n_workers, rs)]
        if pool is not None and len(self.racks) > 1:
            raise ValueError("a shared aggregator pool is modelled on a single switch only")
        spine_pps = (switch.spine_bandwidth_bps or net.bandwidth_bps) / (8 * net.frame_bytes)
        self.spine = Links.uniform(len(self.racks), spine_pps)
        self.spine_latency = (net.latency_s if switch.spine_latency_s is None
                              else switch.spine_latency_s)
        # when each leaf's pipeline, then the spine's, is next free
        self.pipe_free = (pipeline.free if pipeline is not None and len(self.racks) == 1
                          else np.zeros(len(self.racks) + 1))
        self._opened: deque[np.ndarray] = deque()

    # -- the call -----------------------------------------------------------------------------

    def run(self, ready: np.ndarray, plan: CallPlan, joined: np.ndarray | None = None):
        """SimPy process body: ``ready`` (workers x buckets) is when each bucket of each
        contributor is ready (NaN: sends nothing; ``joined``, when a worker that sends nothing
        enters the call, does not matter to the switch). Returns the Outcome."""
        out = Outcome(np.full(self.n, -np.inf), busy_s=np.zeros(self.n),
                      switch_s=np.zeros(self.n), host_s=np.zeros(self.n))
        sending = plan.contributors & np.isfinite(ready).all(axis=1)
        per_rack = [plan.contributors[r].sum() for r in self.racks]
        total = max(1, sum(per_rack))
        fanin = [min(int(sending[r].sum()), math.ceil(plan.fanin * c / total))
                 for r, c in zip(self.racks, per_rack, strict=True)]
        senders = np.flatnonzero(sending)
        lat = self.net.latency_s
        helpers = [h for h in plan.helpers if sending[h]]
        for j, (bucket, block) in enumerate(self.blocks):
            hosted = int(plan.host_share * block) if helpers else 0
            began = np.maximum(ready[:, bucket], out.delivered)
            if hosted:  # it starts where the call does: after the worker's call before
                on_hosts = self._on_hosts(began[senders], senders, helpers, hosted)
                out.host_s += np.where(np.isfinite(began), on_hosts - began, 0.0)
                out.hosted += 1
            p = block - hosted  # what the switch sums
            if not p:  # all of it on hosts: the switch's window is not used
                out.busy_s += np.where(np.isfinite(began), on_hosts - began, 0.0)
                out.delivered = np.maximum(out.delivered, on_hosts)
                self._opened.append(np.full(self.n, -np.inf))
                continue
            start = ready[senders, bucket]
            if len(self._opened) >= self.window:
                start = np.maximum(start, self._opened.popleft()[senders]
                                   + self.net.turnaround_s)
            s, e = self.links.send(senders, start, p)
            e = np.maximum(e, s + p / self.window_pps)  # the window paces the stream
            sent, first, last = (np.full(self.n, np.nan) for _ in range(3))
            sent[senders] = s
            first[senders] = s + 1 / self.links.pps[senders] + lat
            lost = retransmission_delay(p, self.net.loss, self.net.rto_s, self.rng, len(senders))
            out.retransmissions += int(np.count_nonzero(lost))
            last[senders] = e + lat + lost
            yield self.env.timeout(max(0.0, float(np.nanmin(first)) - self.env.now))
            notice = np.full(self.n, np.inf)
            if self.pool is not None and not self.pool.claim(self.holds):
                out.fallback += 1
                if self.switch.pool_overflow == "sender":
                    done, handed = self._at_sender(first, last, senders, p)
                    notice[senders] = np.maximum(handed, last[senders]) + lat
                else:
                    done = self._at_server(first, last, senders, p)
                delivered = self._deliver(done, p)
            else:
                done, delivered, release = self._through_switch(j, sent, first, last, plan,
                                                                fanin, p, notice, out)
                if self.pool is not None:
                    self.pool.release_at(release, self.holds)
            out.summed = self._counted(last, fanin)
            late = last > done  # a contribution after completion gets a copy of the result
            delivered[late] = np.maximum(delivered[late], last[late] + 1 / self.net.pps + lat)
            lost = retransmission_delay(p, self.net.loss, self.net.rto_s, self.rng, self.n)
            out.retransmissions += int(np.count_nonzero(lost))
            delivered += lost
            out.switch_s += np.where(np.isfinite(began), delivered - began, 0.0)
            if hosted:
                delivered = np.maximum(delivered, on_hosts)
            out.busy_s += np.where(np.isfinite(began), delivered - began, 0.0)
            out.delivered = np.maximum(out.delivered, delivered)
            self._opened.append(np.minimum(notice, delivered))
        return out

    # -- stages -------------------------------------------------------------------------------

    def _through_switch(self, j, sent, first, last, plan, fanin, p, notice, out):
        """Leaves (and spine): when the block is complete, when each worker has its result,
        when the aggregators are free; takeover notices go into ``notice``."""
        leaf_done = np.full(len(self.racks), np.nan)
        release = 0.0
        for r, rack in enumerate(self.racks):
            if not fanin[r]:
                continue
            done = self._aggregate(r, first[rack], last[rack], fanin[r], p)
            taken = self._take_over(j, rack, sent, last, plan, done, p)
            if taken is not None:
                done, freed, expected = taken
                # the others' windows move on; a missing worker learns it when it sends
                notice[expected] = np.maximum(freed, np.nan_to_num(last[expected])) \
                    + self.net.latency_s
                out.taken += 1
            release = max(release, done if taken is None else freed)
            leaf_done[r] = done
        if len(self.racks) == 1:
            return float(leaf_done[0]), self._deliver(leaf_done[0], p), release
        spine_done = self._spine(leaf_done, p)
        return spine_done, self._deliver_down(spine_done, p), release

    def _aggregate(self, r: int, first, last, fanin: int, p: int) -> float:
        """The leaf's pipeline summing the first ``fanin`` contributions to arrive (the last
        one completing the slots and multicasting)."""
        ok = np.isfinite(last)
        order = np.argsort(last[ok])[:fanin]
        begins, ends = first[ok][order], last[ok][order]
        agg, fin = self.switch.pipeline_pps, self.switch.complete_pps
        if math.isinf(agg) and math.isinf(fin):
            return float(ends.max())
        work = np.full(len(begins), p / agg)
        work[np.argmax(begins)] = p / fin
        self.pipe_free[r] = drain(self.pipe_free[r], begins, ends + 1 / fin, work)
        return self.pipe_free[r]

    def _take_over(self, j: int, rack, sent, last, plan: CallPlan, done: float, p: int):
        """None, or (completion, when the slots were freed, the rack's expected contributors)
        when the rack's helper for block ``j`` takes it over."""
        members = set(rack.tolist())
        helpers = [h for h in plan.helpers if h in members]
        if not helpers:
            return None
        h = helpers[j % len(helpers)]
        if not np.isfinite(sent[h]):
            return None
        rto = self.net.rto_s
        # A block of the shared pool holds aggregators other jobs wait for: it is taken over as
        # soon as it is late, whatever lag the plan expects (as a borrowed slot's chunk is).
        wait = 2 * rto if self.pool is not None else max(2 * rto, plan.takeover_after)
        freed = sent[h] + wait + self.net.latency_s
        if done <= freed:
            return None
        expected = rack[plan.contributors[rack]]
        missing = expected[~(last[expected] <= freed)]
        if (not len(missing) or h in missing
                or (plan.stragglers and not set(missing.tolist()) <= plan.stragglers)):
            return None
        lat = self.net.latency_s
        arrived = [self.helper_links.receive([h], freed, p)[0]]
        for m in missing[np.argsort(last[missing])]:
            when = last[m] if np.isfinite(last[m]) else np.inf
            arrived.append(self.helper_links.receive([h], when, p)[0])
        summed = max(arrived) + lat + (1 + len(missing)) * p * self.net.payload_bytes \
            / self.net.host_add_Bps
        _, end = self.helper_links.send([h], summed, p)
        return float(end[0]) + lat + p / self.switch.complete_pps, freed, expected

    def _counted(self, last: np.ndarray, fanin: list[int]) -> np.ndarray:
        """The contributions a block's result sums: per rack, the first ``fanin`` to arrive."""
        out = np.zeros(self.n, bool)
        for rack, k in zip(self.racks, fanin, strict=True):
            ok = rack[np.isfinite(last[rack])]
            out[ok[np.argsort(last[ok], kind="stable")[:k]]] = True
        return out

    def _spine(self, leaf_done: np.ndarray, p: int) -> float:
        racks = np.flatnonzero(np.isfinite(leaf_done))
        arrived = self.spine.stream_up(racks, leaf_done[racks], p) + self.spine_latency
        first = arrived - p / self.spine.pps[racks]
        return self._aggregate(len(self.racks), first, arrived, len(racks), p)

    def _deliver(self, done: float, p: int) -> np.ndarray:
        """The result stream, multicast from the switch to every worker."""
        everyone = np.arange(self.n)
        return self.links.stream_down(everyone, done, p) + self.net.latency_s

    def _deliver_down(self, done: float, p: int) -> np.ndarray:
        racks = np.arange(len(self.racks))
        at_leaf = self.spine.stream_down(racks, done, p) + self.spine_latency
        out = np.empty(self.n)
        for r, rack in enumerate(self.racks):
            out[rack] = self.links.stream_down(rack, at_leaf[r], p) + self.net.latency_s
        return out

    def _at_sender(self, first, last, senders, p: int) -> tuple[float, float]:
        """SA-ATP's overflow: the first contribution to arrive starts the block taken over by
        its sender, which already holds it; the others' reach that host as a helper's data do,
        it sums and sends the result through the switch's multicast. Returns when the result
        is complete at the switch and when the block was handed over."""
        h = senders[np.argmin(first[senders])]
        others = senders[senders != h]
        arrived = [float(last[h])]
        for m in others[np.argsort(last[others])]:
            arrived.append(self.helper_links.receive([h], last[m], p)[0])
        lat = self.net.latency_s
        summed = max(arrived) + lat + len(senders) * p * self.net.payload_bytes \
            / self.net.host_add_Bps
        _, end = self.helper_links.send([h], summed, p)
        return float(end[0]) + lat + p / self.switch.complete_pps, float(first[h])

    def _on_hosts(self, start, senders, helpers: list[int], p: int) -> np.ndarray:
        """The part of a block summed on the helpers' hosts (RoundPlan.host_share,
        docs/protocol.md §7.3): each sender's contributions go to the helpers (each sums 1/h of
        the part), through the switch's pipeline when it has a rate; the helpers' results go
        back through the switch's
        multicast; on the same links as the switch's part, whose window leaves them idle
        between its round trips. Returns when each worker holds the part's results."""
        lat, links, n_s = self.net.latency_s, self.links, len(senders)
        share = p / len(helpers)
        outgoing = np.where(np.isin(senders, helpers), p - share, p)  # a helper keeps its own
        _, up = links.send(senders, start, outgoing)
        arrived = float(up.max()) + lat
        agg = self.switch.pipeline_pps
        if math.isfinite(agg):  # every forwarded contribution passes the switch's pipeline
            arrived = self.pipe_free[0] = max(self.pipe_free[0], float(np.min(start)) + lat) \
                + p * (n_s - 1) / agg
        received = np.maximum(links.receive(helpers, float(np.min(start)) + lat,
                                            share * (n_s - 1)), arrived)
        summed = received + share * n_s * self.net.payload_bytes / self.net.host_add_Bps
        _, sent = links.send(helpers, summed, share)
        done = float(sent.max()) + lat + p / self.switch.complete_pps
        return links.stream_down(np.arange(self.n), done, p) + lat

    def _at_server(self, first, last, senders, p: int) -> float:
        """ATP's fallback: the parameter server receives every contribution, sums them on its
        host and sends the result through the switch's multicast."""
        per = 1 / self.ps.pps[0]
        t = drain(self.ps.down_free[0], first[senders], last[senders] + per,
                  np.full(len(senders), p * per))
        self.ps.down_free[0] = t
        summed = t + len(senders) * p * self.net.payload_bytes / self.net.host_add_Bps
        _, end = self.ps.send([0], summed, p)
        return float(end[0]) + self.net.latency_s

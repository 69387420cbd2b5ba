"""The non-switch baselines: NCCL-style ring allreduce and a sharded parameter server.

Both reduce DDP's buckets one after the other (one communication stream per worker), and every
worker takes part in every call (a worker that contributes nothing adds zeros, as gloo does in
``PolicyDriver.reduce``). ``joined`` is when each worker enters the call; a contributor's bucket
enters when it is ready.

Ring: the bucket is cut into n segments; in 2(n - 1) steps (reduce-scatter, then all-gather)
every worker sends one segment to its right neighbour, once it has received the segment of the
step before from its left one and its uplink is free; a step costs the segment's bytes over the
link, the link latency and a per-message software cost. On equal links and simultaneous starts
that is 2(n - 1) (S / n / bw + latency + step) — bandwidth term 2(n - 1)/n S / bw.

Parameter server: ``servers`` hosts (one per worker by default, as BytePS advises), each with
a link like a worker's, own 1/servers of every bucket: workers push their shards, each server
sums n shards on its host, and every worker pulls the sums back.
"""

from __future__ import annotations

import numpy as np

from sim.aggregation import CallPlan, Outcome
from sim.network import Network, drain


def _entries(ready: np.ndarray, joined: np.ndarray, bucket: int, free: np.ndarray):
    r = np.where(np.isfinite(ready[:, bucket]), ready[:, bucket], joined)
    return np.maximum(r, free)


class RingAllreduce:
    def __init__(self, env, n_workers: int, net: Network, bucket_bytes: list[int]):
        self.env, self.n, self.net, self.buckets = env, n_workers, net, bucket_bytes
        self.up_free = np.zeros(n_workers)
        self.done = np.zeros(n_workers)  # each worker's previous collective

    def run(self, ready: np.ndarray, plan: CallPlan, joined: np.ndarray):
        n, lat = self.n, self.net.latency_s
        for b, nbytes in enumerate(self.buckets):
            entered = _entries(ready, joined, b, self.done)
            yield self.env.timeout(max(0.0, float(entered.min()) - self.env.now))
            if n == 1:
                self.done = entered
                continue
            seg = nbytes / n / self.net.bulk_Bps
            hop = lat + self.net.step_s
            t = np.maximum(entered, np.roll(entered, -1))  # the receiver has joined too
            end, up = np.empty(n), self.up_free
            for _ in range(2 * (n - 1)):
                np.maximum(t, up, out=end)
                end += seg
                up = end.copy()
                t[1:], t[0] = end[:-1] + hop, end[-1] + hop  # what w's left neighbour sent
            self.up_free, self.done = up, t
        return Outcome(self.done.copy())


class ParameterServer:
    def __init__(self, env, n_workers: int, net: Network, bucket_bytes: list[int],
                 servers: int | None = None):
        self.env, self.n, self.net, self.buckets = env, n_workers, net, bucket_bytes
        self.servers = servers or n_workers
        self.up_free = np.zeros(n_workers)
        self.down_free = np.zeros(n_workers)
        self.server_in = 0.0  # servers are symmetric: one stands for all
        self.server_out = 0.0

    def run(self, ready: np.ndarray, plan: CallPlan, joined: np.ndarray):
        lat, bw = self.net.latency_s, self.net.bulk_Bps
        delivered = np.zeros(self.n)
        for b, nbytes in enumerate(self.buckets):
            entered = _entries(ready, joined, b, self.up_free)
            yield self.env.timeout(max(0.0, float(entered.min()) - self.env.now))
            push_end = entered + nbytes / bw + self.net.step_s
            self.up_free = push_end
            shard = nbytes / self.servers / bw
            self.server_in = drain(self.server_in, entered + lat, push_end + lat,
                                   np.full(self.n, shard))
            summed = self.server_in + self.n * nbytes / self.servers / self.net.host_add_Bps
            self.server_out = max(summed, self.server_out) + self.n * shard + self.net.step_s
            delivered = np.maximum(self.server_out + lat, self.down_free + nbytes / bw)
            self.down_free = delivered
        return Outcome(delivered)

"""A data-parallel training job in the simulation, driven by the straggler policy we ship.

Each iteration, the job's process does what ``host_lib.scheduling.policies.driver`` and
``experiments/train.py`` do on every rank, with simulated time in place of the wall clock:

1. wait until the plan can be made (a policy that ``uses_history`` needs every worker's step
   time of the previous iteration), then ask ``policy.plan(iteration, history)``;
2. compute: each worker's share takes the profile's time times its straggler slowdown; its
   DDP buckets are released as backprop proceeds. A policy that ``delays_gradients`` starts a
   gradient when the plan gives a worker a share and delivers it when the plan makes it a
   contributor (Partial-Reduce); one that ``abandons_late_work`` (k-of-n) has a worker skip an
   iteration that ``fanin`` others have already computed; a plan that says ``steal`` (SA-ATP)
   has the shares computed in micro-batches that finished workers take over, each worker ending
   with its reserve in one pass through DDP (host_lib.scheduling.stealing_model);
3. aggregate through the job's switch (or ring, or parameter server) under the plan (a switch
   job's plan may send the calls through the hosts' ring: SA-ATP's, RoundPlan.ring);
4. feed the history (step times, samples, the pass through DDP and how much of it overlapped the
   gradient's communication; communication times one iteration late) and ``policy.observe`` the
   aggregate.

An iteration ends when its update first exists on some worker (the testbed harness's
measure). Host software costs that are neither compute nor network (planning, step-time
exchange, the comm hook, the optimizer step) are :class:`HostCosts`.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field

import numpy as np
import simpy

from host_lib.scheduling.policies.base import COMM_FIELDS, IterationPlan, StepHistory
from host_lib.scheduling.policies.registry import make_policy
from host_lib.scheduling.stealing_model import schedule
from sim.aggregation import CallPlan, SlotPool, SwitchAggregation, SwitchPipeline
from sim.collectives import ParameterServer, RingAllreduce
from sim.gradients import DigitsTraining, SignFlips
from sim.network import Network, SwitchConfig
from sim.stragglers import Stragglers
from sim.workloads import Workload

KOFN_FLIP_RATE = 0.3  # synthetic aggregates: below k-of-n's 0.4 threshold (early training)


@dataclass(frozen=True)
class HostCosts:
    plan_s: float = 0.0  # iteration end -> next compute start (plan, step-time exchange)
    call_s: float = 0.0  # gradient ready -> first packet (publish step time, comm hook)
    finish_s: float = 0.0  # last result -> iteration end (dequantize, optimizer step)
    # More per call when the plan names helpers, flags no straggler and arms takeover (not in
    # the first iteration): the helpers may then take over any chunk that waits past jitter,
    # and on the testbed they do, at a cost.
    helper_s: float = 0.0
    claim_s: float = 0.0  # one store round trip: a work-stealing claim

    def call(self, plan: IterationPlan) -> float:
        armed = plan.helpers and not plan.stragglers and math.isfinite(plan.takeover_after)
        return self.call_s + (self.helper_s if armed else 0.0)


@dataclass
class JobSpec:
    workload: Workload
    n_workers: int
    policy: str = "synchronous"
    comm: str = "switch"  # 'switch', 'ring' or 'ps'
    stragglers: Stragglers = field(default_factory=Stragglers)
    iterations: int = 50
    costs: HostCosts = HostCosts()
    global_batch: int | None = None  # default: the workload's per-worker batch times n
    train_digits: bool = False  # real digits gradients and accuracy (testbed replays)
    eval_every: int = 5
    max_blocks: int = 32
    micro_batches: int = 8  # work stealing: micro-batches per share (experiments/train.py)
    # The testbed's emulated host links (experiments/emulated_link.py): a call ends no sooner
    # than this long (2 (n - 1) / n of it for a ring) after the last contribution it needs
    # started; 0 for a real network, which the communication model carries itself.
    wire_s: float = 0.0
    seed: int = 0

    @property
    def batch(self) -> int:
        return self.global_batch or self.workload.batch_per_worker * self.n_workers


@dataclass
class JobResult:
    ends: list[float] = field(default_factory=list)  # per iteration, first worker's end
    summed: list[float] = field(default_factory=list)  # per iteration, samples / global batch
    staleness: list[float] = field(default_factory=list)  # per iteration, mean (as weighted)
    accuracy: list[tuple[float, float]] = field(default_factory=list)  # (time, test accuracy)
    taken: int = 0
    hosted: int = 0
    fallback: int = 0
    retransmissions: int = 0
    start: float = 0.0

    @property
    def iter_s(self) -> np.ndarray:
        return np.diff(np.asarray(self.ends), prepend=self.start)


class Job:
    def __init__(self, env: simpy.Environment, spec: JobSpec, net: Network,
                 switch: SwitchConfig, pool: SlotPool | None = None, start: float = 0.0,
                 pipeline: SwitchPipeline | None = None):
        self.env, self.spec, self.n = env, spec, spec.n_workers
        self.policy = make_policy(spec.policy, self.n, spec.batch)
        self.history = StepHistory(self.n)
        rng = np.random.default_rng((spec.seed, 1))
        sizes = [b.nbytes for b in spec.workload.buckets]
        self.ring = RingAllreduce(env, self.n, net, sizes)
        if spec.comm == "switch":
            self.comm = SwitchAggregation(env, self.n, net, switch, sizes, rng, pool,
                                          spec.max_blocks, pipeline)
        elif spec.comm == "ring":
            self.comm = self.ring
        elif spec.comm == "ps":
            self.comm = ParameterServer(env, self.n, net, sizes)
        else:
            raise ValueError(f"unknown communication {spec.comm!r}")
        self.frac = np.array([b.ready for b in spec.workload.buckets])
        self.training = DigitsTraining(spec.batch, spec.seed) if spec.train_digits else None
        self.flips = SignFlips(KOFN_FLIP_RATE, seed=spec.seed)
        self.result = JobResult(start=start)
        self.free = np.full(self.n, start)  # when each worker has finished its last iteration
        self.published = np.full(self.n, start)  # when its last step time was published
        self.previous_comm: tuple[np.ndarray, dict] | None = None  # comm_s, COMM_FIELDS
        # a gradient under way (delays_gradients): start, emulated compute time (reported),
        # extra delay, samples, iteration
        self.pending = np.full((5, self.n), np.nan)
        self.pending_grad: dict[int, np.ndarray] = {}

    def process(self):
        """The job's SimPy process: ``spec.iterations`` iterations."""
        for it in range(self.spec.iterations):
            starts = self.free + self.spec.costs.plan_s
            if self.policy.uses_history and it:
                starts = np.maximum(starts, self.published.max() + self.spec.costs.plan_s)
            yield self.env.timeout(max(0.0, float(starts.min()) - self.env.now))
            plan = self.policy.plan(it, self.history)
            step = (self._delayed if self.policy.delays_gradients
                    else self._stealing if plan.steal else self._synchronous)
            yield from step(it, plan, starts)

    # -- the two ways of running a plan --------------------------------------------------------

    def _synchronous(self, it: int, plan: IterationPlan, starts: np.ndarray):
        shares = np.array(plan.shares)
        work = self.spec.workload.profile.a * shares + self.spec.workload.profile.c
        # The trainer measures its compute up to the end of the emulated step; the extra delay
        # comes after it, in the time it counts as communication.
        busy, delay = self.spec.stragglers.durations(it, starts, np.where(shares > 0, work, 0.0))
        dur = busy + delay
        sends = np.array([plan.contributes(w) for w in range(self.n)]) & (shares > 0)
        if self.policy.abandons_late_work and self.spec.comm == "switch":
            skip = self._overtaken(plan, starts, starts + dur, sends)
            dur[skip], sends = 0.0, sends & ~skip
        computed = starts + dur
        call = self.spec.costs.call(plan)
        ready = np.where(sends[:, None], starts[:, None] + dur[:, None] * self.frac + call,
                         np.nan)
        grads = ({w: self.training.gradient(it, plan.shares, w) for w in np.flatnonzero(sends)}
                 if self.training else {})
        outcome = yield from self._call(ready, plan, sends, computed + call)
        samples = np.where(sends, shares, 0)
        self._finish(it, plan, busy, samples, computed, starts + busy, outcome, grads,
                     np.zeros(self.n), busy)

    def _stealing(self, it: int, plan: IterationPlan, starts: np.ndarray):
        """Micro-batches, own and stolen; each worker ends with its reserve in one pass through
        DDP, so its buckets are released as that pass's backprop proceeds (the earlier
        micro-batches' gradients only add to them). Each worker's slowness this iteration is
        its step slowdown and noise (contention taken at the step's start)."""
        slowness, delay = self.spec.stragglers.durations(it, starts, np.ones(self.n))
        profile, spec = self.spec.workload.profile, self.spec
        s = schedule(plan.shares, spec.micro_batches, slowness * profile.c,
                     slowness * profile.a, starts, spec.costs.claim_s, plan.keep_s,
                     plan.per_sample_s, plan.kappa)
        computed = s.ends + delay  # as in _synchronous: the extra delay ends the step
        sends = np.array([plan.contributes(w) for w in range(self.n)])
        call = self.spec.costs.call(plan)
        ready = np.where(sends[:, None],
                         computed[:, None] - s.pass_s[:, None] * (1 - self.frac) + call, np.nan)
        # Every sample is summed once, whoever computed it: the sum is the shares' sum.
        grads = ({w: self.training.gradient(it, plan.shares, w) for w in np.flatnonzero(sends)}
                 if self.training else {})
        outcome = yield from self._call(ready, plan, sends, computed + call)
        self._finish(it, plan, s.ends - starts, np.where(sends, s.samples, 0), computed, s.ends,
                     outcome, grads, np.zeros(self.n), s.pass_s,
                     np.where([bool(d) for d in s.done], slowness * profile.c, np.nan))

    def _delayed(self, it: int, plan: IterationPlan, starts: np.ndarray):
        start, length, late, samples, started = self.pending
        shares = np.array(plan.shares)
        new = (shares > 0) & np.isnan(start)
        work = self.spec.workload.profile.a * shares + self.spec.workload.profile.c
        dur, delay = self.spec.stragglers.durations(it, starts, np.where(new, work, 0.0))
        for w in np.flatnonzero(new):
            start[w], length[w], late[w] = starts[w], dur[w], delay[w]
            samples[w], started[w] = shares[w], it
            if self.training:
                self.pending_grad[w] = self.training.gradient(it, plan.shares, w)
        members = np.array([plan.contributes(w) for w in range(self.n)])
        delivers = np.where(members, np.maximum(starts, start + length + late), starts)
        call = self.spec.costs.call(plan)
        ready = np.where(members[:, None], delivers[:, None] + call, np.nan) \
            * np.ones(len(self.frac))
        grads = {w: self.pending_grad.pop(w) * plan.discount(w) for w in np.flatnonzero(members)
                 if w in self.pending_grad}
        staleness = np.where(members, it - started, 0.0)
        outcome = yield from self._call(ready, plan, members, delivers + call)
        self._finish(it, plan, np.where(members, length, 0.0),
                     np.where(members, samples, 0), delivers, delivers, outcome, grads,
                     staleness, np.zeros(self.n))
        self.pending[:, members] = np.nan

    # -- shared steps -----------------------------------------------------------------------

    def _call(self, ready, plan, sends, joined):
        comm = self.ring if plan.ring else self.comm
        outcome = yield from comm.run(ready, CallPlan.of(plan), joined)
        if self.spec.wire_s:
            outcome.delivered = np.maximum(outcome.delivered, self._link_floor(plan, sends,
                                                                               joined))
        self.result.taken += outcome.taken
        self.result.hosted += outcome.hosted
        self.result.fallback += outcome.fallback
        self.result.retransmissions += outcome.retransmissions
        if outcome.summed is None:
            outcome.summed = sends
        return outcome

    def _link_floor(self, plan, sends, joined) -> np.ndarray:
        """When the emulated links let the call end (experiments/emulated_link.py): the wire
        time after the fan-in-th start among the contributors (the workers' own start for
        those that cannot tell)."""
        started = joined - self.spec.costs.call(plan)
        ring = self.spec.comm == "ring" or plan.ring
        floor = self.spec.wire_s * (2 * (self.n - 1) / self.n if ring else 1.0)
        ordered = np.sort(started[sends])
        needed = plan.fanin or len(ordered)
        anchor = ordered[needed - 1] if 0 < needed <= len(ordered) else started
        return anchor + floor

    def _overtaken(self, plan, starts, computed, sends) -> np.ndarray:
        """k-of-n: a worker skips the iteration when ``fanin`` others published their step
        time of it before it started (they are published when their compute ends)."""
        skip = np.zeros(self.n, bool)
        done: list[float] = []  # compute ends of the workers that started earlier, sorted
        for w in np.argsort(starts, kind="stable"):
            if bisect.bisect_right(done, starts[w]) >= (plan.fanin or self.n):
                skip[w] = True
            elif sends[w]:
                bisect.insort(done, computed[w])
        return skip

    def _finish(self, it, plan, dur, samples, published, compute_end, outcome, grads,
                staleness, pass_s, fixed_s=None) -> None:
        end = outcome.delivered + self.spec.costs.finish_s
        self.free = end
        self.published = published
        # The pass through DDP releases its first bucket after frac.min() of it: what of the
        # gradient's communication it can overlap (the testbed's one bucket, none).
        self.history.add(dur, samples, pass_s=pass_s,
                         lead_s=np.asarray(pass_s) * (1 - self.frac.min()),
                         claim_s=np.full(self.n, self.spec.costs.claim_s if plan.steal
                                         else np.nan), fixed_s=fixed_s)
        if self.previous_comm is not None:
            comm, measured = self.previous_comm
            self.history.add_comm(comm, **measured)
        # As the testbed's trainer measures it: from the end of this worker's compute (or the
        # delivery of its gradient) to the end of its iteration, the call's host costs included.
        self.previous_comm = (end - compute_end, {
            name: getattr(outcome, name) for name in COMM_FIELDS
            if getattr(outcome, name) is not None})
        weights = np.array(plan.weights()) * outcome.summed
        if self.training:
            summed = [grads[w] for w in np.flatnonzero(outcome.summed) if w in grads]
            update = self.training.apply(summed, list(weights))
        else:
            update = self.flips.next()
        self.policy.observe(it, update)
        r = self.result
        r.ends.append(float(end.min()))
        r.summed.append(float((samples * outcome.summed).sum() / self.spec.batch))
        r.staleness.append(float((staleness * weights).sum() / max(weights.sum(), 1e-12)))
        if self.training and (it % self.spec.eval_every == self.spec.eval_every - 1
                              or it == self.spec.iterations - 1):
            r.accuracy.append((r.ends[-1] - r.start, self.training.accuracy()))


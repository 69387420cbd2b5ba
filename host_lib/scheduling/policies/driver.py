"""Runs a straggler policy inside one rank's training loop.

A policy only plans (:mod:`host_lib.scheduling.policies.base`); this module applies its plans,
iteration by iteration, the same way on every rank, so a training script needs no policy logic of
its own:

    driver = PolicyDriver(make_policy("sa-atp", world, B), rank, world, store, sampler,
                          hook_state=state)      # SaAtpHookState, or None for gloo
    for it in range(iterations):
        plan = driver.plan(it)
        mine, round_plan = driver.share(it, plan)   # this rank's samples (may be empty)
        loss = loss_fn(ddp(x[mine]), y[mine], reduction="sum")
        driver.computed(it, compute_s, len(mine))
        loss.backward()                          # the comm hook aggregates with the plan
        driver.observe(it, flat_gradient)

Policies that steal work (``steals_work``, SA-ATP) compute the share, in the iterations whose
plan says ``steal``, in micro-batches from :meth:`PolicyDriver.micro_batches` instead,
accumulating gradients without synchronising, and end with their reserved micro-batches in one
pass through DDP, whose backward runs the comm hook (experiments/train.py). The training loop
reports what the cost models read with the step time: how long its pass through DDP took and
how long of it the first bucket was already on its way (:meth:`PolicyDriver.computed`).

A policy that plans from the history (``uses_history``) plans on one rank, the planner, which
publishes each plan for the others (:mod:`host_lib.scheduling.policies.exchange`). Every rank
asks for the next iteration's plan as soon as it has published its step time, on a thread of its
own: waiting for the peers' step times, planning and fetching the plan then overlap the
gradient's communication instead of delaying the next iteration's compute (SA-ATP's cost model
replays several splits each iteration; on the 2-core testbed, every rank planning between
iterations cost it 6-8 ms of a 47 ms iteration). The planner's policy runs in a process of its
own (:mod:`host_lib.scheduling.policies.planner_process`), so that its computing does not hold
the training process's interpreter lock while the gradient is communicated; once the
iteration's communication is over and the next plan is in, it prepares the plan after it
(:meth:`Policy.prepare`), so that what may lag an iteration costs the gradient's communication
no CPU (the compute is emulated on the testbed: its cores are idle then). Asked for as soon as
the communication was over, the preparation took the planning rank's core while it logged the
iteration and fetched the next plan: 0.5 ms between its iterations where plain aggregation's
took 0.3 (2026-12-06, no straggler). Such a policy's plan reads nothing but the history
(:meth:`Policy.plan`), and it observes no aggregate.

Policies that deliver gradients iterations after they were started (``delays_gradients``,
Partial-Reduce) run without DDP: :meth:`PolicyDriver.hold` keeps the gradient under way and
:meth:`PolicyDriver.deliver` releases it (scaled by the plan's staleness discount) when the plan
makes the rank a contributor; :meth:`PolicyDriver.reduce` aggregates it.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

import numpy as np

from host_lib.engine.rounds import RoundPlan
from host_lib.scheduling.policies.base import IterationPlan, Policy
from host_lib.scheduling.policies.exchange import PLANNER, StepTimeExchange
from host_lib.scheduling.policies.planner_process import PlannerProcess
from host_lib.scheduling.sampling import GlobalBatchSampler, split
from host_lib.scheduling.work_stealing import (
    Expectation,
    MicroBatch,
    WorkStealing,
    slow_prior,
)


class PlanAhead:
    """One iteration's plan, computed on a daemon thread (one still waiting for a peer's step
    time must not keep the process alive); :meth:`result` waits for it and raises what it
    raised."""

    def __init__(self, iteration: int, compute: Callable[[], IterationPlan]):
        self.iteration = iteration
        self._done = threading.Event()
        self._plan: IterationPlan | None = None
        self._error: BaseException | None = None
        threading.Thread(target=self._run, args=(compute,), daemon=True,
                         name=f"plan-{iteration}").start()

    def _run(self, compute: Callable[[], IterationPlan]) -> None:
        try:
            self._plan = compute()
        except BaseException as e:  # noqa: BLE001 - re-raised by result()
            self._error = e
        finally:
            self._done.set()

    def result(self) -> IterationPlan:
        self._done.wait()
        if self._error is not None:
            raise self._error
        return self._plan


@dataclass
class PendingGradient:
    """A gradient under way (delayed-gradient policies): computed on the model of the
    iteration it started in, ready once its compute time has passed."""

    samples: int
    grad: np.ndarray  # flat sum of per-sample gradients
    loss: float
    started: float  # perf_counter
    compute_s: float


class PolicyDriver:
    """One rank's side of a straggler policy: plans, shares, step times and aggregation.

    ``hook_state`` is the :class:`~host_lib.pytorch.ddp_hook.SaAtpHookState` of a switch-aggregated
    job (each iteration's round plan and weights are set on it), or None when gradients go through
    gloo. ``store`` is the torch.distributed store through which ranks share step times and, for
    policies that steal work, claim micro-batches (``micro_batches`` per share).
    """

    def __init__(self, policy: Policy, rank: int, world: int, store,
                 sampler: GlobalBatchSampler, hook_state=None, job: int = 0,
                 micro_batches: int = 8):
        self.policy = policy
        self.stealing = (WorkStealing(store, rank, world, micro_batches, job)
                         if policy.steals_work else None)
        self.rank, self.world = rank, world
        self.sampler = sampler
        self.hook_state = hook_state
        self.exchange = StepTimeExchange(store, rank, world, job)
        if policy.uses_history and type(policy).observe is not Policy.observe:
            raise ValueError(f"policy {policy.name} plans from the history, in a process of "
                             f"its own, and cannot observe the aggregates")
        self.planner = (PlannerProcess(policy) if policy.uses_history and rank == PLANNER
                        else None)
        self.pending: PendingGradient | None = None
        self.comm_s = math.nan  # this rank's communication time of the previous iteration
        self.comm_measured: dict[str, float] = {}  # and its COMM_FIELDS
        self.stole = False  # whether the current iteration's compute went through claims
        self.ahead: PlanAhead | None = None  # the next iteration's plan, under way
        self.prepare_due = False  # the planner prepares once the next plan is in

    @property
    def through_switch(self) -> bool:
        return self.hook_state is not None

    def plan(self, it: int) -> IterationPlan:
        """The iteration's plan, identical on every rank (from every rank's step times of the
        iterations before it, where the policy uses them): the one computed ahead, if any."""
        ahead, self.ahead = self.ahead, None
        plan = ahead.result() if ahead is not None else None  # joined: one collect at a time
        if ahead is None or ahead.iteration != it:
            plan = self._plan(it)
        if self.prepare_due:  # the planner has answered this plan: the next one's turn
            self.planner.prepare()
            self.prepare_due = False
        self.stole = False
        return plan

    def _plan(self, it: int) -> IterationPlan:
        if not self.policy.uses_history:
            return self.policy.plan(it, self.exchange.history)
        if self.rank != PLANNER:
            return self.exchange.shared_plan(it)
        plan = self.planner.plan(it, self.exchange.collect(it - 1))
        self.exchange.share_plan(plan)
        return plan

    def samples(self, it: int, plan: IterationPlan) -> np.ndarray:
        """This rank's share of the iteration's global batch. Shares may add up to less than
        the batch (excluded workers, workers still busy): the first samples are taken."""
        return self._shares(it, plan)[self.rank]

    def _shares(self, it: int, plan: IterationPlan) -> list[np.ndarray]:
        """Every rank's samples of the iteration's global batch under ``plan``."""
        batch = self.sampler.batch(it)[:sum(plan.shares)]
        return split(batch, list(plan.shares))

    def micro_batches(self, it: int, plan: IterationPlan,
                      per_sample_s: Callable[[], float | None] = lambda: None
                      ) -> Iterator[MicroBatch]:
        """The micro-batches this rank computes in ``it`` under a work-stealing plan: its own
        share's from the head, then other shares' from their tails, then its reserve for the
        pass through DDP (each is claimed when the next one is asked for; ``per_sample_s``
        says how fast this rank computes in this iteration so far, None before it has
        computed anything, when the plan's last measurement stands in for a straggler's:
        :func:`~host_lib.scheduling.work_stealing.slow_prior`)."""
        self.stole = True
        prior = slow_prior(plan.per_sample_s, self.rank)

        def speed() -> float | None:
            measured = per_sample_s()
            return prior if measured is None else measured

        return self.stealing.iteration(it, self._shares(it, plan), plan.keep_s, speed,
                                       Expectation(plan.per_sample_s, plan.kappa))

    def share(self, it: int, plan: IterationPlan) -> tuple[np.ndarray, RoundPlan]:
        """The samples this rank computes in a synchronous (DDP) step and how it takes part in
        the iteration's allreduce (set on the hook state too). No samples, and no
        contribution, when the switch no longer wants this rank's contribution."""
        round_plan = plan.round_plan(self.rank)
        mine = self.samples(it, plan)
        if self.overtaken(it, plan):
            mine, round_plan = mine[:0], replace(round_plan, contribute=False)
        if self.hook_state is not None:
            self.hook_state.plan, self.hook_state.weights = round_plan, plan.weights()
        return mine, round_plan

    def overtaken(self, it: int, plan: IterationPlan) -> bool:
        """k-of-n: the switch completes each chunk with the first ``fanin`` contributions; if
        that many ranks have already computed this iteration, ours would come too late."""
        return (self.through_switch and self.policy.abandons_late_work
                and plan.contributes(self.rank)
                and self.exchange.finished(it) >= (plan.fanin or self.world))

    def computed(self, it: int, compute_s: float, samples: int, pass_s: float = math.nan,
                 lead_s: float = math.nan, fixed_s: float = math.nan) -> None:
        """Publish this rank's compute time of ``it`` (as soon as its compute ends, before its
        gradient is communicated), with how long its pass through DDP took (``pass_s``), for
        how long of it its first bucket was already on its way (``lead_s``) and, when it
        computed micro-batches, the step's fixed cost as they showed it (``fixed_s``)."""
        claims = self.stealing.claim_s if self.stole else []
        measured = {"pass_s": pass_s, "lead_s": lead_s, "fixed_s": fixed_s,
                    "claim_s": float(np.mean(claims)) if claims else math.nan}
        self.exchange.publish(it, compute_s, samples, self.comm_s, measured,
                              self.comm_measured)
        if self.policy.uses_history:
            self.ahead = PlanAhead(it + 1, lambda: self._plan(it + 1))

    def communicated(self, comm_s: float, **measured: float) -> None:
        """This rank's communication time of the iteration that just ended, and its other
        COMM_FIELDS (published with the next iteration's step time); the planner's policy
        prepares the plan after the next one once :meth:`plan` has the next one, while the
        workers compute (:meth:`Policy.prepare`)."""
        self.comm_s, self.comm_measured = comm_s, measured
        self.prepare_due = self.planner is not None

    def close(self) -> None:
        """End the planner process (it also ends with this process)."""
        if self.planner is not None:
            self.planner.close()

    def observe(self, it: int, update: np.ndarray) -> None:
        """The aggregate of ``it`` (the same on every rank), before the next plan."""
        self.policy.observe(it, update)

    # -- delayed-gradient policies ------------------------------------------------------------

    def hold(self, gradient: PendingGradient) -> None:
        """Keep a gradient started this iteration until a plan delivers it."""
        self.pending = gradient

    def deliver(self, plan: IterationPlan) -> PendingGradient | None:
        """The gradient to contribute this iteration, scaled by the rank's discount, or None
        when the plan has the rank sit the iteration out."""
        if not plan.contributes(self.rank):
            return None
        pending, self.pending = self.pending, None
        return replace(pending, grad=pending.grad * plan.discount(self.rank))

    def reduce(self, values: np.ndarray, plan: IterationPlan, gloo_all_reduce=None
               ) -> np.ndarray:
        """The aggregate of the contributors' gradients, divided by their weights: through the
        switch, or with ``gloo_all_reduce`` (an in-place sum over every rank; a rank that sits
        out adds zeros)."""
        if self.hook_state is not None:
            result, stats = self.hook_state.communicator.allreduce_async(
                values, weights=plan.weights(), tag="gradient",
                plan=plan.round_plan(self.rank)).result()
            self.hook_state.record(stats)
            return result
        gloo_all_reduce(values)
        return values / sum(plan.weights())

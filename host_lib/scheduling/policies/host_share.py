"""How much of each call SA-ATP's helpers sum on their hosts instead of the switch.

A job's window of aggregators bounds what the switch can sum: W chunks per round trip. Where
that is less than the links carry (a job given few aggregators, docs/simulation.md's memory
study), the rest of the links' capacity is idle while the switch paces the call. SA-ATP's
helpers (the leading workers) then sum part of each call on their hosts, as ATP's parameter
server sums what its switch has no aggregator for (docs/protocol.md §7.3): the first
``host_share`` of a call's chunks start taken over by their helpers, the rest go through the
switch, both at once.

The share is set from what the workers measure (COMM_FIELDS): per call, the time until the last
result of the switch's part (``switch_s``) and of the hosts' part (``host_s``). Each part's pace
(its share over its time) says how much each would sum in the same time, and the share moves
halfway to the one that ends both parts together. That assumes the parts do not slow each other
down, as they do where the hosts' traffic passes the same bottleneck (a software switch on the
workers' own cores). So a share is *tried*, and judged by what the iteration waits for its
communication (the time the last worker to finish computing spends after it; median of the last
TRIAL) against the same with no share: the median of the last BASELINE iterations without one,
the first SETTLE left out. Those wait longer than the job does once its planner has measured the
workers (the first iteration warms up, the next ones run the first plans), and a share judged
against them was kept, and steered up, where it cost (the simulator's contention scenario: 39.4
ms an iteration, against 38.2 with the first four left out). It falls back to 0 as soon as it is
no better than none, or once it has TRIAL measurements and saves less than GAIN, or under FLOOR
(not worth the helpers' work). From 0, nothing measures the hosts' pace, so a share of PROBE is
tried now and then: after FIRST_WAIT iterations, then twice as long after each trial that fell
back to 0, at most LONGEST_WAIT, and from FIRST_WAIT again once a share passed its trial. A
probe's measurement arrives with the plan after next; after a trial that fell back, the
iteration between goes without a share rather than pay for a second one whose verdict is likely
the same (on the testbed's slot-budget scenario a probe of 1/32 cost about 7 % of an iteration,
and each trial held it for two). The first probe, and one after a trial that passed, keep the
share meanwhile: where the share pays now and then (the simulator's intermittent contention),
waiting for each verdict without it cost more than the probes it saved (0.901x BOA's iteration
against 0.891x; a probe of 1/64, 0.900x). A switch that sums everything in time thus costs a
probe rarely; one that cannot keeps a share from the first trial on.

**The ring.** Hosts summing through the switch carry more than a ring allreduce does: each
worker receives the contributions to its part and then every result, the helpers' too, where a
ring's reduce-scatter and all-gather move 2 (n - 1) / n of the gradient each way. So where the
window is so small that the hosts carry nearly everything (the simulator's 16 aggregators per
job: the best share, 0.95, took 131 ms an iteration where the ring took 122), the ring is
faster. Once a share has passed its trial and settled (within SETTLED of the share that ends
both parts together: the ring is judged against the share at its best) at RING_FROM or more,
the ring is tried in its place (``ring``: the calls go through the job's fallback group,
gloo's ring, and not the switch), judged by the same wait against the share's, and kept once
TRIAL measurements save GAIN; dropped at its first measurement no better than the share's, and
tried again twice as late. While the ring is kept,
the share is tried for one iteration now and then (RECHECK_WAIT iterations after the ring was
kept, then as late again each time it loses, at most LONGEST_WAIT), steered by what each such
iteration measures, so that a switch that gets its aggregators back gets the calls back.
"""

from __future__ import annotations

import numpy as np

from host_lib.scheduling.policies.base import StepHistory

PROBE = 1 / 32
FLOOR = 1 / 64
CEILING = 0.95  # the switch keeps some: its part costs the links least
GAIN = 0.02
TRIAL = 4  # iterations a share is measured before it is judged
FIRST_WAIT, LONGEST_WAIT = 2, 64
BASELINE = 5  # the calls' time with no share is the median of this many measurements
MIN_BASELINE = 3  # and no share is tried before there are this many
SETTLE = 4  # iterations left out of it: the planner's first, while it measures the workers
SETTLED = 0.05  # the ring is tried against a share no further than this from its target
# The ring is tried only where the settled share is at least this: where the hosts carry most
# of the call (the simulator's 16 and 64 aggregators per job settle at 0.95 and 0.75; held
# there, their iterations take 131 and 122 ms, through the ring 101.5). Below it a ring that
# looks faster was noise: with the default aggregators and transient stragglers
# (tests/test_cost_model.py), a share near 0.5 was kept on a 1.5 ms wait against 1.6, the
# ring looked better by as little, and its iterations were 20 % longer.
RING_FROM = 0.75
RECHECK_WAIT = 8  # iterations on a kept ring before the share is tried again (then 16, ... 64)


class HostShare:
    def __init__(self):
        self.used: list[tuple[float, bool]] = []  # (share, ring) of each iteration planned
        self.share = 0.0
        self.settled = False  # the share is within SETTLED of where its parts end together
        self.wait = FIRST_WAIT
        self.probe_at = 0  # the first iteration that may try a share
        self.probed_at = -1  # the probe waiting for its verdict without a share, if any
        self.alone_s: list[float] = []  # what iterations with no share waited, recent ones
        self.shared_s: list[float] = []  # and those of the share being tried, since it started
        self.ring = False  # the calls go through the ring (trial or kept)
        self.ring_kept = False
        self.ring_s: list[float] = []  # what the ring's iterations waited, since it started
        self.ring_wait = FIRST_WAIT
        self.ring_at = 0  # the first iteration that may try the ring (or, kept, the share)

    def plan(self, iteration: int, history: StepHistory) -> tuple[float, bool]:
        """(the share, whether the calls go through the ring) for ``iteration``; ``history``
        has the communication of the iterations before it, one iteration late."""
        measured = len(history.comm_s) - 1  # the latest iteration whose parts are known
        if 0 <= measured < len(self.used):
            # what of its communication the iteration waited for: the last worker to finish
            # computing waits for nobody
            tail_s = history.comm_overhead(1)
            used, ring = self.used[measured]
            if ring and self.ring and tail_s:
                self.ring_s.append(tail_s)
                self._judge_ring(iteration)
            elif self.ring_kept and used and tail_s:  # the share tried again beside the ring
                self._steer(used, history)  # the next time, the share that ends both together
                self._recheck_share(iteration, tail_s)
            elif not used and not ring and measured >= SETTLE and tail_s:
                self.alone_s = self.alone_s[-(BASELINE - 1):] + [tail_s]
            elif used and not ring and self.share and not self.ring and tail_s:  # on trial
                self.shared_s.append(tail_s)
                self._steer(used, history)
                self._judge(iteration)
        if (not self.share and len(self.alone_s) >= MIN_BASELINE
                and iteration >= self.probe_at):
            self.share, self.shared_s = PROBE, []
            # after a trial that fell back, a probe waits for its verdict without a share
            self.probed_at = iteration if self.wait > FIRST_WAIT else -1
        if (self.share >= RING_FROM and self.settled and not self.ring
                and len(self.shared_s) >= TRIAL and iteration >= self.ring_at):
            self.ring, self.ring_s = True, []  # a share that passed its trial: the ring?
        ring = self.ring and not (self.ring_kept and iteration == self.ring_at)
        share = self.share
        waiting = self.probed_at >= 0 and iteration == self.probed_at + 1
        if share and not self.shared_s and waiting:
            share = 0.0  # the probe's verdict is not in yet: wait for it without a share
        self.used.append((share, ring))
        return share, ring

    def _steer(self, used: float, history: StepHistory) -> None:
        """Halfway to the share that ends both parts together, at their measured paces."""
        switch_s = _median(history.series("switch_s", 1))
        host_s = _median(history.series("host_s", 1))
        if switch_s and host_s:
            switch_pace, host_pace = (1 - used) / switch_s, used / host_s
            target = min(CEILING, host_pace / (switch_pace + host_pace))
            self.share = (used + target) / 2
            self.settled = abs(target - used) < SETTLED

    def _judge(self, iteration: int) -> None:
        """Keep the share while it saves GAIN, judged once it has TRIAL measurements; drop it
        at once where its measurements so far are no better than none (a share steered up
        during its trial costs most where it does not pay), and try the next twice as late."""
        shared, alone = np.median(self.shared_s[-TRIAL:]), np.median(self.alone_s)
        tried = len(self.shared_s) >= TRIAL
        if self.share < FLOOR or shared >= alone or (tried and shared >= (1 - GAIN) * alone):
            self.share, self.shared_s = 0.0, []
            self.probe_at = iteration + self.wait
            self.wait = min(2 * self.wait, LONGEST_WAIT)
        elif tried:
            self.wait = FIRST_WAIT  # a share that passed its trial: try eagerly again later

    def _judge_ring(self, iteration: int) -> None:
        """The ring against the share it replaces: kept once TRIAL measurements save GAIN,
        dropped at its first measurement no better (and tried twice as late); kept, dropped
        once its recent measurements are no better than the share's."""
        ring, shared = np.median(self.ring_s[-TRIAL:]), np.median(self.shared_s[-TRIAL:])
        tried = len(self.ring_s) >= TRIAL
        if self.ring_kept:
            if ring >= shared:
                self.ring = self.ring_kept = False
                self.ring_wait = FIRST_WAIT
                self.ring_at = iteration + self.ring_wait
        elif ring >= shared or (tried and ring >= (1 - GAIN) * shared):
            self.ring = False
            self.ring_at = iteration + self.ring_wait
            self.ring_wait = min(2 * self.ring_wait, LONGEST_WAIT)
        elif tried:
            self.ring_kept, self.ring_wait = True, RECHECK_WAIT
            self.ring_at = iteration + self.ring_wait  # when the share is tried again

    def _recheck_share(self, iteration: int, tail_s: float) -> None:
        """The share's one iteration beside the kept ring: the calls go back to the switch
        where it waited GAIN less than the ring; otherwise it is tried again twice as late."""
        self.shared_s.append(tail_s)
        if tail_s < (1 - GAIN) * np.median(self.ring_s[-TRIAL:]):
            self.ring = self.ring_kept = False
            self.shared_s = [tail_s] * TRIAL  # judged as a share that passed its trial
            self.ring_wait = FIRST_WAIT
            self.ring_at = iteration + self.ring_wait
        else:
            self.ring_wait = min(2 * self.ring_wait, LONGEST_WAIT)
            self.ring_at = iteration + self.ring_wait


def _median(values) -> float:
    values = np.asarray(values, np.float64)
    finite = values[np.isfinite(values) & (values > 0)]
    return float(np.median(finite)) if finite.size else 0.0

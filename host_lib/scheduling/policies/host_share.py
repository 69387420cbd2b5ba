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
switch that sums everything in time thus costs a trial rarely; one that cannot keeps a share
from the first trial on.
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


class HostShare:
    def __init__(self):
        self.used: list[float] = []  # the share each iteration planned so far used
        self.share = 0.0
        self.wait = FIRST_WAIT
        self.probe_at = 0  # the first iteration that may try a share
        self.alone_s: list[float] = []  # what iterations with no share waited, recent ones
        self.shared_s: list[float] = []  # and those of the share being tried, since it started

    def plan(self, iteration: int, history: StepHistory) -> float:
        """The share for ``iteration``; ``history`` has the communication of the iterations
        before it, one iteration late."""
        measured = len(history.comm_s) - 1  # the latest iteration whose parts are known
        if 0 <= measured < len(self.used):
            # what of its communication the iteration waited for: the last worker to finish
            # computing waits for nobody
            tail_s = history.comm_overhead(1)
            used = self.used[measured]
            if not used and measured >= SETTLE and tail_s:
                self.alone_s = self.alone_s[-(BASELINE - 1):] + [tail_s]
            elif used and self.share and tail_s:  # an iteration of the share being tried
                self.shared_s.append(tail_s)
                self._steer(used, history)
                self._judge(iteration)
        if (not self.share and len(self.alone_s) >= MIN_BASELINE
                and iteration >= self.probe_at):
            self.share, self.shared_s = PROBE, []
        self.used.append(self.share)
        return self.share

    def _steer(self, used: float, history: StepHistory) -> None:
        """Halfway to the share that ends both parts together, at their measured paces."""
        switch_s = _median(history.series("switch_s", 1))
        host_s = _median(history.series("host_s", 1))
        if switch_s and host_s:
            switch_pace, host_pace = (1 - used) / switch_s, used / host_s
            target = host_pace / (switch_pace + host_pace)
            self.share = min(CEILING, (used + target) / 2)

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


def _median(values) -> float:
    values = np.asarray(values, np.float64)
    finite = values[np.isfinite(values) & (values > 0)]
    return float(np.median(finite)) if finite.size else 0.0

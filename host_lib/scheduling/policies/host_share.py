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
workers' own cores): so the iteration must also wait less for its communication (the time the
last worker to finish computing spends after it) than it did with no share (the median of the
last BASELINE such iterations), by GAIN at least, or the share drops to 0; as it does under
FLOOR, not worth the
helpers' work. From 0, nothing measures the hosts' pace, so the share is *probed*: set to PROBE
for an iteration, now and then (after 2 iterations, then twice as long after each probe that fell
back to 0, at most LONGEST_WAIT, and from 2 again once a share lasted LASTING iterations), so a
switch that sums everything in time costs an iteration's probe rarely; one that cannot keeps a
share from the first probe on.
"""

from __future__ import annotations

import numpy as np

from host_lib.scheduling.policies.base import StepHistory

PROBE = 1 / 32
FLOOR = 1 / 64
CEILING = 0.95  # the switch keeps some: its part costs the links least
GAIN = 0.02
FIRST_WAIT, LONGEST_WAIT = 2, 32
LASTING = 8  # iterations a share must last for the probes' wait to start over
BASELINE = 5  # the calls' time with no share is the median of this many measurements


class HostShare:
    def __init__(self):
        self.used: list[float] = []  # the share each iteration planned so far used
        self.share = 0.0
        self.wait = FIRST_WAIT
        self.probe_at = 1  # the first iteration that may probe (the first has no history)
        self.alone_s: list[float] = []  # the calls' time with no share, recent measurements

    def plan(self, iteration: int, history: StepHistory) -> float:
        """The share for ``iteration``; ``history`` has the communication of the iterations
        before it, one iteration late."""
        measured = len(history.comm_s) - 1  # the latest iteration whose parts are known
        # what of its communication the iteration waited for: the last worker to finish
        # computing waits for nobody
        tail_s = float(np.nanmin(history.comm_s[-1])) if history.comm_s else 0.0
        if 0 <= measured < len(self.used) and not self.used[measured] and tail_s:
            self.alone_s = self.alone_s[-(BASELINE - 1):] + [tail_s]
        if 0 <= measured < len(self.used) and self.used[measured] > 0:
            share = self.used[measured]
            switch_s = _median(history.series("switch_s", 1))
            host_s = _median(history.series("host_s", 1))
            if switch_s and host_s:
                switch_pace, host_pace = (1 - share) / switch_s, share / host_s
                target = host_pace / (switch_pace + host_pace)
                self.share = min(CEILING, (share + target) / 2)
                slower = bool(self.alone_s) and tail_s > (1 - GAIN) * np.median(self.alone_s)
                if self.share < FLOOR or slower:  # no faster: back to the switch alone
                    self.share = 0.0
                    self.probe_at = iteration + self.wait
                    self.wait = min(2 * self.wait, LONGEST_WAIT)
                elif self.used[-LASTING:].count(0.0) == 0 and len(self.used) >= LASTING:
                    self.wait = FIRST_WAIT  # a share that lasts: probe eagerly again later
        elif not self.share and iteration >= self.probe_at:
            self.share = PROBE
            self.probe_at = iteration + 1  # measured before it probes again
        elif self.share == PROBE and self.used and self.used[-1] == PROBE:
            self.share = 0.0  # a probe lasts one iteration; its measurement decides
        self.used.append(self.share)
        return self.share


def _median(values) -> float:
    values = np.asarray(values, np.float64)
    finite = values[np.isfinite(values) & (values > 0)]
    return float(np.median(finite)) if finite.size else 0.0

"""How much of each call SA-ATP's helpers sum on their hosts
(host_lib/scheduling/policies/host_share.py), on synthetic measurements, and what that gives
a job whose switch has too few aggregators for its links, in the simulator."""

from __future__ import annotations

import numpy as np
import pytest
import simpy

from experiments.stragglers import SlowdownSchedule
from host_lib.scheduling.policies.base import StepHistory
from host_lib.scheduling.policies.host_share import (
    FIRST_WAIT,
    MIN_BASELINE,
    PROBE,
    SETTLE,
    TRIAL,
    HostShare,
)
from sim.job import HostCosts, Job, JobSpec
from sim.network import Network, SwitchConfig
from sim.stragglers import Stragglers
from sim.workloads import vgg16

N = 4


def drive(switch_chunk_s: float, host_chunk_s: float, iterations: int,
          shared: bool = False, slow_until: int = 0, slow_s: float = 0.0) -> list[float]:
    """The shares planned when a call's switch part takes ``switch_chunk_s`` per unit of
    share and its host part ``host_chunk_s``, each in proportion to its share: side by side
    (the call takes the longer), or ``shared`` one bottleneck (the call takes both, and each
    part ends with it); the calls of iterations before ``slow_until`` take ``slow_s`` longer
    (a job settling in)."""
    control, history, shares = HostShare(), StepHistory(N), []
    for it in range(iterations):
        share = control.plan(it, history)
        shares.append(share)
        history.add(np.full(N, 0.03), np.full(N, 10))
        if it:  # the exchange delivers an iteration's communication with the next one's record
            used = shares[it - 1]
            parts = [(1 - used) * switch_chunk_s, used * host_chunk_s]
            call = (sum(parts) if shared else max(parts)) + (slow_s if it - 1 < slow_until else 0)
            if shared:
                parts = [call, call if used else 0.0]
            history.add_comm(np.full(N, call), busy_s=np.full(N, call),
                             switch_s=np.full(N, parts[0]), host_s=np.full(N, parts[1]))
    return shares


def test_the_share_ends_both_parts_together():
    """A switch four times slower per chunk than the hosts: once the calls without a share are
    measured (the first SETTLE, settling in, left out), a share is tried, passes, and settles where
    both parts take as long, 4/5."""
    shares = drive(switch_chunk_s=0.4, host_chunk_s=0.1, iterations=40)
    first = next(it for it, s in enumerate(shares) if s)
    assert shares[first] == PROBE and first == SETTLE + MIN_BASELINE + 1  # measured a turn late
    assert all(shares[first:])
    assert shares[-1] == pytest.approx(0.8, abs=0.01)


def test_hosts_that_share_the_switchs_bottleneck_get_nothing_but_rarer_probes():
    """Where the hosts' part goes through the bottleneck the switch's part does (the testbed's
    software switch), each chunk moved to the hosts costs more than it saves: the share falls
    back to 0 after each trial, and the trials come 2, 4, 8, ... iterations apart."""
    shares = drive(switch_chunk_s=0.1, host_chunk_s=0.3, iterations=80, shared=True)
    used = [it for it, s in enumerate(shares) if s]
    starts = [it for it in used if it - 1 not in used]
    ends = [it for it in used if it + 1 not in used]
    assert all(shares[it] == PROBE for it in starts)
    # a trial lasts until a measurement shows it no better, and one more iteration whose
    # measurement is on its way
    assert all(end - start < TRIAL + 1 for start, end in zip(starts, ends, strict=True))
    waits = [b - a - 1 for a, b in zip(ends, starts[1:], strict=False)]
    assert waits[0] == FIRST_WAIT and all(b == 2 * a for a, b in zip(waits, waits[1:],
                                                                      strict=False))
    assert len(starts) <= 6


def test_a_share_is_judged_against_the_job_settled_not_against_its_first_iterations():
    """The first calls without a share wait longer (the job settling in: half as long again)
    than the rest; a share that costs (one bottleneck) still looks better than they did. It
    must be dropped at its first measurement all the same, every trial."""
    shares = drive(switch_chunk_s=0.1, host_chunk_s=0.3, iterations=80, shared=True,
                   slow_until=SETTLE, slow_s=0.05)
    used = [it for it, s in enumerate(shares) if s]
    starts = [it for it in used if it - 1 not in used]
    ends = [it for it in used if it + 1 not in used]
    assert starts and all(shares[it] == PROBE for it in used)
    assert all(end - start < TRIAL + 1 for start, end in zip(starts, ends, strict=True))


def job(policy: str, slots: int) -> tuple[Job, simpy.Environment]:
    env = simpy.Environment()
    spec = JobSpec(vgg16(), 8, policy, stragglers=Stragglers(SlowdownSchedule(static={5: 3.0})),
                   iterations=30, costs=HostCosts(plan_s=2e-4, claim_s=5e-5))
    return Job(env, spec, Network(), SwitchConfig(slots=slots)), env


@pytest.mark.parametrize("slots", [16, 512])
def test_helpers_sum_on_hosts_what_a_small_window_cannot(slots):
    """16 aggregators pace VGG-16's gradient at a tenth of the links: SA-ATP's helpers take most
    of it on their hosts and its iterations are several times shorter than without them
    (sa-atp-no-takeover); with 512, the switch keeps it all after a probe or two."""
    results = {}
    for policy in ("sa-atp", "sa-atp-no-takeover"):
        j, env = job(policy, slots)
        env.process(j.process())
        env.run()
        results[policy] = j.result
    late = slice(20, None)
    with_helpers = results["sa-atp"].iter_s[late].mean()
    without = results["sa-atp-no-takeover"].iter_s[late].mean()
    if slots == 16:
        assert results["sa-atp"].hosted > 0 and with_helpers < 0.3 * without
    else:
        assert with_helpers <= 1.01 * without

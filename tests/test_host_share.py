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
    CEILING,
    FIRST_WAIT,
    MIN_BASELINE,
    PROBE,
    RECHECK_WAIT,
    SETTLE,
    SETTLED,
    TRIAL,
    HostShare,
)
from sim.job import HostCosts, Job, JobSpec
from sim.network import Network, SwitchConfig
from sim.stragglers import Stragglers
from sim.workloads import vgg16

N = 4


def drive(switch_chunk_s: float, host_chunk_s: float, iterations: int,
          shared: bool = False, slow_until: int = 0, slow_s: float = 0.0,
          ring_s: float = 1.0, switch_from: tuple[int, float] | None = None
          ) -> tuple[list[float], list[bool]]:
    """The shares (and whether the ring) planned when a call's switch part takes
    ``switch_chunk_s`` per unit of share and its host part ``host_chunk_s``, each in proportion
    to its share: side by side (the call takes the longer), or ``shared`` one bottleneck (the
    call takes both, and each part ends with it); the calls of iterations before ``slow_until``
    take ``slow_s`` longer (a job settling in); a call through the ring takes ``ring_s``;
    ``switch_from`` (iteration, seconds): the switch's part takes that long per unit from then
    on (it got its aggregators back)."""
    control, history, shares, rings = HostShare(), StepHistory(N), [], []
    for it in range(iterations):
        share, ring = control.plan(it, history)
        shares.append(share)
        rings.append(ring)
        history.add(np.full(N, 0.03), np.full(N, 10))
        if it:  # the exchange delivers an iteration's communication with the next one's record
            used, prev = shares[it - 1], it - 1
            per_chunk = (switch_from[1] if switch_from and prev >= switch_from[0]
                         else switch_chunk_s)
            parts = [(1 - used) * per_chunk, used * host_chunk_s]
            call = (sum(parts) if shared else max(parts)) + (slow_s if prev < slow_until else 0)
            if rings[prev]:
                call, parts = ring_s, [0.0, 0.0]
            elif shared:
                parts = [call, call if used else 0.0]
            history.add_comm(np.full(N, call), busy_s=np.full(N, call),
                             switch_s=np.full(N, parts[0]), host_s=np.full(N, parts[1]))
    return shares, rings


def test_the_share_ends_both_parts_together():
    """A switch four times slower per chunk than the hosts: once the calls without a share are
    measured (the first SETTLE, settling in, left out), a share is tried, passes, and settles where
    both parts take as long, 4/5."""
    shares, rings = drive(switch_chunk_s=0.4, host_chunk_s=0.1, iterations=40)
    first = next(it for it, s in enumerate(shares) if s)
    assert shares[first] == PROBE and first == SETTLE + MIN_BASELINE + 1  # measured a turn late
    assert all(shares[first:])  # the first probe keeps its share while its verdict comes
    assert shares[-1] == pytest.approx(0.8, abs=0.01)


def test_hosts_that_share_the_switchs_bottleneck_get_nothing_but_rarer_probes():
    """Where the hosts' part goes through the bottleneck the switch's part does (the testbed's
    software switch), each chunk moved to the hosts costs more than it saves: the share falls
    back to 0 at each verdict, which comes with the plan after next: the first trial keeps the
    share meanwhile (two iterations), the later ones, after a trial that fell back, do not (one);
    the trials come 2, 4, 8, ... iterations after their verdicts."""
    shares, rings = drive(switch_chunk_s=0.1, host_chunk_s=0.3, iterations=80, shared=True)
    used = [it for it, s in enumerate(shares) if s]
    assert all(shares[it] == PROBE for it in used)
    starts = [it for it in used if it - 1 not in used]
    assert used[:2] == [starts[0], starts[0] + 1] and used[2:] == starts[1:]
    waits = [b - a - 2 for a, b in zip(starts, starts[1:], strict=False)]
    assert waits[0] == FIRST_WAIT and all(b == 2 * a for a, b in zip(waits, waits[1:],
                                                                      strict=False))
    assert len(starts) <= 6


def test_a_share_is_judged_against_the_job_settled_not_against_its_first_iterations():
    """The first calls without a share wait longer (the job settling in: half as long again)
    than the rest; a share that costs (one bottleneck) still looks better than they did. It
    must be dropped at its first measurement all the same, every trial."""
    shares, rings = drive(switch_chunk_s=0.1, host_chunk_s=0.3, iterations=80, shared=True,
                   slow_until=SETTLE, slow_s=0.05)
    used = [it for it, s in enumerate(shares) if s]
    assert used and all(shares[it] == PROBE for it in used)
    assert len(used) == len([it for it in used if it - 1 not in used]) + 1  # first: two


def runs(flags: list[bool], value: bool = True) -> list[tuple[int, int]]:
    """(start, length) of each run of ``value`` in ``flags``."""
    out, start = [], None
    for it, flag in enumerate([*flags, not value]):
        if flag == value and start is None:
            start = it
        elif flag != value and start is not None:
            out.append((start, it - start))
            start = None
    return out


# A switch forty times slower per chunk than the hosts: the best share, CEILING, leaves its part
# 0.05 x 4 = 0.2 s a call; the ring takes 0.15
SCARCE = {"switch_chunk_s": 4.0, "host_chunk_s": 0.1, "iterations": 120}


def test_a_ring_faster_than_the_best_share_takes_the_calls():
    """Once the share has passed its trial and settled where both parts end together, the ring
    is tried, kept, and the share tried again alone, RECHECK_WAIT iterations on and then twice as
    late each time it loses (its measurement arrives one iteration late)."""
    shares, rings = drive(**SCARCE, ring_s=0.15)
    first_share = next(it for it, s in enumerate(shares) if s)
    first_ring = rings.index(True)
    assert first_ring >= first_share + TRIAL
    assert abs(shares[first_ring] - CEILING) < SETTLED
    rechecks = runs(rings[first_ring:], False)
    assert all(length == 1 for _, length in rechecks)  # one iteration of the share at a time
    starts = [first_ring + start for start, _ in rechecks]
    assert starts[0] >= first_ring + TRIAL + RECHECK_WAIT
    gaps = [b - a - 2 for a, b in zip(starts, starts[1:], strict=False)]
    assert len(gaps) >= 2 and all(b == 2 * a for a, b in zip(gaps, gaps[1:], strict=False))
    assert gaps[0] == 2 * RECHECK_WAIT


def test_a_ring_slower_than_the_share_is_dropped_at_its_first_measurement():
    """Ring 0.5 s, the settled share 0.2: each trial of the ring lasts until its first
    measurement (two iterations), the next comes twice as late, and the share stays settled."""
    shares, rings = drive(**SCARCE, ring_s=0.5)
    trials = runs(rings)
    assert len(trials) >= 4 and all(length == 2 for _, length in trials)
    waits = [b[0] - a[0] - a[1] for a, b in zip(trials, trials[1:], strict=False)]
    assert waits[0] == FIRST_WAIT and all(b == 2 * a for a, b in zip(waits, waits[1:],
                                                                      strict=False))
    assert shares[-1] == pytest.approx(CEILING, abs=0.01)


def test_the_calls_go_back_to_the_switch_when_it_gets_its_aggregators_back():
    """The ring kept, the switch becomes as fast as the hosts at iteration 40: the next time the
    share is tried it waits less than the ring, the calls go back to the switch for good (bar
    ring trials, each dropped at its first measurement), and the share settles at 1/2."""
    shares, rings = drive(**SCARCE, ring_s=0.15, switch_from=(40, 0.1))
    assert sum(rings[25:40]) >= 14  # kept (one iteration of the share tried again)
    back = next(it for it in range(40, len(rings)) if not rings[it] and not rings[it + 1])
    assert all(length == 2 for _, length in runs(rings[back:]))
    assert shares[-1] == pytest.approx(0.5, abs=0.01)


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


def test_a_window_too_small_for_any_share_to_beat_the_ring_takes_the_ring():
    """16 aggregators: SA-ATP's settled iterations, once its calls go through the hosts' ring,
    are no slower than plain ring allreduce's in the same job (its re-split helps the
    straggler there too)."""
    results = {}
    for policy, comm in (("sa-atp", "switch"), ("synchronous", "ring")):
        env = simpy.Environment()
        spec = JobSpec(vgg16(), 8, policy, comm=comm,
                       stragglers=Stragglers(SlowdownSchedule(static={5: 3.0})), iterations=40,
                       costs=HostCosts(plan_s=2e-4, claim_s=5e-5))
        j = Job(env, spec, Network(), SwitchConfig(slots=16))
        env.process(j.process())
        env.run()
        results[policy] = j
    late = slice(20, None)
    assert sum(ring for _, ring in results["sa-atp"].policy.hosts.used[late]) >= 15
    assert (results["sa-atp"].result.iter_s[late].mean()
            <= results["synchronous"].result.iter_s[late].mean())

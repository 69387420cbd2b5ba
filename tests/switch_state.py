"""A running local cluster's switch, read by the end-to-end tests to make their preconditions
happen rather than hope for them: a test holds a worker back (an event it waits on) until the
switch shows the state the test needs (lanes held, chunks taken over, contributions in), then
lets it go. The reads go through the cluster's own controller (management requests and
counters), so they wait on what the switch holds, never on how long something usually takes."""

from __future__ import annotations

import time
from collections.abc import Callable

from control_plane.contracts import AggregatorState
from protocol import constants as P


def wait_for(condition: Callable[[], object], what: str, timeout: float = 300.0,
             poll: float = 0.02):
    """``condition()``'s first true value, asked every ``poll`` s; fails the test after
    ``timeout`` s (a bound on a hang, not a guess at how long it takes)."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, f"never happened within {timeout} s: {what}"
        time.sleep(poll)
    return value


def aggregators(cluster, job_id: int) -> list[AggregatorState]:
    """Every aggregator of a job's window, as the switch holds it now."""
    controller = cluster.controller
    job = controller.jobs[job_id]
    return controller.aggregator.read(controller.conn, job.aggregator_range())


def held_pool_lanes(cluster, job_id: int) -> int:
    """How many of the shared pool's lane sets a chunk of job ``job_id`` holds now."""
    controller = cluster.controller
    own = controller.jobs[job_id].aggregator_range()
    pool = controller.aggregator.read(controller.conn, controller.desired.allocator.pool_range())
    return sum(1 for s in pool if s.holder & P.POOL_HELD and s.held_by in own)


def counted(cluster, job_id: int, direction: str, op: str) -> int:
    """Packets of ``op`` the switch counted for the job at ``direction`` (ingress/egress)."""
    return cluster.controller.counters(job_id)[direction]["packets"].get(op, 0)

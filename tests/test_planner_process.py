"""The planner process (host_lib.scheduling.policies.planner_process): its plans are the
policy's own, asked in order in this process; what the policy raises comes back with its
traceback; and the process never outlives its parent."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from host_lib.scheduling.policies.base import StepHistory
from host_lib.scheduling.policies.boa import Boa
from host_lib.scheduling.policies.planner_process import PlannerProcess
from host_lib.scheduling.policies.registry import make_policy

N, BATCH = 4, 256


@pytest.mark.parametrize("name", ["sa-atp", "boa"])
def test_its_plans_are_those_the_policy_makes_here(name):
    """A straggler that turns up at iteration 10: SA-ATP's cost model, replays and detector
    all run in the child, on the history it was sent row by row. The child prepares each next
    plan when asked, as the driver asks once an iteration's communication is over; the policy
    here is never asked, and prepares in the plan itself, to the same plans."""
    remote, local = PlannerProcess(make_policy(name, N, BATCH)), make_policy(name, N, BATCH)
    history, rng = StepHistory(N), np.random.default_rng(0)
    try:
        for it in range(40):
            plan = remote.plan(it, history)
            remote.prepare()
            assert plan == local.plan(it, history), it
            slow = np.where((np.arange(N) == 1) & (it >= 10), 3.0, 1.0)
            shares = np.asarray(plan.shares)
            history.add(slow * 5e-4 * (shares + 8) * rng.normal(1, 0.02, N), shares)
            history.add_comm(np.full(N, 0.01), busy_s=np.full(N, 0.01),
                             switch_s=np.full(N, 0.01), host_s=np.zeros(N))
        assert plan.shares[1] < BATCH // N  # it re-split: the history reached the child
    finally:
        remote.close()
    assert remote.process.returncode == 0


def test_what_the_policy_raises_comes_back_with_its_traceback():
    planner = PlannerProcess(Boa(2, 64, min_share=40))  # no split of 64 gives both 40
    history = StepHistory(2)
    assert planner.plan(0, history).shares == (32, 32)
    history.add([0.1, 0.2], [32, 32])
    with pytest.raises(RuntimeError, match="(?s)in min_max_split.*no split of 64 samples"):
        planner.plan(1, history)
    planner.close()


class FailsToPrepare(Boa):
    """BOA, but for a preparation that raises."""

    def prepare(self, history: StepHistory) -> None:
        raise ValueError(f"cannot prepare on {len(history)} iterations")


def test_what_a_preparation_raises_comes_back_with_the_next_plan():
    planner = PlannerProcess(FailsToPrepare(2, 64))
    history = StepHistory(2)
    assert planner.plan(0, history).shares == (32, 32)
    history.add([0.1, 0.2], [32, 32])
    planner.prepare()
    with pytest.raises(RuntimeError, match="(?s)in prepare.*cannot prepare on 0 iterations"):
        planner.plan(1, history)
    planner.close()
    assert planner.process.returncode == 0


PARENT = textwrap.dedent("""
    import sys, time
    from host_lib.scheduling.policies.planner_process import PlannerProcess
    from host_lib.scheduling.policies.registry import make_policy
    planner = PlannerProcess(make_policy("sa-atp", 4, 256))
    print(planner.process.pid, flush=True)
    time.sleep(600)
""")


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM])
def test_the_planner_ends_with_its_parent(how):
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    try:
        child = int(parent.stdout.readline())
        assert _alive(child)
        parent.send_signal(how)
        parent.wait(10)
        deadline = time.monotonic() + 10
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(child)
    finally:
        parent.kill()
        parent.wait()


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, ended and not yet reaped by init, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False

"""The TNA reference model against the v1model program on the embedded target, beyond the
tests/p4 traces (which run on the tna-twin target too): one trace through every op the hosts
and the controller use, and the proof that the comparison fails when the two programs differ,
with a RegisterAction altered on purpose. The twin needs p4src/compiled to be protocol v2."""

import numpy as np
import pytest

from protocol import constants as P
from tests.p4.packets import Job, assert_result_to_all, job_spec, wrapping_sum
from tests.p4.test_p4_pool import BORROWED, admit_pool_jobs
from tests.tofino.model import register_actions
from tests.tofino.model.register_actions import M32
from tests.tofino.schedules import random_schedule
from tests.tofino.targets import (
    REQUIRES_V2,
    ModelTarget,
    TwinController,
    TwinTarget,
    compiled_is_v2,
    make_tna_controller,
)
from tests.tofino.twin import Disagreement

PORTS = tuple(range(1, 9))
twin_only = pytest.mark.skipif(not compiled_is_v2(), reason=REQUIRES_V2)


def with_action(register: str, name: str, fn) -> dict:
    actions = register_actions.registry()
    actions[register] = {**actions[register], name: fn}
    return actions


def high_words_not_added(cell, phv):
    """lanes_00_add as it must not be: the high word (lane 32) keeps its old value."""
    lo = (cell[0] + phv.lanes[0]) & M32
    return (lo, cell[1]), lo


def completes_one_early(cell, phv):
    """progress_add completing a chunk one contribution before its fan-in."""
    new, old = register_actions.progress_add(cell, phv)
    if old >= register_actions.AGGREGATING_BASE and old + 1 >= phv.limit_add:
        return (old + register_actions.ADD_AND_COMPLETE) & M32, old
    return new, old


ALTERED = pytest.mark.parametrize("register, name, fn", [
    ("lanes_00", "lanes_00_add", high_words_not_added),
    ("progress", "progress_add", completes_one_early),
], ids=["lanes_add", "progress_add"])


def every_op(target, controller) -> None:
    """A job of three through data, duplicates, probes, a takeover with helper traffic, a
    stored helper result, copies, stale and older-run packets, a scale mismatch, a membership
    change, management reads and clears, and traffic of no job."""
    rng = np.random.default_rng(15)
    job = Job(job_spec(3, 3, slots=2), target)
    placed = controller.admit(job.spec)
    rows = rng.integers(-(2**28), 2**28, (3, P.LANES), dtype=np.int32)
    job.data(0, 0, rows[0], exp=0x8001, run=7)
    job.data(0, 0, rows[0], run=7, flags=P.Flag.RETX)              # PENDING
    job.data(2, 0, rows[2], run=7, flags=P.Flag.PROBE)             # PENDING
    job.data(1, 0, rows[1], exp=0x8003, run=7)
    job.send(1, P.Op.TAKEOVER, 0, run=7)                            # PARTIAL to all
    job.data(2, 0, rows[2], run=7)                                  # BOUNCE(TAKEN)
    job.send(2, P.Op.HELPER_DATA, 0, rows[2], reason=1, run=7)      # forwarded to 1
    total = wrapping_sum(rows)
    outs = job.send(1, P.Op.HELPER_RESULT, 0, total, bitmap=0b111, count=3, exp=0x8003, run=7,
                    scale=0x8000)
    assert_result_to_all(job, outs, 0, total, 0b111, 3, flags=P.Flag.HELPER)
    job.data(0, 0, rows[0], run=7)                                  # COPY
    for w in range(3):
        outs = job.data(w, 1, rows[w], run=7)
    assert_result_to_all(job, outs, 1, total, 0b111, 3)
    job.data(0, 2, rows[0], run=7)                                  # set 1 of slot 0
    job.data(1, 2, rows[1], run=7, scale=0x8005)                    # SCALE_MISMATCH
    job.data(2, 0, rows[2], run=7)                                  # STALE (chunk 2 is newer)
    job.data(2, 2, rows[2], run=3)                                  # OLD_RUN: the slot has 7
    controller.set_membership(3, fan_in=2, expected=0b011)
    job.data(2, 3, rows[2], run=7)                                  # NOT_EXPECTED
    outs = job.data(1, 2, rows[1], run=7)                           # completes under fan-in 2
    assert_result_to_all(job, outs, 2, wrapping_sum(rows[:2]), 0b011, 2)
    job.data(0, 4, rows[0], run=9)                                  # a newer run evicts
    controller.read_slot(3, 0)
    controller.aggregator.clear(controller.conn, [2 * placed.slot_base])
    Job(job_spec(99, 2), target).data(0, 0, rows[0])                # UNKNOWN_JOB
    controller.remove(3)


@twin_only
def test_a_trace_of_every_op_agrees():
    target = TwinTarget(PORTS)
    controller = TwinController(target, PORTS).connect()
    try:
        controller.reconcile()
        every_op(target, controller)
        target.check_everything()
    finally:
        controller.close()
        target.close()


@twin_only
@ALTERED
def test_an_altered_register_action_is_a_disagreement(register, name, fn):
    target = TwinTarget(PORTS, actions=with_action(register, name, fn))
    controller = TwinController(target, PORTS).connect()
    try:
        controller.reconcile()
        with pytest.raises(Disagreement):
            every_op(target, controller)
    finally:
        controller.close()
        target.close()


@ALTERED
def test_an_altered_register_action_fails_the_packet_tests(register, name, fn):
    """Without the v1model program at hand, the tests/p4 checks (numpy sums) catch it too."""
    target = ModelTarget(PORTS, actions=with_action(register, name, fn))
    controller = make_tna_controller(target, PORTS)
    with pytest.raises(AssertionError):
        every_op(target, controller)


def test_the_unaltered_model_passes_the_trace():
    target = ModelTarget(PORTS)
    every_op(target, make_tna_controller(target, PORTS))


@twin_only
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("pool", [False, True], ids=["own", "pool"])
def test_random_schedules_agree_and_give_the_sums(pool, seed):
    """Random contributions, retransmissions, takeovers and helper results (tests/tofino/
    schedules.py) for one job of three, or two jobs sharing pool lanes: both programs give the
    same answers, every sum is numpy's, and the registers agree at the end."""
    target = TwinTarget(PORTS)
    controller = TwinController(target, PORTS).connect()
    try:
        controller.reconcile()
        if pool:
            jobs, first = list(admit_pool_jobs(target, controller)), BORROWED
        else:
            jobs, first = [Job(job_spec(5, 3, slots=2), target)], 0
            controller.admit(jobs[0].spec)
        assert random_schedule(jobs, first, 4, seed, steps=100) > 0
        target.check_everything()
    finally:
        controller.close()
        target.close()

"""On a switch, passes 2 and 3 of a packet are apart: an answer that carries a stored sum reads
its low words in pass 2 and its high words in pass 3, after a loop port, and other packets go
through the pipeline in between. The model holds such a packet on its loop port
(``TnaModel.process(hold=True)``, then ``release``) so that another chunk can claim the
aggregator, or another job the pool lanes, and store into them meanwhile. What leaves must
never be two sums mixed: a copy becomes a STALE bounce, a result or a partial is dropped
(docs/tofino.md, 'Passes'). The reference is numpy's sum of the contributions."""

from __future__ import annotations

import numpy as np
import pytest

from protocol import constants as P
from protocol.codec import decode_frame
from tests.p4.packets import PORTS, Job, assert_result_to_all, job_spec, random_lanes
from tests.p4.test_p4_pool import BORROWED, admit_pool_jobs, held_by, pool_holder
from tests.tofino.schedules import random_schedule
from tests.tofino.targets import ModelTarget

SLOTS = 2
NEXT = 2 * SLOTS   # the next chunk that sums in the same aggregator (same slot, same set)


class HoldingTarget(ModelTarget):
    """The model, holding what goes round a loop port while ``hold`` is set, and what is
    resubmitted while ``hold_resubmit`` is."""

    hold = hold_resubmit = False

    def send(self, port: int, frame: bytes) -> list[tuple[int, bytes]]:
        return self.model.process(port, frame, hold=self.hold, hold_resubmit=self.hold_resubmit)

    def held(self, job: Job, w: int, op: int, chunk: int, lanes=None, **fields) -> None:
        """Send, and keep the answer on its loop port."""
        self.hold = True
        try:
            assert job.send(w, op, chunk, lanes, **fields) == []
        finally:
            self.hold = False
        assert len(self.model.looped) == 1

    def release(self, index: int = 0) -> list[tuple[int, object]]:
        return [(port, decode_frame(out)) for port, out in self.model.release(index)]

    def release_pass_2(self, index: int) -> list[tuple[int, object]]:
        """Pass 2 of the ``index``-th held resubmission; its answer may be held on the loop."""
        outs = self.model.release_resubmitted(index, hold=self.hold)
        return [(port, decode_frame(out)) for port, out in outs]


@pytest.fixture
def target():
    return HoldingTarget(PORTS)


@pytest.fixture
def controller(target):
    ctl = target.controller()
    ctl.reconcile()
    return ctl


@pytest.fixture
def job(target, controller):
    j = Job(job_spec(5, 2, slots=SLOTS), target)
    controller.admit(j.spec)
    return j


@pytest.fixture
def pool_jobs(target, controller):
    return admit_pool_jobs(target, controller)


def test_a_held_copy_released_at_once_is_the_sum(target, job):
    """The hold itself changes nothing: the copy that waited is the chunk's sum."""
    rows = random_lanes(np.random.default_rng(1), 2)
    job.data(0, 0, rows[0])
    assert_result_to_all(job, job.data(1, 0, rows[1]), 0, rows[0] + rows[1], 0b11, 2)
    target.held(job, 0, P.Op.DATA, 0, rows[0], scale=0x8000)
    [(port, copy)] = target.release()
    assert port == job.spec.worker(0).port and copy.header.flags & P.Flag.COPY
    np.testing.assert_array_equal(copy.lanes, rows[0] + rows[1])


def test_a_copy_whose_aggregator_takes_the_next_chunk_meanwhile_is_a_stale_bounce(target, job):
    rows = random_lanes(np.random.default_rng(2), 3)
    job.data(0, 0, rows[0])
    assert_result_to_all(job, job.data(1, 0, rows[1]), 0, rows[0] + rows[1], 0b11, 2)
    target.held(job, 0, P.Op.DATA, 0, rows[0], scale=0x8000)   # a lost result: a copy
    assert job.data(1, NEXT, rows[2]) == []   # the next chunk claims and stores its lanes
    [(port, bounce)] = target.release()
    assert port == job.spec.worker(0).port
    assert (bounce.header.op, bounce.header.reason) == (P.Op.BOUNCE, P.Bounce.STALE)
    # The next chunk's sum is whole.
    assert_result_to_all(job, job.data(0, NEXT, rows[0]), NEXT, rows[2] + rows[0], 0b11, 2)


def test_a_repeated_partial_whose_aggregator_moves_on_meanwhile_is_dropped(target, job):
    rows = random_lanes(np.random.default_rng(3), 2)
    job.data(0, 0, rows[0])
    outs = job.send(1, P.Op.TAKEOVER, 0)   # the partial: worker 0's contribution
    assert len(outs) == 2 and all(f.header.op == P.Op.PARTIAL for _, f in outs)
    target.held(job, 1, P.Op.TAKEOVER, 0)   # lost, asked again
    assert target.release()[0][1].header.op == P.Op.PARTIAL   # at once: the partial again
    target.held(job, 1, P.Op.TAKEOVER, 0)
    assert job.data(0, NEXT, rows[1]) == []
    assert target.release() == []


def test_a_repeated_partial_over_which_the_helpers_result_is_stored_meanwhile_is_dropped(
        target, job):
    """The helper's result replaces the partial sum in the lanes (the chunk becomes COMPLETE):
    the partial must not leave with the result's high words."""
    rows = random_lanes(np.random.default_rng(8), 2)
    job.data(0, 0, rows[0])
    assert len(job.send(1, P.Op.TAKEOVER, 0)) == 2
    target.held(job, 1, P.Op.TAKEOVER, 0)
    total = rows[0] + rows[1]
    outs = job.send(1, P.Op.HELPER_RESULT, 0, total, bitmap=0b11, count=2, exp=0, scale=0x8000)
    assert_result_to_all(job, outs, 0, total, 0b11, 2, flags=P.Flag.HELPER)
    assert target.release() == []
    [(_, copy)] = job.data(0, 0, rows[0])   # the stored result
    np.testing.assert_array_equal(copy.lanes, total)


def test_a_copy_whose_pool_lanes_another_job_took_meanwhile_is_a_stale_bounce(
        target, controller, pool_jobs):
    """Job 12 claims the pool lanes job 11's result left released, completes its own chunk in
    them and releases them, all while job 11's copy is on the loop."""
    a, b = pool_jobs
    rows = random_lanes(np.random.default_rng(4), 4)
    a.data(0, BORROWED, rows[0])
    assert_result_to_all(a, a.data(1, BORROWED, rows[1]), BORROWED, rows[0] + rows[1], 0b11, 2)
    target.held(a, 0, P.Op.DATA, BORROWED, rows[0], scale=0x8000)
    b.data(0, BORROWED, rows[2])
    assert_result_to_all(b, b.data(1, BORROWED, rows[3]), BORROWED, rows[2] + rows[3], 0b11, 2)
    [(port, bounce)] = target.release()
    assert port == a.spec.worker(0).port
    assert (bounce.header.op, bounce.header.reason) == (P.Op.BOUNCE, P.Bounce.STALE)
    assert pool_holder(controller) == held_by(controller, 12, held=False)


def test_a_repeated_partial_does_not_take_back_pool_lanes_another_job_used_meanwhile(
        target, controller, pool_jobs):
    """The release in pass 3 touches only lanes still this aggregator's: job 11's repeated
    partial must neither answer with job 12's sum nor make job 12's lanes its own again."""
    a, b = pool_jobs
    rows = random_lanes(np.random.default_rng(5), 3)
    a.data(0, BORROWED, rows[0])
    assert len(a.send(1, P.Op.TAKEOVER, BORROWED)) == 2   # the partial; the lanes released
    target.held(a, 1, P.Op.TAKEOVER, BORROWED)
    b.data(0, BORROWED, rows[1])
    assert_result_to_all(b, b.data(1, BORROWED, rows[2]), BORROWED, rows[1] + rows[2], 0b11, 2)
    assert target.release() == []
    assert pool_holder(controller) == held_by(controller, 12, held=False)
    [(_, copy)] = b.data(0, BORROWED, rows[1])   # job 12's result is still in its lanes
    np.testing.assert_array_equal(copy.lanes, rows[1] + rows[2])


def test_a_result_on_the_loop_leaves_its_aggregators_next_chunk_holding_the_pool_lanes(
        target, controller, pool_jobs):
    """Chunk c's result is on the loop when chunk c + 2·window of the same aggregator claims
    its pool lanes: c's pass 3 must neither answer nor release them (which would let job 12
    store over job 11's sum under way)."""
    a, b = pool_jobs
    later = BORROWED + 2 * a.spec.window   # the same aggregator, so the same pool lanes
    rows = random_lanes(np.random.default_rng(7), 5)
    a.data(0, BORROWED, rows[0])
    target.held(a, 1, P.Op.DATA, BORROWED, rows[1], scale=0x8000)   # completes: loops
    assert a.data(0, later, rows[2]) == []
    assert target.release() == []
    assert pool_holder(controller) == held_by(controller, 11, chunk=later)   # held, still
    outs = b.data(0, later, rows[3])   # busy: job 12's chunk starts taken over by its sender
    assert {f.header.op for _, f in outs} == {P.Op.PARTIAL}
    assert_result_to_all(a, a.data(1, later, rows[4]), later, rows[2] + rows[4], 0b11, 2)


@pytest.mark.parametrize("seed", range(30))
def test_random_schedules_with_held_answers_never_mix_sums(target, job, seed):
    assert random_schedule([job], 0, NEXT, seed, holder=target) > 0


@pytest.mark.parametrize("seed", range(30))
def test_random_schedules_of_two_jobs_in_a_pool_never_mix_sums(target, pool_jobs, seed):
    assert random_schedule(list(pool_jobs), BORROWED, NEXT, seed, holder=target) > 0


@pytest.mark.parametrize("seed", range(4))
def test_random_schedules_with_passes_2_held_too_never_mix_sums(target, job, seed):
    """The schedules above with a third of the passes 2 held as well, released in any order
    or lost: takeovers' partials, helpers' results and copies stay exact."""
    assert random_schedule([job], 0, NEXT, seed, holder=target, passes_2=True) > 0


@pytest.mark.parametrize("seed", range(2))
def test_random_schedules_of_two_jobs_in_a_pool_with_passes_2_held(target, pool_jobs, seed):
    assert random_schedule(list(pool_jobs), BORROWED, NEXT, seed, holder=target,
                           passes_2=True) > 0


# -- passes 2 of one job's chunk held while another job takes its pool lanes (found on review)


def test_a_late_copy_pass_2_leaves_the_pool_lanes_another_job_claimed_alone(
        target, controller, pool_jobs):
    """Job 11's chunk completes and releases its pool lanes; a worker's retransmission (a copy
    that brings its lanes again) is held before pass 2 while job 12 claims the lanes and sums
    its chunk, whose result waits on the loop. The late pass 2 finds another aggregation in
    the gate: it reads, stores nothing, and nothing leaves for it; job 12's result keeps its
    own high words, and its worker that lost it gets a copy."""
    a, b = pool_jobs
    rows = random_lanes(np.random.default_rng(4), 4)
    a.data(0, BORROWED, rows[0])
    assert_result_to_all(a, a.data(1, BORROWED, rows[1]), BORROWED, rows[0] + rows[1], 0b11, 2)
    target.hold_resubmit = True
    try:
        assert a.data(0, BORROWED, rows[0]) == []
    finally:
        target.hold_resubmit = False
    assert b.data(0, BORROWED, rows[2]) == []
    target.held(b, 1, P.Op.DATA, BORROWED, rows[3], scale=0x8000)
    assert target.release_pass_2(0) == []
    assert_result_to_all(b, target.release(), BORROWED, rows[2] + rows[3], 0b11, 2)
    [(_, copy)] = b.data(1, BORROWED, rows[3])
    assert copy.header.flags & P.Flag.COPY
    np.testing.assert_array_equal(copy.lanes, rows[2] + rows[3])


def test_a_late_helper_result_pass_2_stores_nothing_in_pool_lanes_another_job_claimed(
        target, controller, pool_jobs):
    """Job 11's chunk is taken over (its partial releases the pool lanes), and the helper's
    result, stored by pass 1, is held before pass 2 while job 12 claims the lanes and sums
    its chunk. The late pass 2 still multicasts the helper's result, but stores nothing over
    job 12's lanes, whose result keeps its own high words."""
    a, b = pool_jobs
    rows = random_lanes(np.random.default_rng(6), 4)
    a.data(0, BORROWED, rows[0])
    assert len(a.send(1, P.Op.TAKEOVER, BORROWED)) == 2   # the partial; the lanes released
    total = rows[0] + rows[1]
    target.hold_resubmit = True
    try:
        assert a.send(1, P.Op.HELPER_RESULT, BORROWED, total, bitmap=0b11, count=2, exp=0,
                      scale=0x8000) == []
    finally:
        target.hold_resubmit = False
    assert b.data(0, BORROWED, rows[2]) == []
    target.held(b, 1, P.Op.DATA, BORROWED, rows[3], scale=0x8000)
    assert_result_to_all(a, target.release_pass_2(0), BORROWED, total, 0b11, 2,
                         flags=P.Flag.HELPER)
    assert_result_to_all(b, target.release(), BORROWED, rows[2] + rows[3], 0b11, 2)

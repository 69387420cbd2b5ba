"""The shared pool (docs/protocol.md §4.6): borrowed slots sum in lanes that jobs claim per
chunk and release on completion or takeover; on every target, the TNA program's included."""

import numpy as np
import pytest

from protocol import constants as P
from tests.p4.packets import Job, assert_result_to_all, job_spec, random_lanes

POOL = 4
BORROWED = 2  # chunk 2 of a job with 2 slots of its own and 2 borrowed: pool slot 0, set 0


def admit_pool_jobs(target, controller) -> tuple[Job, Job]:
    """Jobs 11 and 12, two workers each, 2 slots of their own and 2 borrowed from a pool of 4."""
    controller.resize_pool(POOL)
    a, b = (Job(job_spec(i, 2, slots=2, borrow=2), target) for i in (11, 12))
    controller.admit(a.spec)
    controller.admit(b.spec)
    return a, b


@pytest.fixture
def jobs(target, controller):
    return admit_pool_jobs(target, controller)


def pool_holder(controller, chunk: int = BORROWED) -> int:
    """The lane holder of the pool aggregator that chunk ``chunk`` of either job sums in."""
    pool = controller.desired.allocator.pool_range()
    index = pool[0] + 2 * (chunk % 4 - 2) + (chunk // 4) % 2
    return controller.aggregator.read(controller.conn, [index])[0].holder


def held_by(controller, job_id: int, chunk: int = BORROWED, held: bool = True) -> int:
    """The holder value of job ``job_id``'s aggregator of ``chunk``."""
    job = controller.jobs[job_id]
    index = 2 * (job.slot_base + chunk % 4) + (chunk // 4) % 2
    return (index + 1) | (P.POOL_HELD if held else 0)


def test_a_borrowed_slot_sums_in_the_pool_and_its_lanes_go_to_the_next_claim(jobs, controller):
    a, b = jobs
    rows = random_lanes(np.random.default_rng(1), 4)
    a.data(0, BORROWED, rows[0])
    assert pool_holder(controller) == held_by(controller, 11)
    outs = a.data(1, BORROWED, rows[1])
    assert_result_to_all(a, outs, BORROWED, rows[0] + rows[1], 0b11, 2)
    assert pool_holder(controller) == held_by(controller, 11, held=False)  # released
    [(_, copy)] = a.data(0, BORROWED, rows[0])  # a lost result: still in the lanes
    assert copy.header.flags & P.Flag.COPY
    np.testing.assert_array_equal(copy.lanes, rows[0] + rows[1])

    b.data(0, BORROWED, rows[2])  # job 12 claims the released lanes
    assert pool_holder(controller) == held_by(controller, 12)
    outs = b.data(1, BORROWED, rows[3])
    assert_result_to_all(b, outs, BORROWED, rows[2] + rows[3], 0b11, 2)
    # Job 11's result is gone from the switch; its state says the chunk completed.
    [(port, bounce)] = a.data(0, BORROWED, rows[0])
    assert port == 1 and bounce.header.op == P.Op.BOUNCE
    assert bounce.header.reason == P.Bounce.STALE
    assert controller.read_slot(11, BORROWED)[0].state == P.SlotState.COMPLETE


def test_a_chunk_that_finds_the_lanes_held_is_summed_by_a_helper(jobs, controller):
    """Job 11's chunk holds the lanes for its straggler: job 12's chunk starts taken over by
    the worker whose contribution found them busy, and never touches the lanes."""
    a, b = jobs
    rows = random_lanes(np.random.default_rng(2), 4)
    a.data(0, BORROWED, rows[0])  # job 11's worker 1 straggles
    outs = b.data(1, BORROWED, rows[3])
    assert sorted(port for port, _ in outs) == [1, 2]  # to every worker of job 12
    for _, f in outs:
        assert f.header.op == P.Op.PARTIAL and f.header.worker == 1 and f.header.job == 12
        assert f.header.bitmap == 0b10 and f.header.count == 1
        np.testing.assert_array_equal(f.lanes, rows[3])  # its own contribution
    state = controller.read_slot(12, BORROWED)[0]
    assert state.state == P.SlotState.TAKEN and state.helper == 1 and state.bitmap == 0b10
    [(port, to_helper)] = b.data(0, BORROWED, rows[2])  # the other worker goes to the helper
    assert port == 1 and to_helper.header.reason == P.Bounce.TAKEN
    assert to_helper.header.worker == 1
    assert pool_holder(controller) == held_by(controller, 11)  # job 11's sum untouched
    own = random_lanes(np.random.default_rng(3), 2)  # job 12's own slots are unaffected
    b.data(0, 0, own[0])
    assert_result_to_all(b, b.data(1, 0, own[1]), 0, own[0] + own[1], 0b11, 2)

    assert_result_to_all(a, a.data(1, BORROWED, rows[1]), BORROWED, rows[0] + rows[1], 0b11, 2)
    total = rows[2] + rows[3]  # the helper's sum: its chunk never had the lanes, so it is
    outs = b.send(1, P.Op.HELPER_RESULT, BORROWED, total, bitmap=0b11, count=2, exp=0,
                  scale=0x8000)  # only multicast, even with the lanes free now
    assert_result_to_all(b, outs, BORROWED, total, 0b11, 2, flags=P.Flag.HELPER)
    assert controller.read_slot(12, BORROWED)[0].state == P.SlotState.TAKEN
    assert pool_holder(controller) == held_by(controller, 11, held=False)
    [(_, to_helper)] = b.data(0, BORROWED, rows[2])  # a late worker goes to the helper
    assert to_helper.header.reason == P.Bounce.TAKEN and to_helper.header.worker == 1


def test_takeover_gives_the_lanes_back_and_a_helper_result_is_stored_only_in_its_own(jobs,
                                                                                    controller):
    a, b = jobs
    rows = random_lanes(np.random.default_rng(4), 4)
    a.data(0, BORROWED, rows[0])
    outs = a.send(0, P.Op.TAKEOVER, BORROWED)  # worker 0 helps its straggler, worker 1
    assert {f.header.op for _, f in outs} == {P.Op.PARTIAL}
    for _, f in outs:
        np.testing.assert_array_equal(f.lanes, rows[0])
    assert pool_holder(controller) == held_by(controller, 11, held=False)

    assert b.data(0, BORROWED, rows[2]) == []  # job 12 has the lanes at once
    [(_, to_helper)] = a.data(1, BORROWED, rows[1])  # the straggler is sent to its helper
    assert to_helper.header.reason == P.Bounce.TAKEN and to_helper.header.worker == 0
    [(_, gone)] = a.send(0, P.Op.TAKEOVER, BORROWED)  # the partial is no longer there
    assert gone.header.reason == P.Bounce.NOT_HELD

    total = rows[0] + rows[1]
    result = dict(bitmap=0b11, count=2, exp=0, scale=0x8000)
    outs = a.send(0, P.Op.HELPER_RESULT, BORROWED, total, **result)
    assert_result_to_all(a, outs, BORROWED, total, 0b11, 2, flags=P.Flag.HELPER)
    assert controller.read_slot(11, BORROWED)[0].state == P.SlotState.TAKEN  # not stored
    assert_result_to_all(b, b.data(1, BORROWED, rows[3]), BORROWED, rows[2] + rows[3], 0b11, 2)
    # Job 12's result is stored in the pool lanes, not overwritten by job 11's.
    [(_, copy)] = b.data(0, BORROWED, rows[2])
    np.testing.assert_array_equal(copy.lanes, rows[2] + rows[3])

    a.send(0, P.Op.HELPER_RESULT, BORROWED, total, **result)  # free, but no longer its lanes
    assert controller.read_slot(11, BORROWED)[0].state == P.SlotState.TAKEN
    assert pool_holder(controller) == held_by(controller, 12, held=False)
    [(_, copy)] = b.data(0, BORROWED, rows[2])  # job 12's result is still there
    np.testing.assert_array_equal(copy.lanes, rows[2] + rows[3])


def test_a_helper_result_is_stored_in_lanes_still_its_own(jobs, controller):
    """Taken over and released, with no other claim since: the helper's result goes into the
    lanes, which hold it (released) for the late workers' copies."""
    a, _ = jobs
    rows = random_lanes(np.random.default_rng(6), 2)
    a.data(0, BORROWED, rows[0])
    a.send(0, P.Op.TAKEOVER, BORROWED)
    total = rows[0] + rows[1]
    outs = a.send(0, P.Op.HELPER_RESULT, BORROWED, total, bitmap=0b11, count=2, exp=0,
                  scale=0x8000)
    assert_result_to_all(a, outs, BORROWED, total, 0b11, 2, flags=P.Flag.HELPER)
    assert controller.read_slot(11, BORROWED)[0].state == P.SlotState.COMPLETE
    assert pool_holder(controller) == held_by(controller, 11, held=False)
    [(_, copy)] = a.data(1, BORROWED, rows[1])
    assert copy.header.flags & P.Flag.COPY
    np.testing.assert_array_equal(copy.lanes, total)


def test_removing_a_job_frees_the_pool_lanes_its_chunks_hold(jobs, controller):
    a, b = jobs
    rows = random_lanes(np.random.default_rng(5), 3)
    a.data(0, BORROWED, rows[0])  # held, and its worker 1 never comes
    controller.remove(11)
    assert pool_holder(controller) == 0
    assert b.data(0, BORROWED, rows[1]) == []
    assert_result_to_all(b, b.data(1, BORROWED, rows[2]), BORROWED, rows[1] + rows[2], 0b11, 2)

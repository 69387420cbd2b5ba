"""The switch side of slot takeover (docs/protocol.md §4.3, §4.4)."""

import numpy as np

from protocol import constants as P
from tests.p4.packets import SWITCH, Job, assert_result_to_all, job_spec


def partial_setup(target, controller):
    """Job of 3; workers 0 and 1 have contributed to chunk 0, worker 2 (the straggler) not."""
    job = Job(job_spec(5, 3), target)
    controller.admit(job.spec)
    a, b, c = (np.full(P.LANES, v, np.int32) * np.arange(1, 65, dtype=np.int32)
               for v in (1, 10, 100))
    job.data(0, 0, a, exp=0x8002)
    job.data(1, 0, b, exp=0x8005)
    return job, a, b, c


def test_takeover_hands_the_partial_to_every_worker_and_names_the_helper(target, controller):
    job, a, b, _ = partial_setup(target, controller)
    outs = job.send(1, P.Op.TAKEOVER, 0)  # worker 1 becomes the helper
    assert sorted(p for p, _ in outs) == [1, 2, 3]
    for port, f in outs:
        assert f.header.op == P.Op.PARTIAL and f.header.worker == 1 and f.header.chunk == 0
        assert f.header.bitmap == 0b011 and f.header.count == 2 and f.header.exp == 0x8005
        assert f.dst.port == job.spec.workers[port - 1].udp_port
        np.testing.assert_array_equal(f.lanes, a + b)
    state = controller.read_slot(5, 0)[0]
    assert state.state == P.SlotState.TAKEN and state.helper == 1


def test_late_contribution_is_bounced_to_the_helper_and_never_added(target, controller):
    job, a, b, c = partial_setup(target, controller)
    job.send(1, P.Op.TAKEOVER, 0)
    [(port, bounce)] = job.data(2, 0, c)
    assert port == 3 and bounce.header.op == P.Op.BOUNCE
    assert bounce.header.reason == P.Bounce.TAKEN and bounce.header.worker == 1
    np.testing.assert_array_equal(bounce.lanes, c)
    assert controller.read_slot(5, 0)[0].bitmap == 0b011


def test_helper_result_is_multicast_and_stored_for_retransmissions(target, controller):
    job, a, b, c = partial_setup(target, controller)
    job.send(1, P.Op.TAKEOVER, 0)
    total = a + b + c
    outs = job.send(1, P.Op.HELPER_RESULT, 0, total, bitmap=0b111, count=3, exp=0x8007,
                    scale=0x8000)
    assert_result_to_all(job, outs, 0, total, 0b111, 3, exp=0x8007, flags=P.Flag.HELPER)
    [(_, copy)] = job.data(0, 0, a)  # a worker that lost the helper's result
    assert copy.header.flags & P.Flag.COPY
    np.testing.assert_array_equal(copy.lanes, total)
    assert controller.read_slot(5, 0)[0].state == P.SlotState.COMPLETE


def test_a_repeated_takeover_resends_the_partial_and_may_change_helper(target, controller):
    job, a, b, _ = partial_setup(target, controller)
    job.send(1, P.Op.TAKEOVER, 0)
    outs = job.send(0, P.Op.TAKEOVER, 0)  # the first helper went quiet; worker 0 takes over
    assert {f.header.worker for _, f in outs} == {0}
    np.testing.assert_array_equal(outs[0][1].lanes, a + b)


def test_takeover_of_a_chunk_not_held_or_already_complete(target, controller):
    job, a, b, c = partial_setup(target, controller)
    [(_, bounce)] = job.send(0, P.Op.TAKEOVER, 1)  # chunk 1 never started
    assert bounce.header.op == P.Op.BOUNCE and bounce.header.reason == P.Bounce.NOT_HELD
    job.data(2, 0, c)  # chunk 0 completes normally
    [(_, copy)] = job.send(0, P.Op.TAKEOVER, 0)
    assert copy.header.op == P.Op.RESULT and copy.header.flags & P.Flag.COPY
    np.testing.assert_array_equal(copy.lanes, a + b + c)


def test_freed_slot_takes_the_next_chunks(target, controller):
    """After a takeover the leading workers stream the slot's next chunks (c + W on the other
    set, then c + 2W on the taken set) while the straggler's chunk c lives at the helper."""
    job, a, b, c = partial_setup(target, controller)
    W = job.spec.slots
    job.send(1, P.Op.TAKEOVER, 0)
    for chunk in (W, 2 * W):
        job.data(0, chunk, a)
        job.data(1, chunk, b)
        job.send(1, P.Op.TAKEOVER, chunk)
    [(_, stale)] = job.data(2, 0, c)  # the straggler arrives after the slot moved on
    assert stale.header.reason == P.Bounce.STALE
    outs = job.send(1, P.Op.HELPER_RESULT, 0, a + b + c, bitmap=0b111, count=3)
    assert_result_to_all(job, outs, 0, a + b + c, 0b111, 3, flags=P.Flag.HELPER)
    assert controller.read_slot(5, 0)[0].chunk == 2 * W  # not overwritten by the late result


def test_helper_data_goes_through_the_switch_to_the_helper(target, controller):
    """Sent to the switch with the helper in ``reason``; it leaves on the helper's port,
    addressed to the helper and from the switch, so the helper accepts only switch frames."""
    job, _, _, c = partial_setup(target, controller)
    helper = job.endpoint(1)
    [(port, f)] = job.send(2, P.Op.HELPER_DATA, 0, c, reason=1)
    assert port == job.spec.worker(1).port and f.header.op == P.Op.HELPER_DATA
    assert (f.dst.mac, f.dst.ip, f.dst.port) == (helper.mac, helper.ip, helper.port)
    assert (f.src.mac, f.src.ip, f.src.port) == (SWITCH.mac, SWITCH.ip, P.UDP_PORT)
    assert f.header.worker == 2  # the contributor, as the switch checked it
    np.testing.assert_array_equal(f.lanes, c)
    assert job.send(2, P.Op.HELPER_DATA, 0, c, reason=9) == []  # no such helper
    assert controller.counters(5)["ingress"]["drops"] == {"UNREGISTERED": 1}

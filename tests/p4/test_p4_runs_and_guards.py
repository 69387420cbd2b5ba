"""Runs of a job (docs/protocol.md §4.5) and the switch's guards against forged frames (§11)."""

import numpy as np

from protocol import constants as P
from protocol.codec import Endpoint, Frame, Header, encode_frame
from tests.p4.packets import SWITCH, Job, assert_result_to_all, job_spec

ONES = np.ones(P.LANES, np.int32)
OLD, NEW = 0xFFFF_FFF0, 5  # NEW is after OLD in serial-number arithmetic (it wrapped)


def test_a_result_of_an_older_run_is_never_returned_to_a_newer_one(target, controller):
    """Version 1 answered the new run's first packet with the old run's stored result."""
    job = Job(job_spec(1, 2), target)
    controller.admit(job.spec)
    job.data(0, 0, ONES, run=OLD)
    assert_result_to_all(job, job.data(1, 0, ONES, run=OLD), 0, 2 * ONES, 0b11, 2)
    assert job.data(0, 0, 10 * ONES, run=NEW) == []  # starts the chunk afresh: no old COPY
    outs = job.data(1, 0, 20 * ONES, run=NEW)
    assert_result_to_all(job, outs, 0, 30 * ONES, 0b11, 2)
    assert {f.header.run for _, f in outs} == {NEW}
    assert controller.read_slot(1, 0)[0].run == NEW


def test_an_unfinished_aggregation_of_an_older_run_is_evicted_not_summed(target, controller):
    job = Job(job_spec(1, 3, slots=2), target)
    controller.admit(job.spec)
    job.data(0, 4, 100 * ONES, run=OLD)  # chunk 4 of the old run, in the aggregator of 0
    job.data(1, 4, 100 * ONES, run=OLD)
    for w in range(2):
        assert job.data(w, 0, ONES, run=NEW) == []
    assert_result_to_all(job, job.data(2, 0, ONES, run=NEW), 0, 3 * ONES, 0b111, 3)
    assert controller.counters(1)["evictions"] == 1


def test_every_packet_of_an_older_run_is_refused_where_a_newer_run_is(target, controller):
    job = Job(job_spec(1, 3), target)
    controller.admit(job.spec)
    job.data(0, 0, ONES, run=NEW)
    for op, flags in ((P.Op.DATA, 0), (P.Op.DATA, P.Flag.PROBE), (P.Op.TAKEOVER, 0),
                      (P.Op.HELPER_RESULT, 0)):
        [(port, bounce)] = job.send(1, op, 0, 7 * ONES, run=OLD, flags=flags, scale=0x8000)
        assert port == 2 and bounce.header.op == P.Op.BOUNCE
        assert bounce.header.reason == P.Bounce.OLD_RUN and bounce.header.run == OLD
    state = controller.read_slot(1, 0)[0]
    assert (state.run, state.bitmap, state.state) == (NEW, 0b001, P.SlotState.AGGREGATING)
    assert state.lanes == tuple(ONES.tolist())


def test_clearing_an_aggregator_forgets_its_run(target, controller):
    job = Job(job_spec(1, 2), target)
    placed = controller.admit(job.spec)
    job.data(0, 0, ONES, run=NEW)
    controller.aggregator.clear(controller.conn, [2 * placed.slot_base])
    state = controller.read_slot(1, 0)[0]
    assert (state.run, state.state) == (0, P.SlotState.EMPTY)
    assert job.data(0, 0, ONES, run=OLD) == []  # any run may start on a cleared aggregator


def test_a_frame_from_the_switchs_own_address_is_dropped(target, controller):
    job = Job(job_spec(1, 2), target)
    controller.admit(job.spec)
    w = job.spec.worker(1)
    forged = encode_frame(Frame(SWITCH, Endpoint(w.mac, w.ip, w.udp_port),
                                Header(op=P.Op.RESULT, job=1, bitmap=3, count=2),
                                np.full(P.LANES, 12345, np.int32)))
    assert target.send(job.spec.worker(0).port, forged) == []
    arp = bytes.fromhex("ffffffffffff" + SWITCH.mac.replace(":", "") + "0806") + bytes(46)
    assert target.send(job.spec.worker(0).port, arp) == []
    assert controller.counters()["ingress"]["drops"] == {"SPOOFED": 2}


def test_sa_atp_frames_are_never_flooded(target, controller):
    """Frames to or from the protocol's UDP port with an unknown destination are dropped; other
    UDP traffic to an unknown destination is flooded as before."""
    job = Job(job_spec(1, 2), target)
    controller.admit(job.spec)
    src = job.endpoint(0)
    nowhere = Endpoint("ff:ff:ff:ff:ff:ff", "10.9.9.9", 9999)
    to_nowhere = encode_frame(Frame(src, nowhere, Header(op=P.Op.RESULT, job=1)))
    assert target.send(1, to_nowhere) == []  # source port 23162
    other = bytearray(to_nowhere)
    other[34:36] = (1000).to_bytes(2, "big")  # neither port is the protocol's
    assert sorted(p for p, _ in target.send(1, bytes(other))) == [2, 3, 4, 5, 6, 7, 8]
    assert controller.counters()["ingress"]["drops"] == {"NO_FLOOD": 1}

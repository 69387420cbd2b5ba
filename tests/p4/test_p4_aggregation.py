"""The data path of docs/protocol.md §4.2: sums, idempotency, shadow sets, stale packets,
several jobs at once."""

import numpy as np
import pytest

from protocol import constants as P
from tests.p4.packets import Job, assert_result_to_all, job_spec, random_lanes, wrapping_sum

ONES = np.ones(P.LANES, np.int32)


@pytest.mark.parametrize("n", [2, 3, 4, 8])
def test_each_chunk_is_the_numpy_sum_multicast_once_to_every_worker(target, controller, n):
    rng = np.random.default_rng(n)
    job = Job(job_spec(1, n, slots=4), target)
    controller.admit(job.spec)
    chunks = 8  # two passes over each slot: both shadow sets, then reuse
    lanes = {(w, c): row for c in range(chunks) for w, row in enumerate(random_lanes(rng, n))}
    exps = {(w, c): int(rng.integers(0x7F00, 0x8100)) for w in range(n) for c in range(chunks)}
    for c in range(chunks):
        order = rng.permutation(n)
        for k, w in enumerate(order):
            outs = job.data(int(w), c, lanes[(w, c)], exp=exps[(w, c)])
            if k < n - 1:
                assert outs == [], f"chunk {c}: a partial sum left the switch"
        assert_result_to_all(job, outs, c, wrapping_sum([lanes[(w, c)] for w in range(n)]),
                             bitmap=(1 << n) - 1, count=n,
                             exp=max(exps[(w, c)] for w in range(n)))


def test_sums_wrap_like_int32(target, controller):
    job = Job(job_spec(1, 2), target)
    controller.admit(job.spec)
    big = np.full(P.LANES, 2**31 - 1, np.int32)
    job.data(0, 0, big)
    outs = job.data(1, 0, big)
    assert_result_to_all(job, outs, 0, wrapping_sum([big, big]), 0b11, 2)
    assert outs[0][1].lanes[0] == -2


def test_interleaved_chunks_in_any_order(target, controller):
    """All workers' packets for a window of chunks, shuffled together."""
    rng = np.random.default_rng(7)
    n, slots = 4, 8
    job = Job(job_spec(2, n, slots=slots), target)
    controller.admit(job.spec)
    lanes = random_lanes(rng, n * slots).reshape(n, slots, P.LANES)
    packets = [(w, c) for w in range(n) for c in range(slots)]
    results = {}
    for i in rng.permutation(len(packets)):
        w, c = packets[i]
        for port, f in job.data(w, c, lanes[w, c]):
            results.setdefault(c, []).append((port, f))
    assert sorted(results) == list(range(slots))
    for c, outs in results.items():
        assert_result_to_all(job, outs, c, wrapping_sum(lanes[:, c]), 0b1111, 4)


def test_a_duplicate_is_added_once_and_answered_with_the_bitmap(target, controller):
    """The PENDING bounce goes to every worker of the job, with the bitmap: one whose
    contribution was lost hears of it, and the others hold back their own questions
    (docs/protocol.md §4.2)."""
    job = Job(job_spec(1, 3), target)
    controller.admit(job.spec)
    a, b, c = (np.full(P.LANES, v, np.int32) for v in (10, 20, 40))
    assert job.data(0, 0, a) == []
    outs = job.data(0, 0, a, flags=P.Flag.RETX)
    assert sorted(port for port, _ in outs) == [1, 2, 3]
    for port, bounce in outs:
        w = port - 1
        assert bounce.header.op == P.Op.BOUNCE and bounce.header.worker == 0
        assert bounce.header.reason == P.Bounce.PENDING and bounce.header.bitmap == 0b001
        assert (bounce.dst.ip, bounce.dst.port) == (job.endpoint(w).ip, job.endpoint(w).port)
        np.testing.assert_array_equal(bounce.lanes, a)  # the sender's lanes, untouched
    job.data(1, 0, b)
    outs = job.data(1, 0, b)  # a question from worker 1 reaches the three workers too
    assert sorted(port for port, _ in outs) == [1, 2, 3]
    assert all(f.header.bitmap == 0b011 and f.header.worker == 1 for _, f in outs)
    outs = job.data(2, 0, c)
    assert_result_to_all(job, outs, 0, a + b + c, 0b111, 3)


def test_a_retransmission_after_completion_gets_a_unicast_copy(target, controller):
    job = Job(job_spec(1, 2), target)
    controller.admit(job.spec)
    a, b = np.arange(64, dtype=np.int32), np.full(P.LANES, 5, np.int32)
    job.data(0, 0, a)
    job.data(1, 0, b)
    [(port, copy)] = job.data(0, 0, a, flags=P.Flag.RETX)
    assert port == 1 and copy.header.op == P.Op.RESULT
    assert copy.header.flags & P.Flag.COPY and copy.header.bitmap == 0b11
    assert (copy.dst.mac, copy.dst.ip) == (job.endpoint(0).mac, job.endpoint(0).ip)
    np.testing.assert_array_equal(copy.lanes, a + b)


def test_shadow_set_keeps_a_result_while_the_next_chunk_aggregates(target, controller):
    """Chunk c and c + W share a slot but not a set: c's result is still answered while c + W
    aggregates, and c + 2W (c's set again) replaces it."""
    W = 4
    job = Job(job_spec(1, 2, slots=W), target)
    controller.admit(job.spec)
    ones, twos = np.ones(P.LANES, np.int32), np.full(P.LANES, 2, np.int32)
    job.data(0, 0, ones)
    job.data(1, 0, ones)
    job.data(0, W, twos)  # next chunk in the same slot, other set: worker 1 still behind
    [(_, copy)] = job.data(1, 0, ones)  # worker 1 lost its result of chunk 0
    np.testing.assert_array_equal(copy.lanes, 2 * ones)
    outs = job.data(1, W, twos)
    assert_result_to_all(job, outs, W, 2 * twos, 0b11, 2)
    job.data(0, 2 * W, ones)  # chunk 2W reuses chunk 0's set
    [(_, stale)] = job.data(1, 0, ones)
    assert stale.header.op == P.Op.BOUNCE and stale.header.reason == P.Bounce.STALE


def test_a_stale_packet_never_touches_the_aggregator(target, controller):
    W = 2
    job = Job(job_spec(1, 2, slots=W), target)
    controller.admit(job.spec)
    v = np.full(P.LANES, 3, np.int32)
    job.data(0, 2 * W, v)  # chunk 4 in slot 0, set 0
    before = controller.read_slot(1, 0)[0]
    [(_, bounce)] = job.data(1, 0, np.full(P.LANES, 99, np.int32))  # chunk 0: older
    assert bounce.header.reason == P.Bounce.STALE
    assert controller.read_slot(1, 0)[0] == before
    assert before.chunk == 2 * W and before.bitmap == 0b01 and before.lanes == tuple(v)
    outs = job.data(1, 2 * W, v)
    assert_result_to_all(job, outs, 2 * W, 2 * v, 0b11, 2)


def test_scale_mismatch_is_refused(target, controller):
    job = Job(job_spec(1, 2), target)
    controller.admit(job.spec)
    job.data(0, 0, np.ones(P.LANES, np.int32), scale=0x8003)
    [(_, bounce)] = job.data(1, 0, np.ones(P.LANES, np.int32), scale=0x8004)
    assert bounce.header.reason == P.Bounce.SCALE_MISMATCH
    assert controller.read_slot(1, 0)[0].count == 1


def test_two_jobs_at_once_have_no_cross_talk(target, controller):
    """Same worker ids, same chunk ids, interleaved: each job gets its own sums, on its own
    workers' addresses, and neither touches the other's slots."""
    rng = np.random.default_rng(3)
    a, b = Job(job_spec(10, 3, slots=4), target), Job(job_spec(11, 2, slots=4), target)
    ja, jb = controller.admit(a.spec), controller.admit(b.spec)
    assert set(ja.aggregator_range()).isdisjoint(jb.aggregator_range())
    la, lb = random_lanes(rng, 3), random_lanes(rng, 2)
    a.data(0, 0, la[0])
    b.data(0, 0, lb[0])
    a.data(1, 0, la[1])
    outs_b = b.data(1, 0, lb[1])
    outs_a = a.data(2, 0, la[2])
    assert_result_to_all(a, outs_a, 0, wrapping_sum(la), 0b111, 3)
    assert_result_to_all(b, outs_b, 0, wrapping_sum(lb), 0b11, 2)
    assert {f.dst.ip for _, f in outs_a}.isdisjoint({f.dst.ip for _, f in outs_b})


def test_a_probe_reports_without_contributing(target, controller):
    W = 2
    job = Job(job_spec(1, 3, slots=W), target)
    controller.admit(job.spec)
    [(_, b)] = job.data(2, 0, ONES, flags=P.Flag.PROBE)
    assert b.header.op == P.Op.BOUNCE and b.header.reason == P.Bounce.NOT_HELD
    job.data(0, 0, ONES)
    outs = job.data(2, 0, 5 * ONES, flags=P.Flag.PROBE)  # to every worker
    assert sorted(port for port, _ in outs) == [1, 2, 3]
    assert {(f.header.reason, f.header.bitmap) for _, f in outs} == {(P.Bounce.PENDING, 0b001)}
    job.data(1, 0, ONES)
    controller.set_membership(1, fan_in=2, expected=0b011)
    job.data(0, 0, ONES)  # the duplicate completes the chunk under the new fan-in
    [(_, copy)] = job.data(2, 0, 5 * ONES, flags=P.Flag.PROBE)  # excluded, but may ask
    assert copy.header.flags & P.Flag.COPY and copy.header.bitmap == 0b011
    np.testing.assert_array_equal(copy.lanes, 2 * ONES)
    job.data(0, 2 * W, ONES)
    [(_, b)] = job.data(2, 0, ONES, flags=P.Flag.PROBE)
    assert b.header.reason == P.Bounce.STALE


@pytest.mark.p4runtime
def test_an_evicted_aggregation_is_counted_in_packets_and_bytes(target, controller):
    """``evictions`` counts packets only, but bmv2 counts bytes of every counter and its
    P4Runtime server reports them: every target reads both."""
    from p4.v1 import p4runtime_pb2

    job = Job(job_spec(1, 2, slots=2), target)
    placed = controller.admit(job.spec)
    job.data(0, 0, ONES)  # unfinished
    job.data(0, 4, ONES)  # same slot and set, newer: evicts chunk 0
    job.data(0, 1, ONES)
    job.data(0, 5, ONES)  # and again in slot 1
    entity = p4runtime_pb2.Entity()
    entity.counter_entry.counter_id = controller.conn.p4info.counter(
        controller.aggregator.evictions_counter).preamble.id
    entity.counter_entry.index.index = placed.job_index
    (got,) = controller.conn.read(entity)
    assert (got.counter_entry.data.packet_count,
            got.counter_entry.data.byte_count) == (2, 2 * P.FRAME_LEN)
    assert controller.counters(1)["evictions"] == 2

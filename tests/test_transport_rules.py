"""The transport's rules that a well-behaved switch never exercises, against a scripted link:
results that change, scale mismatches, silence, early results, and the RTO estimator."""

import os

import numpy as np
import pytest

from host_lib.engine.config import CommunicatorConfig
from host_lib.engine.rounds import CallStats, ProtocolError, Round, RoundPlan, SwitchSilent
from host_lib.engine.rto import RtoEstimator
from host_lib.engine.shards import ShardedTransport
from host_lib.engine.transport import Transport
from protocol import constants as P
from protocol.codec import Endpoint, Frame, Header, encode_frame, frame_lanes, frames_from_bytes

WORKER = Endpoint("02:00:00:00:00:01", "10.0.0.1")
SWITCH = Endpoint("02:00:00:00:00:fe", "10.0.0.254")


class ScriptedLink:
    """A link whose switch is a Python function: answer(frame header) -> frames to deliver."""

    def __init__(self, answer):
        self.answer = answer
        self.inbox: list[bytes] = []
        self.sent: list[bytes] = []
        self._r, self._w = os.pipe()  # readable whenever the inbox is not empty

    def fileno(self):
        return self._r

    def send(self, frame):
        self.sent.append(bytes(frame))
        header = Header.unpack(bytes(frame), 42)
        for out in self.answer(header):
            self.inbox.append(out)
            os.write(self._w, b"x")

    def recv_into(self, buf):
        if not self.inbox:
            return 0
        os.read(self._r, 1)
        frame = self.inbox.pop(0)
        buf[:len(frame)] = frame
        return len(frame)

    def close(self):
        pass


def make_transport(link, worker: int = 0, n_workers: int | None = None, **options
                   ) -> Transport:
    n_workers = n_workers or len(options.get("peers", {})) or 1
    return Transport(link, CommunicatorConfig(job=1, worker=worker, n_workers=n_workers,
                                              local=WORKER, switch=SWITCH, run=0, **options))


def reply(op, chunk, lanes=0, **fields) -> bytes:
    return encode_frame(Frame(SWITCH, WORKER, Header(op=op, job=1, chunk=chunk, **fields),
                              np.full(P.LANES, lanes, np.int32)))


def make_round(n: int, base: int = 0) -> Round:
    frames = np.zeros(n, frames_from_bytes(b"").dtype)
    for j in range(n):
        frames[j:j + 1].view(np.uint8)[:] = np.frombuffer(
            encode_frame(Frame(WORKER, SWITCH, Header(op=P.Op.DATA, job=1, chunk=base + j))),
            np.uint8)
    return Round(frames, base)


def test_a_result_that_changes_is_an_error_never_accepted():
    answers = {0: [reply(P.Op.RESULT, 0, 5, bitmap=3, count=2),
                   reply(P.Op.RESULT, 0, 6, bitmap=3, count=2)]}
    transport = make_transport(ScriptedLink(lambda h: answers.pop(h.chunk, [])), slots=4)
    with pytest.raises(ProtocolError, match="differs from the first"):
        transport.run(make_round(1), CallStats())


def test_an_equal_duplicate_result_is_counted_and_ignored():
    answers = {0: [reply(P.Op.RESULT, 0, 5, bitmap=3), reply(P.Op.RESULT, 0, 5, bitmap=3)]}
    transport = make_transport(ScriptedLink(lambda h: answers.pop(h.chunk, [])), slots=4)
    stats = CallStats()
    rnd = make_round(1)
    transport.run(rnd, stats)
    assert stats.results == 1 and stats.duplicate_results == 1
    assert rnd.sums[0, 0] == 5


def test_scale_mismatch_fails_the_call():
    link = ScriptedLink(lambda h: [reply(P.Op.BOUNCE, h.chunk,
                                         reason=P.Bounce.SCALE_MISMATCH)])
    with pytest.raises(ProtocolError, match="another scale"):
        make_transport(link, slots=4).run(make_round(2), CallStats())


def test_silence_raises_after_the_bound_and_retransmits_meanwhile():
    link = ScriptedLink(lambda h: [])
    transport = make_transport(link, slots=4, initial_rto=0.02, silence_timeout=0.3)
    stats = CallStats()
    with pytest.raises(SwitchSilent, match="no packet from the switch"):
        transport.run(make_round(2), stats)
    assert stats.retransmissions >= 2
    assert all(Header.unpack(f, 42).flags & P.Flag.RETX for f in link.sent[2:])


def test_the_window_holds_back_chunk_c_plus_w_until_c_is_done():
    sent_chunks = []

    def answer(h):
        sent_chunks.append(h.chunk)
        return [reply(P.Op.RESULT, h.chunk, h.chunk)]

    transport = make_transport(ScriptedLink(answer), slots=2)
    rnd = make_round(6)
    transport.run(rnd, CallStats())
    assert sorted(sent_chunks) == list(range(6))
    assert rnd.sums[:, 0].tolist() == list(range(6))


def test_results_for_future_chunks_are_kept_until_their_round():
    """A result can precede our contribution (fan-in below n): it is used when we get there."""
    early = reply(P.Op.RESULT, 5, 42, bitmap=0b110, count=2)
    first = {0: [reply(P.Op.RESULT, 0, 1), early]}
    transport = make_transport(ScriptedLink(lambda h: first.pop(h.chunk, [])), slots=4)
    transport.run(make_round(1, base=0), CallStats())
    rnd = make_round(2, base=4)
    link = transport.link
    link.answer = lambda h: [reply(P.Op.RESULT, h.chunk, 7)] if h.chunk == 4 else []
    transport.run(rnd, CallStats())
    assert rnd.sums[:, 0].tolist() == [7, 42] and rnd.bitmaps[1] == 0b110


def test_rto_follows_rfc6298_and_clips_peer_waits():
    rto = RtoEstimator(initial=1.0, minimum=0.001, maximum=10.0)
    assert rto.rto == 1.0
    rto.sample(0.1)
    assert rto.srtt == pytest.approx(0.1) and rto.rttvar == pytest.approx(0.05)
    assert rto.rto == pytest.approx(0.3)
    rto.sample(0.1)
    assert rto.rttvar == pytest.approx(0.0375)
    rto.sample(5.0)  # a result that waited on a slow peer counts as at most 2 x srtt
    assert rto.srtt == pytest.approx(0.875 * 0.1 + 0.125 * 0.2)
    assert rto.backoff(3) == pytest.approx(min(10.0, rto.rto * 8))


@pytest.mark.parametrize("seed", range(30))
def test_the_send_window_follows_the_per_chunk_rule(seed):
    """One pass of the window against the rule written chunk by chunk: chunk j goes once j - W
    is resolved (done or taken over; the first W need nothing), in order, stopping at the first
    that may not; one taken over goes to its helper, one done already is not sent; each sent
    chunk's timer is one RTO for the worker designated for it (chunk id modulo n), two for the
    others."""
    rng = np.random.default_rng(seed)
    n, slots, n_workers = int(rng.integers(1, 40)), int(rng.integers(1, 9)), int(rng.integers(1, 5))
    worker, base = int(rng.integers(0, n_workers)), int(rng.choice([0, 5, 1000]))
    transport = make_transport(ScriptedLink(lambda h: []), worker, n_workers, slots=slots)
    transport.rto.sample(0.04)
    rnd = make_round(n, base)
    rnd.next_to_send = int(rng.integers(0, n))
    rnd.done[:] = rng.random(n) < 0.7
    rnd.taken_by[:] = np.where(rng.random(n) < 0.1, (worker + 1) % 4, -1)
    rnd.deadline[:], rnd.next_due = 9.0, 9.0
    expected_deadline, expected_sent, expected_helped = rnd.deadline.copy(), [], []
    j = rnd.next_to_send
    while j < n and (j < slots or rnd.done[j - slots] or rnd.taken_by[j - slots] >= 0):
        if rnd.taken_by[j] >= 0 and not rnd.done[j]:
            expected_helped.append(base + j)
        elif not rnd.done[j]:
            expected_sent.append(base + j)
        designated = (base + j) % n_workers == worker
        expected_deadline[j] = 1.0 + (1 if designated else 2) * transport.rto.rto
        j += 1
    expected_next = j

    stats = CallStats()
    transport._send_window(rnd, stats, 1.0)
    sent = [Header.unpack(f, 42) for f in transport.link.sent]
    assert [h.chunk for h in sent if h.op == P.Op.DATA] == expected_sent
    assert [h.chunk for h in sent if h.op == P.Op.HELPER_DATA] == expected_helped
    assert rnd.next_to_send == expected_next
    np.testing.assert_array_equal(rnd.deadline, expected_deadline)
    assert rnd.next_due == min(9.0, expected_deadline.min())
    assert stats.packets_sent == len(expected_sent) + len(expected_helped)


@pytest.mark.parametrize("seed", range(30))
def test_the_takeover_pass_follows_the_per_chunk_rule(seed):
    """One helper's takeover pass against the rule written chunk by chunk: among the last W
    chunks sent, each pending one not taken over whose helper in duty order is this worker
    (turn 0) or the next one (turn 1) is asked for once it waited ``after`` (the larger of
    two RTOs and the plan's) times 1 + 2·turn since it was sent, or one RTO since it was last
    asked, unless a worker that is not a straggler is missing; the pass returns the earliest
    time it has to look again (a chunk sent from now on is due ``after`` from now at the
    earliest), and a second pass before then sends nothing."""
    rng = np.random.default_rng(seed)
    n, slots = int(rng.integers(1, 60)), int(rng.integers(1, 20))
    helpers = tuple(int(w) for w in rng.permutation(4)[:int(rng.integers(1, 5))])
    stragglers = frozenset(int(w) for w in range(4) if w not in helpers and rng.random() < 0.7)
    base = int(rng.choice([0, 7, 1001]))
    worker = helpers[int(rng.integers(0, len(helpers)))]
    transport = make_transport(ScriptedLink(lambda h: []), worker, 4, slots=slots)
    transport.rto.sample(0.01)
    plan = RoundPlan(helpers=helpers, stragglers=stragglers,
                     takeover_after=float(rng.choice([0.0, 0.05])))
    rnd = make_round(n, base)
    rnd.plan = plan
    rnd.next_to_send = int(rng.integers(0, n + 1))
    now = 1.0
    rnd.sent_at[:rnd.next_to_send] = now - rng.random(rnd.next_to_send) * 0.2
    rnd.done[:] = rng.random(n) < 0.4
    rnd.taken_by[:] = np.where(rng.random(n) < 0.1, helpers[0], -1)
    rnd.asked_takeover[:] = np.where(rng.random(n) < 0.2, now - rng.random(n) * 0.02, np.nan)
    rnd.missing[:] = rng.integers(0, 16, n)

    after = max(2 * transport.rto.rto, plan.takeover_after)
    straggler_bits = sum(1 << s for s in stragglers)
    expected, expected_look = [], np.inf
    for j in range(max(0, rnd.next_to_send - slots), rnd.next_to_send):
        turn = (helpers.index(transport.config.worker) - (base + j)) % len(helpers)
        if rnd.done[j] or rnd.taken_by[j] >= 0 or turn > 1:
            continue
        asked = rnd.asked_takeover[j]
        due = rnd.sent_at[j] + after * (1 + 2 * turn) if np.isnan(asked) \
            else asked + transport.rto.rto
        if due > now:
            expected_look = min(expected_look, due)
        elif not (straggler_bits and int(rnd.missing[j]) & ~straggler_bits):
            expected.append(base + j)
    expected_look = min(expected_look, now + after)
    if expected:
        expected_look = min(expected_look, now + transport.rto.rto)

    stats = CallStats()
    look = transport.takeover.take_over(rnd, stats, now)
    asked = [Header.unpack(f, 42) for f in transport.link.sent]
    assert all(h.op == P.Op.TAKEOVER for h in asked)
    assert [h.chunk for h in asked] == expected
    assert stats.takeovers == len(expected)
    assert look == pytest.approx(expected_look)
    for chunk in expected:
        assert rnd.asked_takeover[chunk - base] == now
    assert transport.takeover.take_over(rnd, stats, now) == pytest.approx(expected_look)
    assert len(transport.link.sent) == len(expected)


def test_a_helper_that_missed_its_naming_takes_the_news_from_a_forwarded_copy():
    """Worker 0 of three met held pool lanes, so the switch started its chunk taken over with
    worker 0 as the helper (docs/protocol.md §4.6); the PARTIAL saying so was lost to it, and
    the slot moved on before it asked again (STALE). Only its peers know it is the helper:
    each forwards the contribution it asks them about back to it, marked COPY. It must take
    that as its naming and complete the sum from every worker's own contribution (it dropped
    them, and the chunk waited for a helper that waited for news: the job stalled)."""
    peers = {w: Endpoint(f"02:00:00:00:00:0{w + 1}", f"10.0.0.{w + 1}") for w in range(3)}
    own, others = 5, {1: 10, 2: 20}

    def switch(h):
        if h.op == P.Op.DATA:  # the first send's PARTIAL is lost; the question meets STALE
            return [reply(P.Op.BOUNCE, 0, reason=P.Bounce.STALE)] if h.flags & P.Flag.RETX \
                else []
        if h.op == P.Op.HELPER_DATA and h.reason != 0:  # to a peer, which knows the helper
            return [reply(P.Op.HELPER_DATA, 0, own, worker=h.reason, fanin=0, reason=0,
                          flags=P.Flag.COPY),
                    *(reply(P.Op.HELPER_DATA, 0, v, worker=w, reason=0) for w, v in others.items())]
        if h.op == P.Op.HELPER_RESULT:
            summed = int(frame_lanes(link.sent[-1])[0])  # every lane holds the same sum
            return [reply(P.Op.RESULT, 0, summed, bitmap=h.bitmap, count=h.count,
                          flags=P.Flag.HELPER)]
        return []

    link = ScriptedLink(switch)
    transport = make_transport(link, slots=1, peers=peers, stall_timeout=3.0)
    transport.rto.sample(0.01)
    rnd = make_round(1)
    rnd.frames["lanes"][0] = own
    transport.run(rnd, CallStats())
    assert rnd.done[0] and int(rnd.sums[0][0]) == own + sum(others.values())
    assert int(rnd.bitmaps[0]) == 0b111


def test_a_helper_holding_a_result_lingers_past_a_peers_longest_backoff():
    """A chunk summed on a host has its result only at its helper: a peer that lost it asks
    again once its backed-off timer fires, up to the RTO's ceiling (1 s) later. A worker
    lingering at close for less than that left such a peer with nobody to answer it (seen as
    SwitchSilent in tests/test_sa_atp.py at 5 % loss). Holding a result, every wait for the
    link to go quiet lasts twice the ceiling; holding none, what the caller asked."""
    sharded = ShardedTransport(ScriptedLink(lambda h: []), CommunicatorConfig(
        job=1, worker=0, n_workers=2, local=WORKER, switch=SWITCH, run=0, slots=4, shards=1))
    transport = sharded.transports[0]
    waits = []
    transport.serve_idle = lambda timeout, wake=None: waits.append(timeout) and False
    sharded.linger(0.2, limit=5.0)
    assert waits == [0.2]
    duty = transport.takeover._duty(7, RoundPlan())
    for worker in (0, 1):
        duty.add_direct(worker, np.full(P.LANES, worker + 1, np.int32), 0, 1)
    assert duty.try_complete(0.0) and transport.takeover.holds_results()
    waits.clear()
    sharded.linger(0.2, limit=5.0)
    assert waits == [2 * transport.rto.ceiling] and transport.rto.ceiling == 1.0

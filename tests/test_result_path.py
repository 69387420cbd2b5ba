"""The compiled result path (host_lib/engine/result_path.py) against hand-built batches with known
outcomes, and against the numpy path it replaced, written out plainly here, on random batches:
results out of order, second copies, chunks outside the round, refused frames, other ops."""

import numpy as np
import pytest

from host_lib.engine.config import CommunicatorConfig
from host_lib.engine.rounds import CallStats, Round
from host_lib.engine.transport import Transport
from protocol import constants as P
from protocol.codec import FRAME_DTYPE, Endpoint, Frame, Header, encode_frame

WORKER = Endpoint("02:00:00:00:00:01", "10.0.0.1")
SWITCH = Endpoint("02:00:00:00:00:fe", "10.0.0.254")
STRANGER = Endpoint("02:00:00:00:00:66", "10.0.0.66")
JOB, RUN, SLOTS = 1, 7, 4
RESULT_VER_OP = (P.VERSION << 4) | P.Op.RESULT


class NoLink:
    """The transport under test only handles batches put into its receive buffer."""

    def fileno(self):
        return -1

    def send(self, frame):
        raise AssertionError("the result path sends nothing")

    def recv_into(self, buf):
        return 0

    def close(self):
        pass


def frame(chunk: int, op=P.Op.RESULT, lanes=None, src=SWITCH, dst=WORKER, job=JOB, run=RUN,
          **fields) -> bytes:
    chunk &= 0xFFFFFFFF
    if lanes is None:
        lanes = (np.arange(P.LANES) * (chunk % 1000 + 1) - 1000).astype(np.int32)
    return encode_frame(Frame(src, dst, Header(op=op, job=job, chunk=chunk, run=run, **fields),
                              lanes))


def make_transport(worker: int = 0, n_workers: int = 1) -> Transport:
    return Transport(NoLink(), config(worker, n_workers))


def config(worker: int = 0, n_workers: int = 1) -> CommunicatorConfig:
    return CommunicatorConfig(job=JOB, worker=worker, n_workers=n_workers, slots=SLOTS,
                              local=WORKER, switch=SWITCH, run=RUN)


def make_round(n: int, base: int = 0) -> Round:
    rnd = Round(np.zeros(n, FRAME_DTYPE), base)
    rnd.next_to_send = n
    rnd.sent_at[:] = 1.0
    return rnd


def deliver(transport: Transport, rnd: Round, frames: list[bytes], now: float = 2.0):
    """Handle ``frames`` as one received batch; returns the call's stats and the indexes of
    the frames handed to the per-frame path."""
    handed = []

    def handle(rnd, stats, frame, now):
        at = np.frombuffer(frame, np.uint8).ctypes.data - transport._rx.ctypes.data
        handed.append(at // transport._rx.strides[0])
        return True

    transport._handle = handle
    for i, f in enumerate(frames):
        transport._rx[i, :P.FRAME_LEN] = np.frombuffer(f, np.uint8)
    stats = CallStats()
    transport._handle_batch(rnd, stats, len(frames), now)
    return stats, handed


def test_results_out_of_order_are_stored_big_endian_fields_and_all():
    transport, rnd = make_transport(), make_round(4, base=100)
    lanes = np.array([-1, 2**31 - 1, -2**31, 0x01020304] * (P.LANES // 4), np.int32)
    stats, handed = deliver(transport, rnd, [
        frame(102, lanes=lanes, exp=0x8001, bitmap=0x80000001, count=200),
        frame(100, exp=0xFFFF, bitmap=1, count=1), frame(101, exp=0x1234, bitmap=3, count=2)])
    assert handed == [] and stats.results == 3 and rnd.completed == 3
    assert rnd.done.tolist() == [True, True, True, False]
    np.testing.assert_array_equal(rnd.sums[2], lanes)
    np.testing.assert_array_equal(rnd.sums[0], np.arange(P.LANES) * 101 - 1000)
    assert rnd.exps.tolist() == [0xFFFF, 0x1234, 0x8001, 0]
    assert rnd.bitmaps.tolist() == [1, 3, 0x80000001, 0]
    assert rnd.counts.tolist() == [1, 2, 200, 0]
    assert not rnd.lost.any()  # no chunk before the newest result is missing
    assert transport.rto.srtt == pytest.approx(1.0)  # one sample: sent at 1, received at 2


def test_a_second_copy_in_the_batch_goes_to_the_per_frame_path():
    transport, rnd = make_transport(), make_round(4)
    stats, handed = deliver(transport, rnd, [frame(0), frame(1), frame(0), frame(2), frame(1)])
    assert handed == [2, 4]  # to be checked against the first copy
    assert stats.results == 3 and rnd.done.tolist() == [True, True, True, False]


def test_a_result_for_a_chunk_already_done_goes_to_the_per_frame_path():
    transport, rnd = make_transport(), make_round(4)
    rnd.done[1] = True
    stats, handed = deliver(transport, rnd, [frame(0), frame(1), frame(2)])
    assert handed == [1] and stats.results == 2
    assert rnd.sums[1].tolist() == [0] * P.LANES


@pytest.mark.parametrize("base", [0, 2**32 - 2])
def test_results_outside_the_round_go_to_the_per_frame_path(base):
    transport, rnd = make_transport(), make_round(4, base)
    stats, handed = deliver(transport, rnd, [frame(base - 1), frame(base), frame(base + 4),
                                             frame(base + 3), frame(base + 2**31)])
    assert handed == [0, 2, 4]
    assert stats.results == 2 and rnd.done.tolist() == [True, False, False, True]
    np.testing.assert_array_equal(rnd.sums[3], np.arange(P.LANES) * ((base + 3) % 2**32 % 1000
                                                                     + 1) - 1000)
    assert not rnd.done[1:3].any() and rnd.sums[1:3].max() == 0


def test_other_ops_go_to_the_per_frame_path():
    transport, rnd = make_transport(), make_round(4)
    stats, handed = deliver(transport, rnd, [
        frame(0), frame(1, op=P.Op.BOUNCE, reason=P.Bounce.PENDING),
        frame(1, op=P.Op.PARTIAL), frame(2, op=P.Op.HELPER_DATA), frame(3)])
    assert handed == [1, 2, 3]
    assert stats.results == 2 and rnd.done.tolist() == [True, False, False, True]


@pytest.mark.parametrize("refused, reason", [
    (dict(job=JOB + 1), "other_job"), (dict(run=RUN + 1), "other_run"),
    (dict(src=STRANGER), "not_from_switch"), (dict(dst=STRANGER), "not_for_us")])
def test_refused_frames_are_counted_and_never_stored(refused, reason):
    transport, rnd = make_transport(), make_round(4)
    stats, handed = deliver(transport, rnd, [frame(0), frame(1, **refused), frame(2),
                                             frame(3, **refused)])
    assert handed == [] and stats.rejected == {reason: 2}
    assert stats.results == 2 and rnd.done.tolist() == [True, False, True, False]


def test_another_protocol_version_is_refused():
    transport, rnd = make_transport(), make_round(2)
    other = bytearray(frame(0))
    other[P.ETH_LEN + P.IPV4_LEN + P.UDP_LEN] ^= 0x30  # the version nibble
    stats, handed = deliver(transport, rnd, [bytes(other), frame(1)])
    assert stats.rejected == {"not_sa_atp": 1} and rnd.done.tolist() == [False, True]


def test_oversized_and_short_datagrams_are_dropped_before_the_batch():
    class Datagrams(NoLink):
        def __init__(self, datagrams):
            self.datagrams = datagrams

        def recv_batch(self, rows):
            lengths = []
            for row, d in zip(rows, self.datagrams, strict=False):
                row[:min(len(d), len(row))] = np.frombuffer(d, np.uint8)[:len(row)]
                lengths.append(len(d))
            self.datagrams = self.datagrams[len(lengths):]
            return np.array(lengths, np.int64)

    rnd = make_round(3)
    link = Datagrams([frame(0), frame(1) + b"\0", frame(1)[:100], frame(2), frame(1)])
    transport = Transport(link, config())
    stats = CallStats()
    assert transport._drain(rnd, stats, 2.0)
    assert stats.malformed == 2 and stats.results == 3 and rnd.completed == 3
    np.testing.assert_array_equal(rnd.sums[1], np.arange(P.LANES) * 2 - 1000)


def test_karn_rule_and_question_timer_samples():
    transport, rnd = make_transport(), make_round(6)
    rnd.sent_at[:] = [1.0, 1.5, 1.0, 1.0, 1.0, np.nan]
    rnd.retries[2] = 1  # resent: no round-trip sample, but a COPY answers our question
    rnd.pending_at[3] = 1.2  # waited on peers
    rnd.taken_by[4] = 0  # taken over
    deliver(transport, rnd, [frame(j, flags=P.Flag.COPY if j == 2 else 0) for j in range(6)],
            now=3.0)
    assert transport.rto.srtt == pytest.approx(3.0 - 1.25)  # the mean of chunks 0 and 1
    assert transport.ask_rto.srtt == pytest.approx(2.0)  # chunk 2, sent at 1
    assert rnd.completed == 6


def test_gaps_before_a_later_result_are_lost_and_the_designated_worker_asks_now():
    transport, rnd = make_transport(worker=1, n_workers=3), make_round(12, base=30)
    rnd.deadline[:] = 10.0
    rnd.done[0] = True
    rnd.first_pending = 1
    rnd.pending_at[2] = 1.99  # said to wait on peers just now
    rnd.taken_by[3] = 2
    rnd.lost[4] = True
    rnd.next_to_send = 9
    rnd.backoff[:] = 3
    deliver(transport, rnd, [frame(30 + 6), frame(30 + 11, flags=P.Flag.HELPER)], now=2.0)
    wait = 2 * transport.ask_rto.rto
    # Before chunk 6, the newest plain result (11 came from a helper): 1 and 5 are missing; 2
    # waits on peers, 3 was taken over, 4 was known lost.
    assert np.flatnonzero(rnd.lost).tolist() == [1, 4, 5]
    assert (30 + 1) % 3 == 1 and rnd.deadline[1] == 2.0  # this worker asks first: now
    assert (30 + 5) % 3 != 1 and rnd.deadline[5] == 2.0 + wait  # another does: after a wait
    # Results for 6 and 11 say 2 and 7 (W = 4 before) were resolved for everyone: due now.
    assert rnd.deadline[[2, 7]].tolist() == [2.0, 2.0] and rnd.backoff[[2, 7]].tolist() == [0, 0]
    assert rnd.deadline[[3, 4, 8, 9, 10]].tolist() == [10.0] * 5 and rnd.next_due == 2.0


# -- against the numpy path it replaced ---------------------------------------------------------

def numpy_reference(transport: Transport, rnd: Round, batch: np.ndarray, now: float,
                    rejected) -> list[int]:
    """The batch path as it was before it was compiled (numpy over whole runs of frames);
    returns the frames it handed on, one at a time."""
    frames = batch.view(FRAME_DTYPE).reshape(len(batch))
    accepted = transport.filter.accept(frames, batch, rejected)
    js = (frames["chunk"].astype(np.int64) - rnd.base) & 0xFFFFFFFF
    fast = accepted & (frames["ver_op"] == RESULT_VER_OP) & (js < rnd.n)
    fast[fast] = ~rnd.done[js[fast]]
    candidates = np.flatnonzero(fast)
    _, first = np.unique(js[candidates], return_index=True)
    fast[candidates] = False
    fast[candidates[first]] = True
    handed, start = [], 0
    for i in np.flatnonzero(~fast).tolist():
        reference_run(transport, rnd, frames[start:i], js[start:i], now)
        if accepted[i]:
            handed.append(i)
        start = i + 1
    reference_run(transport, rnd, frames[start:], js[start:], now)
    return handed


def reference_run(transport: Transport, rnd: Round, frames: np.ndarray, js: np.ndarray,
                  now: float) -> None:
    if not len(js):
        return
    rnd.sums[js] = frames["lanes"]
    rnd.exps[js], rnd.bitmaps[js], rnd.counts[js] = frames["exp"], frames["bitmap"], frames["count"]
    rnd.done[js] = True
    rnd.completed += len(js)
    sent_at, retries = rnd.sent_at[js], rnd.retries[js]
    clean = ((retries == 0) & np.isnan(rnd.pending_at[js]) & (rnd.taken_by[js] < 0)
             & ~np.isnan(sent_at))
    if clean.any():
        transport.rto.sample(now - float(sent_at[clean].mean()))
    for j in js[(frames["flags"] & P.Flag.COPY != 0) & (retries == 1)].tolist():
        transport.ask_rto.sample(now - float(rnd.sent_at[j]))
    plain = js[frames["flags"] & P.Flag.HELPER == 0]
    if len(plain):
        lo, hi = rnd.first_pending, min(int(plain.max()), rnd.next_to_send)
        wait = 2 * transport.ask_rto.rto
        gap = np.flatnonzero(~rnd.done[lo:hi] & ~rnd.lost[lo:hi] & (rnd.taken_by[lo:hi] < 0)
                             & ~(rnd.pending_at[lo:hi] > now - wait)) + lo
        rnd.lost[gap] = True
        designated = (rnd.base + gap) % transport.config.n_workers == transport.config.worker
        rnd.due(gap, np.minimum(rnd.deadline[gap], np.where(designated, now, now + wait)))
    before = js[js >= SLOTS] - SLOTS
    lost = before[(before < rnd.next_to_send) & ~rnd.done[before]]
    rnd.due(lost, np.full(len(lost), now))
    rnd.backoff[lost] = 0


def random_case(rng: np.random.Generator, n: int, base: int):
    rnd = make_round(n, base)
    rnd.first_pending = int(rng.integers(0, 4))
    rnd.next_to_send = int(rng.integers(rnd.first_pending, n + 1))
    rnd.done[:] = rng.random(n) < 0.2
    rnd.done[:rnd.first_pending] = True
    rnd.sent_at[:] = np.where(rng.random(n) < 0.1, np.nan, rng.uniform(0.5, 1.9, n))
    rnd.retries[:] = rng.integers(0, 3, n) * (rng.random(n) < 0.3) * ~np.isnan(rnd.sent_at)
    rnd.pending_at[:] = np.where(rng.random(n) < 0.2, rng.uniform(1.7, 2.0, n), np.nan)
    rnd.taken_by[:] = np.where(rng.random(n) < 0.1, 1, -1)
    rnd.lost[:] = rng.random(n) < 0.1
    rnd.deadline[:] = rng.uniform(1.5, 3.0, n)
    rnd.backoff[:] = rng.integers(0, 3, n)
    frames = []
    for _ in range(int(rng.integers(1, 120))):
        chunk = base + int(rng.integers(-3, n + 3))
        kind = rng.random()
        flags = int(rng.choice([0, 0, 0, P.Flag.COPY, P.Flag.HELPER, P.Flag.SET]))
        lanes = rng.integers(-2**31, 2**31, P.LANES, dtype=np.int64).astype(np.int32)
        fields = dict(lanes=lanes, flags=flags, bitmap=int(rng.integers(0, 2**32)),
                      count=int(rng.integers(0, 256)), exp=int(rng.integers(0, 2**16)))
        if kind < 0.06:
            frames.append(frame(chunk, job=JOB + 1, **fields))
        elif kind < 0.09:
            frames.append(frame(chunk, src=STRANGER, **fields))
        elif kind < 0.14:
            frames.append(frame(chunk, op=P.Op.BOUNCE, reason=P.Bounce.PENDING, **fields))
        elif kind < 0.24:  # a bit flipped anywhere in the headers
            flipped = bytearray(frame(chunk, **fields))
            flipped[int(rng.integers(0, P.LANES_OFFSET))] ^= 1 << int(rng.integers(0, 8))
            frames.append(bytes(flipped))
        else:
            frames.append(frame(chunk, **fields))
    return rnd, frames


def copy_round(rnd: Round) -> Round:
    twin = Round(rnd.frames, rnd.base)
    for name, value in vars(rnd).items():
        setattr(twin, name, value.copy() if isinstance(value, np.ndarray) else value)
    return twin


@pytest.mark.parametrize("seed", range(40))
def test_the_compiled_path_matches_the_numpy_path_it_replaced(seed):
    rng = np.random.default_rng(seed)
    base = int(rng.choice([0, 1000, 2**32 - 20]))
    rnd, frames = random_case(rng, int(rng.integers(1, 60)), base)
    expected = copy_round(rnd)
    n_workers = int(rng.integers(1, 5))
    transport = make_transport(worker=int(rng.integers(0, n_workers)), n_workers=n_workers)
    reference = make_transport(transport.config.worker, n_workers)
    for t in (transport, reference):  # the same history: timers above their minimum
        t.rto.sample(0.3)
        t.ask_rto.sample(0.02)

    stats, handed = deliver(transport, rnd, frames)
    rejected = CallStats().rejected
    raw = np.frombuffer(b"".join(frames), np.uint8).reshape(len(frames), P.FRAME_LEN)
    expected_handed = numpy_reference(reference, expected, raw, 2.0, rejected)

    assert handed == expected_handed
    assert stats.rejected == rejected
    assert stats.results == expected.completed
    for name in ("sums", "exps", "bitmaps", "counts", "done", "lost", "backoff", "deadline"):
        np.testing.assert_array_equal(getattr(rnd, name), getattr(expected, name), name)
    assert rnd.completed == expected.completed
    assert rnd.next_due == expected.next_due
    for mine, theirs in ((transport.rto, reference.rto), (transport.ask_rto, reference.ask_rto)):
        assert mine.srtt == pytest.approx(theirs.srtt, rel=1e-12, abs=1e-15)
        assert mine.rttvar == pytest.approx(theirs.rttvar, rel=1e-12, abs=1e-15)

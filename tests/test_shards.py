"""A worker's call split over shards (host_lib/engine/shards.py): how many there are, how a
shared link hands frames to them, and whole calls on the compiled round loop of every shard
against the benchmark's reflector (one socket per shard, the kernel steering each answer to the
reflector process of its slot): exact sums, under loss, and a failing shard that ends the call.
The sharded path through the embedded switch (loss, duplication, takeover, fallback, runs,
malformed frames) is tested beside the single-shard cases, in test_transport.py,
test_sa_atp.py and test_security.py."""

import socket
import threading

import numpy as np
import pytest

from bench.reflector import Reflector
from host_lib.communicator import SwitchCommunicator
from host_lib.engine.config import CommunicatorConfig
from host_lib.engine.links import UdpTunnelLink
from host_lib.engine.rounds import SwitchSilent
from host_lib.engine.shards import SharedLink, shard_count
from protocol import constants as P
from protocol.codec import FRAME_DTYPE, Endpoint, FrameBatch
from tests.quant_reference import AllreduceReference
from topologies.local import local_job


def test_shards_divide_the_window():
    spec = local_job(1, 2, slots=12)
    config = CommunicatorConfig.from_spec(spec, 0, run=1)
    assert [shard_count(config, k) for k in (1, 2, 3, 4, 5, 6, 8, 13, 100)] == [
        1, 2, 3, 4, 4, 6, 6, 12, 12]


class Queue:
    """A link with one receive queue, fed by the test."""

    def __init__(self):
        self.waiting: list[bytes] = []
        self.sent: list[bytes] = []
        self.r, self.w = socket.socketpair()

    def fileno(self):
        return self.r.fileno()

    def send(self, frame):
        self.sent.append(bytes(frame))

    def recv_into(self, buf):
        if not self.waiting:
            return 0
        frame = self.waiting.pop(0)
        buf[:len(frame)] = frame
        return len(frame)

    def close(self):
        self.r.close()
        self.w.close()


def test_a_shared_link_hands_each_frame_to_the_shard_of_its_slot_in_arrival_order():
    link = Queue()
    shared = SharedLink(link, 3)
    batch = FrameBatch(Endpoint("02:00:00:00:00:fe", "10.0.0.254"),
                       Endpoint("02:00:00:00:00:01", "10.0.0.1"))
    slots = [4, 0, 3, 7, 1, 6, 2, 5, 8]
    frames = [batch.encode(op=P.Op.RESULT, job=1, worker=0, slot=s, chunk=100 + i).tobytes()
              for i, s in enumerate(slots)]
    arrival = frames[:5] + [b"x"] + frames[5:]
    link.waiting = list(arrival)
    rows = np.zeros((4, P.FRAME_LEN + 4), np.uint8)
    got = {}
    for k in (2, 0, 1):  # whichever shard asks first takes everything in
        lengths = shared.shards[k].recv_batch(rows)
        more = shared.shards[k].recv_batch(rows[len(lengths):])
        got[k] = [rows[i, :n].tobytes() for i, n in enumerate(np.r_[lengths, more])]
    arrived = list(zip(slots[:5] + [0] + slots[5:], arrival, strict=True))
    for k in range(3):  # a datagram too short to name a slot goes to shard 0
        assert got[k] == [f for s, f in arrived if s % 3 == k]
    shared.shards[1].send(frames[0])
    shared.shards[2].send_batch(np.frombuffer(frames[1] + frames[2], FRAME_DTYPE))
    assert link.sent == frames[:3]
    shared.close()
    link.close()


def reflected(shards: int, elements: int, calls: int, drop=0.0, **options):
    """Calls of one worker on ``shards`` shards against a reflector of as many processes;
    returns the results, the inputs and the calls' statistics."""
    spec = local_job(1, 1, slots=48)  # K divides the window
    rng = np.random.default_rng(shards)
    inputs = [rng.standard_normal(elements).astype(np.float32) for _ in range(calls)]
    with Reflector(shards, drop) as reflector:
        config = CommunicatorConfig.from_spec(spec, 0, run=1, shards=shards, **options)
        comm = SwitchCommunicator(config, UdpTunnelLink(reflector.address,
                                                        reply_to_sender=True))
        assert comm.transport.shards == shards
        assert all(t._compiled is not None for t in comm.transport.transports)
        try:
            results = [comm.allreduce_async(x) for x in inputs]
            out = [f.result(timeout=120) for f in results]
        finally:
            comm.close()
    return out, inputs


@pytest.mark.parametrize("shards, drop", [(1, 0.0), (3, 0.0), (2, 0.03), (4, 0.03)])
def test_every_shard_streams_its_chunks_and_the_sums_are_exact(shards, drop):
    out, inputs = reflected(shards, 50_000, 3, drop)
    reference = AllreduceReference(1)
    for (result, stats), x in zip(out, inputs, strict=True):
        np.testing.assert_array_equal(result, reference([x]))
        assert stats.results == stats.chunks == -(-x.size // P.LANES) + stats.repairs
        if drop:
            assert stats.retransmissions > 0


def test_a_shard_that_hears_nothing_ends_the_call_for_all():
    """Shard 1's reflector answers nothing: that shard gives up after the silence bound, and
    the call fails with it (the other shard, done or waiting, stops too), and no thread of the
    call outlives it (other tests of this process may have left threads of their own)."""
    before = set(threading.enumerate())
    with pytest.raises(SwitchSilent):
        reflected(2, 20_000, 1, [0.0, 1.0], silence_timeout=1.0)
    assert [t for t in threading.enumerate() if t not in before] == []

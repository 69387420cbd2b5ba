"""Allreduce through the embedded switch with real worker processes (docs/protocol.md §7.1):
exact sums against the numpy reference under loss, duplication and reordering, several jobs at
once, and the gloo fallback when the switch dies."""

from __future__ import annotations

import multiprocessing

import numpy as np
import pytest

from host_lib.engine.rounds import RoundPlan
from protocol import constants as P
from tests.quant_reference import AllreduceReference
from topologies.local import LocalCluster, local_job

# (workers, drop probability at ingress and at egress, elements per call, calls)
# Each call is 1563 chunks, 24 times round the 64-slot window; the nine cases stream 2.7
# million elements through the switch in all.
CASES = [(n, loss, elements, 3) for loss in (0.0, 0.01, 0.05)
         for n, elements in ((2, 100_000), (4, 100_000), (8, 100_000))]


def inputs(seed: int, worker: int, call: int, elements: int) -> np.ndarray:
    """Gradient-like values whose magnitude varies by block, with a few outliers."""
    rng = np.random.default_rng((seed, worker, call))
    scale = np.exp(rng.uniform(-12, 2, -(-elements // P.LANES))).repeat(P.LANES)[:elements]
    x = rng.standard_normal(elements) * scale
    x[rng.integers(0, elements, 3)] *= 1e4
    return x.astype(np.float32)


def sum_calls(comm, arg):
    """Worker body: back-to-back float32 calls with one tag (so scales follow the history),
    then an int32 call."""
    seed, elements, calls, link = arg
    results, stats = [], []
    for call in range(calls):
        results.append(comm.allreduce(inputs(seed, comm.config.worker, call, elements), tag="t"))
        stats.append(comm.last_stats)
    ints = np.random.default_rng((seed, comm.config.worker)).integers(
        -2**31, 2**31, 1000, dtype=np.int64).astype(np.int32)
    results.append(comm.allreduce_int(ints))
    comm.close()
    return results, stats


def expected(seed: int, n: int, elements: int, calls: int) -> list[np.ndarray]:
    ref = AllreduceReference(n)
    out = [ref([inputs(seed, w, c, elements) for w in range(n)]) for c in range(calls)]
    ints = [np.random.default_rng((seed, w)).integers(-2**31, 2**31, 1000, dtype=np.int64)
            for w in range(n)]
    out.append(((np.sum(ints, axis=0) + 2**31) % 2**32 - 2**31).astype(np.int32))
    return out


def check(results: dict, job_id: int, n: int, want: list[np.ndarray]) -> None:
    for w in range(n):
        got, _ = results[(job_id, w)]
        for call, (g, e) in enumerate(zip(got, want, strict=True)):
            assert g.dtype == e.dtype
            np.testing.assert_array_equal(g, e, err_msg=f"worker {w}, call {call}")


@pytest.mark.parametrize("n, loss, elements, calls", CASES)
def test_exact_sums_under_loss(tmp_path, n, loss, elements, calls):
    with LocalCluster([local_job(1, n, slots=64)], tmp_path) as cluster:
        if loss:
            cluster.controller.set_loss(loss, direction="ingress")
            cluster.controller.set_loss(loss, direction="egress")
        results = cluster.run_workers(sum_calls, {1: [(n, elements, calls, None)] * n},
                                      silence_timeout=20.0)
        counters = cluster.controller.counters(1)
    check(results, 1, n, expected(n, n, elements, calls))
    stats = [s for w in range(n) for s in results[(1, w)][1]]
    assert all(s.fallback is None for s in stats)
    assert all(s.results == s.chunks and s.packets_sent >= s.chunks for s in stats)
    if loss:
        # Every contribution the drop simulator took was sent again: each chunk completed
        # with every worker's, so of a worker's sends of it all but one may have been lost.
        # (How many retransmissions recovery costs against what the loss implies depends on
        # the timers, so on the machine's load: `make bench`'s loss section measures it.)
        assert sum(s.retransmissions for s in stats) >= counters["ingress"]["drops"]["SIM"] > 0
    else:
        assert "SIM" not in counters["ingress"]["drops"]


@pytest.mark.parametrize("mode, shards", [("mmsg", 1), ("plain", 1), ("mmsg", 2), ("plain", 4),
                                          (None, 2)])
def test_exact_sums_under_loss_on_each_fallback_link(tmp_path, mode, shards):
    """The links a kernel without UDP segmentation offload (or without sendmmsg) gets: the same
    exact sums under loss as the default link (the cases above); and each link with a worker's
    calls split over shards (the embedded switch's tunnel: one socket, its frames handed to the
    shards in arrival order)."""
    n, elements, calls = 3, 100_000, 2
    with LocalCluster([local_job(1, n, slots=32)], tmp_path) as cluster:
        cluster.controller.set_loss(0.02, direction="ingress")
        cluster.controller.set_loss(0.02, direction="egress")
        results = cluster.run_workers(sum_calls, {1: [(11, elements, calls, None)] * n},
                                      link_mode=mode, silence_timeout=20.0, shards=shards)
    check(results, 1, n, expected(11, n, elements, calls))
    assert sum(s.retransmissions for w in range(n) for s in results[(1, w)][1]) > 0


@pytest.mark.parametrize("shards", [1, 2])
def test_exact_sums_with_duplication_and_reordering(tmp_path, shards):
    n, elements, calls = 4, 100_000, 2
    with LocalCluster([local_job(1, n, slots=32)], tmp_path) as cluster:
        results = cluster.run_workers(sum_calls, {1: [(5, elements, calls, None)] * n},
                                      impairment={"duplicate": 0.05, "reorder": 0.05},
                                      shards=shards)
    check(results, 1, n, expected(5, n, elements, calls))
    stats = [s for w in range(n) for s in results[(1, w)][1]]
    assert sum(s.duplicate_results for s in stats) > 0


@pytest.mark.parametrize("jobs", [2, 3])
def test_several_jobs_at_once_without_cross_talk(tmp_path, jobs):
    sizes = [3, 2, 3][:jobs]
    specs, port = [], 1
    for j, n in enumerate(sizes):
        specs.append(local_job(10 + j, n, first_port=port, slots=16))
        port += n
    with LocalCluster(specs, tmp_path) as cluster:
        args = {10 + j: [(100 + j, 50_000, 2, None)] * n for j, n in enumerate(sizes)}
        results = cluster.run_workers(sum_calls, args)
    for j, n in enumerate(sizes):
        check(results, 10 + j, n, expected(100 + j, n, 50_000, 2))


class JunkFirstLink:
    """A link that hands the transport some datagrams of its own before the real ones, cut to
    the caller's rows as a socket would."""

    def __init__(self, link, junk: list[bytes]):
        self.link = link
        self.junk = list(junk)

    def fileno(self) -> int:
        return self.link.fileno()

    def send(self, frame) -> None:
        self.link.send(frame)

    def send_batch(self, frames) -> None:
        self.link.send_batch(frames)

    def recv_batch(self, rows):
        if not self.junk:
            return self.link.recv_batch(rows)
        lengths = np.array([len(d) for d in self.junk[:len(rows)]])
        for row, datagram in zip(rows, self.junk, strict=False):
            n = min(len(datagram), len(row))
            row[:n] = np.frombuffer(datagram[:n], np.uint8)
        del self.junk[:len(lengths)]
        return lengths

    def close(self) -> None:
        self.link.close()


@pytest.mark.parametrize("shards", [1, 2])
def test_malformed_datagrams_are_dropped_and_counted(tmp_path, shards):
    """Too short, too long, an unknown protocol version and another job's result, received in
    the middle of a call: each is counted as malformed and the sum stays exact (counted once,
    by whichever shard gets it)."""
    from host_lib.communicator import CommunicatorConfig, SwitchCommunicator
    from host_lib.engine.links import UdpTunnelLink
    from protocol.codec import Endpoint, Frame, Header, encode_frame

    spec = local_job(1, 1, slots=16)
    with LocalCluster([spec], tmp_path) as cluster:
        ctx = cluster.contexts(1)[0]
        w = spec.workers[0]
        result = [encode_frame(Frame(Endpoint(spec.switch_mac, spec.switch_ip),
                                     Endpoint(w.mac, w.ip, w.udp_port),
                                     Header(op=P.Op.RESULT, job=job, bitmap=1, count=1)))
                  for job in (1, 2)]
        junk = [result[0][:40], result[0] + bytes(100), bytes([0x0F]) * P.FRAME_LEN, result[1]]
        junk = [junk[i % 4] for i in range(40)]  # ten of each
        link = JunkFirstLink(UdpTunnelLink(ctx.switch_udp), junk)
        comm = SwitchCommunicator(CommunicatorConfig.from_spec(spec, 0, ctx.run, shards=shards),
                                  link)
        values = inputs(3, 0, 0, 50_000)
        total = comm.allreduce(values)
        stats = comm.last_stats
        comm.close()
    np.testing.assert_array_equal(total, AllreduceReference(1)([values]))
    assert stats.malformed == 20  # too short, too long
    assert stats.rejected == {"not_sa_atp": 10, "other_job": 10}
    assert stats.results == stats.chunks and stats.fallback is None


def fallback_worker(comm, arg):
    """Four calls: through the switch; while the switch is killed; while it runs without the
    job; after the controller restored the job. Each call starts when the test says so (for
    call 1, worker 2 only once the switch is dead: the call is in flight at its peers)."""
    elements, call_started, call_done, proceed = arg
    w = comm.config.worker
    results, stats = [], []
    for call in range(4):
        if call:
            assert proceed[call][w == 2].wait(120)
        call_started[call].set()
        results.append(comm.allreduce(inputs(7, w, call, elements), tag=call))
        stats.append(comm.last_stats)
        call_done[call].set()
    comm.close()
    return results, stats


@pytest.mark.parametrize("shards", [1, 2])
def test_dead_switch_makes_the_call_fall_back_to_gloo(tmp_path, shards):
    n, elements = 3, 300_000
    mp = multiprocessing.get_context("spawn")
    events = [[[mp.Event() for _ in range(4)] for _ in range(n)] for _ in range(2)]
    # per call: (when workers 0 and 1 may start it, when worker 2 may)
    proceed = [(mp.Event(), mp.Event()) for _ in range(4)]
    with LocalCluster([local_job(1, n, slots=64)], tmp_path) as cluster:
        group = cluster.start_workers(
            fallback_worker, {1: [(elements, events[0][w], events[1][w], proceed)
                                  for w in range(n)]},
            distributed=True, silence_timeout=5.0, shards=shards)

        def wait_all(kind: int, call: int, workers=range(n)) -> None:
            for w in workers:
                assert events[kind][w][call].wait(120), f"worker {w} stuck in call {call}"

        def let_go(call: int) -> None:
            for event in proceed[call]:
                event.set()

        wait_all(1, 0)
        proceed[1][0].set()
        wait_all(0, 1, (0, 1))   # call 1 under way at workers 0 and 1, waiting for worker 2
        cluster.switch.stop(kill=True)  # dies in the middle of call 1
        proceed[1][1].set()
        wait_all(1, 1)
        cluster.switch.restart()  # back, but with no pipeline and no job
        let_go(2)
        wait_all(1, 2)
        cluster.controller.connect()
        cluster.controller.reconcile()  # the controller restores the job
        let_go(3)
        results = group.join(120)

    want = [np.sum([inputs(7, w, c, elements).astype(np.float64) for w in range(n)], axis=0)
            for c in range(4)]
    for w in range(n):
        got, stats = results[(1, w)]
        assert [s.fallback is not None for s in stats] == [False, True, True, False]
        for c in (0, 3):
            np.testing.assert_array_equal(got[c], AllreduceReference(n)(
                [inputs(7, v, c, elements) for v in range(n)]))
        for c in (1, 2):  # gloo's float32 sum of the raw inputs
            np.testing.assert_allclose(got[c], want[c], rtol=1e-6, atol=1e-6)
            np.testing.assert_array_equal(got[c], results[(1, 0)][0][c])


def kernels_after_calls(comm, seed):
    """Per compiled kernel of a call: the specializations loaded when the communicator was
    built, and those that two calls (without and with weights) added."""
    from host_lib.engine import frames, quantize, result_path, round_loop
    from pktio import native

    kernels = (quantize._quantize, quantize._dequantize, result_path.take_results,
               result_path.flag_losses, frames.quantized_frames, frames.int_frames,
               round_loop.run_round, native.recv_rows, native.send_rows)
    loaded = [list(k.signatures) for k in kernels]
    for call in range(2):
        comm.allreduce(inputs(seed, comm.config.worker, call, 3000),
                       weights=[1.0, 2.0] if call else None)
    comm.close()
    return loaded, [[s for s in k.signatures if s not in before]
                    for k, before in zip(kernels, loaded, strict=True)]


def test_the_communicator_loads_the_kernels_its_calls_run(tmp_path):
    # so that the first call, a job's first training step, does not pay for loading them
    with LocalCluster([local_job(1, 2, slots=64)], tmp_path) as cluster:
        results = cluster.run_workers(kernels_after_calls, {1: [3, 3]})
    for loaded, added in results.values():
        assert all(loaded)
        assert not any(added)


def sit_out_first(comm, arg):
    """Fan-in 2 of 3; worker 2 sits the call out and has sent nothing before it. Its peers start
    once its link exists, and it starts its call once they have their results: the switch's
    results for it have been sent by then, and it must have them without asking anyone."""
    ready, done, values = arg
    if comm.config.worker == 2:
        ready.set()  # its link exists: the others may start
        assert all(d.wait(120) for d in done)
    else:
        assert ready.wait(120)
    plan = RoundPlan(fanin=2, contribute=comm.config.worker != 2)
    out = comm.allreduce_int(values, plan)
    stats = comm.last_stats
    if comm.config.worker != 2:
        done[comm.config.worker].set()
    comm.close()
    return out, stats.results, stats.helper_data, dict(stats.bounces)


def test_a_worker_that_has_sent_nothing_yet_gets_the_jobs_results(tmp_path):
    """The embedded switch's tunnel port sends to whoever last sent to it: a worker that sat
    out its first call (an overtaken k-of-n worker) missed every multicast result, and had to
    ask its peers for each after a probe timeout (48 of 48 chunks), until its link attached to
    its port when opened."""
    mp = multiprocessing.get_context("spawn")
    ready, done = mp.Event(), [mp.Event(), mp.Event()]
    rng = np.random.default_rng(5)
    values = [rng.integers(-1000, 1000, 48 * P.LANES, dtype=np.int32) for _ in range(3)]
    with LocalCluster([local_job(1, 3, slots=8, inband_fanin=True)], tmp_path) as cluster:
        results = cluster.run_workers(sit_out_first, {1: [(ready, done, v) for v in values]},
                                      timeout=120)
    expected = values[0].astype(np.int64) + values[1]
    for w in range(3):
        np.testing.assert_array_equal(results[(1, w)][0], expected)
    out, got, asked_peers, bounces = results[(1, 2)]
    assert got == 48 and asked_peers == 0 and "STALE" not in bounces

"""No forged, foreign or stale result reaches a caller, and every call ends in bounded time
(docs/protocol.md §4.5, §7.1, §11): forged frames from another port, a job id reused by a new
run, a run that outlives its successor, a worker that dies mid-call, a switch restarted mid-job.
Each of the first four reproduces a defect of protocol version 1."""

from __future__ import annotations

import multiprocessing
import socket
import time
from collections import Counter

import numpy as np
import pytest

from host_lib.engine.frame_filter import FrameFilter
from host_lib.engine.rounds import SwitchSilent
from host_lib.engine.runs import new_run_id
from protocol import constants as P
from protocol.codec import Endpoint, Frame, Header, encode_frame, frames_from_bytes
from tests.quant_reference import AllreduceReference
from tests.switch_state import aggregators, wait_for
from topologies.local import SWITCH_IP, SWITCH_MAC, LocalCluster, WorkerFailed, local_job

SWITCH = Endpoint(SWITCH_MAC, SWITCH_IP, P.UDP_PORT)
ME = Endpoint("02:00:00:00:01:01", "10.1.0.1", P.UDP_PORT + 1)


def test_a_worker_accepts_only_what_the_switch_sends_for_its_job_and_run():
    good = Header(op=P.Op.RESULT, job=7, run=42, bitmap=1, count=1)
    stranger = Endpoint("02:00:00:00:09:09", "10.9.9.9")

    def frame(src=SWITCH, dst=ME, **changes) -> bytes:
        fields = {**good.__dict__, **changes}
        return encode_frame(Frame(src, dst, Header(**fields)))

    eth_other = bytearray(frame())
    eth_other[12:14] = b"\x88\xb5"
    cases = {
        "accepted": frame(),
        "not_sa_atp": bytes(eth_other),
        "not_from_switch": frame(src=stranger),
        "not_for_us": frame(dst=Endpoint(ME.mac, ME.ip, 9999)),
        "other_job": frame(job=8),
        "other_run": frame(run=41),
    }
    also_not_from_switch = frame(src=Endpoint(SWITCH.mac, SWITCH.ip, 9999))
    batch = frames_from_bytes(b"".join([*cases.values(), also_not_from_switch]))
    raw = np.frombuffer(b"".join([*cases.values(), also_not_from_switch]), np.uint8).reshape(
        -1, P.FRAME_LEN)
    rejected = Counter()
    ok = FrameFilter(SWITCH, ME, job=7, run=42).accept(batch, raw, rejected)
    assert ok.tolist() == [True] + [False] * 6
    assert rejected == {"not_sa_atp": 1, "not_from_switch": 2, "not_for_us": 1,
                        "other_job": 1, "other_run": 1}


def test_the_filter_checks_exactly_the_addresses_job_run_and_version():
    """A batch of good frames passes whole; changing any one bit of a checked field (addresses,
    EtherType, IPv4 version/IHL and protocol, ports, the header's version nibble, job, run, a
    reserved flag) or making the op unknown refuses the frame, changing a bit anywhere else does
    not."""
    from protocol.codec import FRAME_DTYPE

    good = encode_frame(Frame(SWITCH, ME, Header(op=P.Op.RESULT, job=7, run=42, chunk=5)))
    checked = {"eth_dst", "eth_src", "eth_type", "ip_ver_ihl", "ip_proto", "ip_src", "ip_dst",
               "udp_sport", "udp_dport", "job", "run"}
    rows = []
    expected = []
    for name, (dtype, offset, *_) in FRAME_DTYPE.fields.items():
        for byte in range(offset, offset + dtype.itemsize):
            for bit in (0, 7):
                row = bytearray(good)
                row[byte] ^= 1 << bit
                rows.append(bytes(row))
                version_nibble = name == "ver_op" and bit >= 4
                unknown_op = name == "ver_op" and bit < 4 and (row[byte] & 0xF) not in set(P.Op)
                reserved_flag = name == "flags" and (1 << bit) & ~P.KNOWN_FLAGS & 0xFF
                expected.append(not (name in checked or version_nibble or unknown_op
                                     or reserved_flag))
    frame_filter = FrameFilter(SWITCH, ME, job=7, run=42)
    many = np.frombuffer(good * 300, np.uint8).reshape(300, P.FRAME_LEN)
    assert frame_filter.accept(frames_from_bytes(good * 300), many, Counter()).all()
    rejected = Counter()
    ok = [bool(frame_filter.accept(frames_from_bytes(row),
                                   np.frombuffer(row, np.uint8).reshape(1, -1), rejected)[0])
          for row in rows]  # one by one: a batch of one is accepted or refused whole
    assert ok == expected
    assert sum(rejected.values()) == expected.count(False)


# -- forged results (defect 1) -------------------------------------------------------------------

def two_calls_with_a_pause(comm, arg):
    """allreduce_int, then wait (while the test sends forged frames), then allreduce_int again;
    returns both results and the stats of the second call."""
    value, done_first, go_on = arg
    first = comm.allreduce_int(np.full(512, value, np.int32))
    done_first.set()
    assert go_on.wait(60)
    second = comm.allreduce_int(np.full(512, value, np.int32))
    stats = comm.last_stats
    comm.close()
    return first, second, stats


@pytest.mark.parametrize("forgery, shards", [("broadcast-udp", 1), ("switch-source", 1),
                                             ("unicast-ethertype", 1), ("unicast-ethertype", 2)])
def test_forged_results_never_reach_a_worker(tmp_path, forgery, shards):
    """The forger sits on port 3 (job 2's worker) and sends job 1 RESULTs for the chunks of job
    1's second call: broadcast to a UDP port that is not the protocol's, from its own address or
    from the switch's, or unicast to worker 0 with another EtherType. Version 1 handed such
    frames to the transport, which returned 12345."""
    mp = multiprocessing.get_context("spawn")
    events = {w: (mp.Event(), mp.Event()) for w in range(3)}
    jobs = [local_job(1, 2), local_job(2, 1, first_port=3)]
    with LocalCluster(jobs, tmp_path) as cluster:
        args = {1: [(1, *events[0]), (2, *events[1])], 2: [(5, *events[2])]}
        group = cluster.start_workers(two_calls_with_a_pause, args, shards=shards)
        for first, _ in events.values():
            assert first.wait(60)
        before = received(cluster)
        w0, forger = jobs[0].workers[0], jobs[1].workers[0]
        source = SWITCH if forgery == "switch-source" else Endpoint(forger.mac, forger.ip,
                                                                    forger.udp_port)
        for chunk in range(8, 16):
            forged = bytearray(encode_frame(Frame(
                source, Endpoint("ff:ff:ff:ff:ff:ff", w0.ip, 9999),
                Header(op=P.Op.RESULT, job=1, slot=chunk % 4, chunk=chunk, bitmap=3, count=2,
                       flags=(chunk // 4) % 2),
                np.full(P.LANES, 12345, np.int32))))
            if forgery == "unicast-ethertype":
                forged[0:6] = bytes.fromhex(w0.mac.replace(":", ""))
                forged[12:14] = b"\x88\xb5"
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.sendto(bytes(forged), cluster.switch.udp_ports[3])
        # the switch has handled all eight before the calls resume (it handles frames in
        # order: whatever it forwards reaches worker 0 before the second call's results)
        wait_for(lambda: received(cluster) == before + 8, "the switch took the forged frames")
        for _, go_on in events.values():
            go_on.set()
        results = group.join(120)
        counters = cluster.controller.counters()
    for w in (0, 1):
        first, second, _ = results[(1, w)]
        np.testing.assert_array_equal(first, np.full(512, 3, np.int32))
        np.testing.assert_array_equal(second, np.full(512, 3, np.int32))
    if forgery == "broadcast-udp":
        assert counters["ingress"]["drops"]["NO_FLOOD"] == 8  # the switch refuses to flood it
    elif forgery == "switch-source":
        assert counters["ingress"]["drops"]["SPOOFED"] == 8
    else:
        stats = results[(1, 0)][2]
        assert stats.rejected["not_sa_atp"] == 8  # forwarded to worker 0, refused there
        # (by whichever of its shards got each)


def received(cluster) -> int:
    """Frames of no job the switch has received, dropped or forwarded."""
    counts = cluster.controller.counters()["ingress"]
    return sum(counts["packets"].values())


# -- runs (defect 2) ------------------------------------------------------------------------------

def sum_ints(comm, arg):
    value, elements = arg
    out = comm.allreduce_int(np.full(elements, value, np.int32))
    comm.close()
    return out


@pytest.mark.parametrize("slots, elements, shards", [(4, 256, 1), (8, 40 * P.LANES, 1),
                                                   (8, 40 * P.LANES, 2)])
def test_a_new_run_of_a_job_gets_its_own_sums(tmp_path, slots, elements, shards):
    """Two runs of one job, one after the other, with no reset in between. Version 1 returned
    the first run's sums to the second (4 chunks), or livelocked on STALE (40 chunks)."""
    with LocalCluster([local_job(1, 2, slots=slots)], tmp_path) as cluster:
        first = cluster.run_workers(sum_ints, {1: [(1, elements), (2, elements)]}, timeout=120,
                                    shards=shards)
        second = cluster.run_workers(sum_ints, {1: [(10, elements), (20, elements)]},
                                     timeout=120, shards=shards)
    for w in (0, 1):
        np.testing.assert_array_equal(first[(1, w)], np.full(elements, 3, np.int32))
        np.testing.assert_array_equal(second[(1, w)], np.full(elements, 30, np.int32))


def test_a_worker_of_an_older_run_fails_clearly(tmp_path):
    """A run that starts after a newer one (a left-over worker) is refused by the switch with
    BOUNCE(OLD_RUN) and fails with that error, without disturbing the newer run's state."""
    elements = 8 * P.LANES
    with LocalCluster([local_job(1, 2, slots=8)], tmp_path) as cluster:
        newer = new_run_id()
        cluster.run_workers(sum_ints, {1: [(1, elements), (2, elements)]}, run=newer)
        with pytest.raises(WorkerFailed, match="newer run of this job"):   # not a time-out
            cluster.run_workers(sum_ints, {1: [(1, elements), (2, elements)]}, run=newer - 1,
                                timeout=60)
        again = cluster.run_workers(sum_ints, {1: [(4, elements), (5, elements)]},
                                    run=newer + 1)
    np.testing.assert_array_equal(again[(1, 0)], np.full(elements, 9, np.int32))


# -- faults -------------------------------------------------------------------------------------

HELD_CALL = 2  # the call in flight when the switch restarts


def calls_across_a_restart(comm, arg):
    """Four float calls, the results and statistics of each; worker 2 (``hold``: where it says
    which chunk its call starts at, and the event it waits for) starts call HELD_CALL only when
    the test lets it: the switch restarts while its peers wait for it in that call."""
    seed, hold, elements = arg
    out = []
    for call in range(4):
        if hold is not None and call == HELD_CALL:
            hold[0].put(comm.next_chunk)
            assert hold[1].wait(300)
        x = np.random.default_rng((seed, comm.config.worker, call)).standard_normal(
            elements).astype(np.float32)
        out.append((comm.allreduce(x, tag="g"), comm.last_stats))
    comm.close()
    return out


def test_a_call_in_flight_when_the_switch_restarts_completes_through_it(tmp_path):
    """The switch process restarts (state lost) while workers 0 and 1 wait in a call for worker
    2, their contributions in the switch; the controller's reconcile restores the job, and
    worker 2 goes on. The call completes through the new switch: workers 0 and 1 send again
    what it lacks. Every call's result is the allreduce of that call's inputs, none lost and
    none applied twice."""
    n, elements = 3, 50_000
    mp = multiprocessing.get_context("spawn")
    hold = (mp.Queue(), mp.Event())
    with LocalCluster([local_job(1, n, slots=16)], tmp_path) as cluster:
        group = cluster.start_workers(
            calls_across_a_restart,
            {1: [(7, hold if w == 2 else None, elements) for w in range(n)]},
            silence_timeout=300.0, stall_timeout=300.0)   # longer than any restart
        start = hold[0].get(timeout=300)
        wait_for(lambda: any(s.chunk >= start and s.bitmap == 0b011
                             for s in aggregators(cluster, 1)),
                 "workers 0 and 1's contributions to the held call in the switch", poll=0.05)
        cluster.switch.restart()
        cluster.controller.connect()
        assert cluster.controller.reconcile()["pipeline"] == 1  # it came back empty
        hold[1].set()
        results = group.join(300)
    reference = AllreduceReference(n)
    for call in range(4):
        xs = [np.random.default_rng((7, v, call)).standard_normal(elements).astype(np.float32)
              for v in range(n)]
        want = reference(xs)
        for w in range(n):
            got, stats = results[(1, w)][call]
            np.testing.assert_array_equal(got, want, err_msg=f"worker {w}, call {call}")
            assert stats.results == stats.chunks
    for w in (0, 1):
        assert results[(1, w)][HELD_CALL][1].retransmissions > 0


def second_call_timed(comm, arg):
    """Two calls; worker 2 sets ``in_call`` once its second call is under way, and is killed
    there by the test. The others report how their second call ended, and when."""
    elements, in_call = arg
    comm.allreduce_int(np.ones(elements, np.int32))
    if comm.config.worker == 2:
        comm.allreduce_int_async(np.ones(elements, np.int32))
        in_call.set()
        time.sleep(600)
    started = time.monotonic()
    try:
        comm.allreduce_int(np.ones(elements, np.int32))
    except SwitchSilent as exc:
        return str(exc), time.monotonic() - started
    return "completed", time.monotonic() - started


def test_a_worker_killed_mid_call_makes_the_others_fail_within_the_stall_bound(tmp_path):
    """Without a fallback group a call the switch can never complete fails once no chunk has
    completed for stall_timeout, although the switch keeps answering (PENDING)."""
    elements, stall = 64 * P.LANES, 3.0
    in_call = multiprocessing.get_context("spawn").Event()
    with LocalCluster([local_job(1, 3, slots=8)], tmp_path) as cluster:
        group = cluster.start_workers(second_call_timed, {1: [(elements, in_call)] * 3},
                                      stall_timeout=stall)
        assert in_call.wait(60)
        dict(group.procs)[(1, 2)].kill()
        results = {}
        while len(results) < 2:
            key, ok, value = group.results.get(timeout=60)
            assert ok, value
            results[key] = value
        group.kill()
    for w in (0, 1):
        message, elapsed = results[(1, w)]
        assert "no chunk completed" in message   # the stall bound ended it (within the 60 s
        assert elapsed >= stall                  # the test waits), not the silence bound

"""SA-ATP (DESIGN.md §4): straggler detection, slot takeover through the embedded switch with
exact sums under loss and with a lossy or slow helper, and compute help that leaves the
global-batch gradient unchanged."""

import multiprocessing
import sys
import warnings

import numpy as np
import pytest
import torch

from experiments import digits
from host_lib.communicator import SWITCH_INTERVAL_S
from host_lib.engine.quantize import num_blocks
from host_lib.engine.rounds import RoundPlan
from host_lib.scheduling.policies.base import StepHistory
from host_lib.scheduling.policies.detection import StragglerDetector, _nanmedian
from host_lib.scheduling.policies.sa_atp import SaAtp
from host_lib.scheduling.sampling import split
from protocol import constants as P
from tests.quant_reference import AllreduceReference
from tests.switch_state import aggregators, wait_for
from topologies.local import LocalCluster, local_job

# -- detection on synthetic traces -------------------------------------------------------------


def trace(iterations: int, slowdown, jitter: float = 0.05, seed: int = 0, n: int = 4,
          batch: int = 32) -> list[np.ndarray]:
    """Per-iteration compute times: t = 22 ms * slowdown(it, worker) * lognormal jitter."""
    rng = np.random.default_rng(seed)
    return [np.array([0.022 * slowdown(it, w) for w in range(n)])
            * np.exp(rng.normal(0, jitter, n)) for it in range(iterations)]


def replay(times, batch: int = 32):
    """Run the detector over a trace; per iteration, the detection after seeing it."""
    history, detector, out = StepHistory(len(times[0])), StragglerDetector(), []
    for t in times:
        history.add(t, [batch] * len(t))
        out.append(detector.assess(history))
    return out


@pytest.mark.parametrize("jitter", [0.02, 0.05, 0.10])
def test_no_straggler_means_almost_no_false_positives(jitter):
    detections = replay(trace(300, lambda it, w: 1.0, jitter=jitter, seed=int(jitter * 100)))
    flagged = sum(len(d.flagged) for d in detections)
    rate = flagged / (300 * 4)
    print(f"jitter {jitter}: false-positive rate {rate:.4f}")
    assert rate < 0.005
    assert not any(d.persistent for d in detections)


@pytest.mark.parametrize("factor", [1.5, 2.0, 3.0])
def test_an_injected_straggler_is_caught_at_once_and_becomes_persistent(factor):
    onset = 50
    detections = replay(trace(80, lambda it, w: factor if (w == 3 and it >= onset) else 1.0))
    first = next(i for i, d in enumerate(detections) if 3 in d.flagged)
    persistent = next(i for i, d in enumerate(detections) if 3 in d.persistent)
    print(f"{factor}x: flagged after {first - onset + 1} iteration(s), persistent after "
          f"{persistent - onset + 1}")
    assert first == onset  # detection latency: the very iteration it first shows
    assert persistent <= onset + 3
    assert all(d.flagged <= {3} for d in detections)
    assert detections[-1].slowness[3] == pytest.approx(factor, rel=0.2)


def test_a_one_off_slowdown_is_transient_not_persistent():
    detections = replay(trace(40, lambda it, w: 3.0 if (w == 1 and it in (20, 21)) else 1.0))
    assert detections[20].transient == {1} and detections[21].transient == {1}
    assert not any(d.persistent for d in detections)
    assert not detections[25].flagged


def test_the_threshold_follows_normal_jitter():
    calm = replay(trace(60, lambda it, w: 1.0, jitter=0.02))[-1]
    noisy = replay(trace(60, lambda it, w: 1.0, jitter=0.15))[-1]
    assert calm.threshold == pytest.approx(np.log(1.25))  # the floor
    assert noisy.threshold > calm.threshold


def test_unequal_gpus_do_not_raise_the_bar():
    """Three speed classes (BOA's testbed): the spread between classes is not jitter, so the
    slowest class is caught as persistent while jitter alone keeps the threshold at the floor
    (the middle class, 1.6 / 1.3 = 1.23x the median, sits at the floor and may be flagged)."""
    classes = [1.0, 1.0, 1.6, 2.5]
    detections = replay(trace(30, lambda it, w: classes[w], jitter=0.03))
    assert all(d.threshold == pytest.approx(np.log(1.25)) for d in detections)
    assert all(3 in d.persistent for d in detections[3:])
    assert not any(d.flagged & {0, 1} for d in detections)


# -- compute help -----------------------------------------------------------------------------


@pytest.mark.parametrize("factor", [2.0, 3.0])
def test_compute_help_equalises_compute_times(factor):
    """With step times t_i(b) = s_i (a b + c) (the H100 ResNet-50 fit), the plans converge to
    shares whose times are within 10 % of each other, matching the min-max optimum."""
    a, c, batch, n = 0.000367, 0.0104, 256, 4
    speed = np.array([1.0, 1.0, 1.0, factor])
    policy, history = SaAtp(n, batch), StepHistory(n)
    for it in range(40):
        plan = policy.plan(it, history)
        b = np.array(plan.shares)
        history.add(speed * (a * b + c), b)
    assert sum(plan.shares) == batch and plan.contributors == 0b1111
    t = speed * (a * b + c)
    assert t.max() / t.min() < 1.1
    optimum = min(max(speed * (a * np.array([x, x, x, batch - 3 * x]) + c))
                  for x in range(batch // 3 + 1) if batch - 3 * x >= 1)
    assert t.max() <= 1.05 * optimum


def test_compute_help_keeps_the_global_batch_gradient():
    """Sum over unequal shares of per-worker gradient sums, divided by B, equals the
    gradient of the mean loss over the whole global batch."""
    xtr, ytr, _, _ = digits.load()
    batch = np.arange(96)
    shares = [30, 30, 30, 6]

    def grads(idx) -> torch.Tensor:
        net = digits.model(0)
        loss = torch.nn.functional.cross_entropy(net(xtr[idx]), ytr[idx], reduction="sum")
        loss.backward()
        return torch.cat([p.grad.reshape(-1) for p in net.parameters()])

    total = sum(grads(part) for part in split(batch, shares)) / len(batch)
    full = digits.model(0)
    torch.nn.functional.cross_entropy(full(xtr[batch]), ytr[batch]).backward()
    reference = torch.cat([p.grad.reshape(-1) for p in full.parameters()])
    torch.testing.assert_close(total, reference, rtol=1e-5, atol=1e-6)


# -- slot takeover through the switch -----------------------------------------------------------
# The straggler (worker 3) is held back before each call until the switch shows what the test
# is about (a chunk of the call taken over, by the helper the test names): a late straggler by
# construction, whatever the machine's load.

def inputs(worker: int, call: int, n: int) -> np.ndarray:
    return (np.random.default_rng((worker, call)).standard_normal(n) * 0.1).astype(np.float32)


def straggling_calls(comm, arg):
    """Three calls; a held worker (``gate``: where it says which chunk its call starts at, and
    one event per call) starts each one only once the test lets it; some workers are slow to act
    on their helper duty (a longer takeover timer than the others'); ``host_share`` of each
    call's chunks may be summed on the helpers' hosts."""
    elements, helpers, stragglers, takeover_after, gate, host_share = arg
    plan = RoundPlan(helpers=helpers, stragglers=frozenset(stragglers),
                     takeover_after=takeover_after.get(comm.config.worker, 0.01),
                     host_share=host_share)
    results, stats = [], []
    for call in range(3):
        if gate is not None:
            starts, go = gate
            starts.put(comm.next_chunk)
            assert go[call].wait(600)
        results.append(comm.allreduce(inputs(comm.config.worker, call, elements), tag="t",
                                     plan=plan))
        stats.append(comm.last_stats)
    comm.close(linger=1.0)
    return results, stats


def taken_over(by=None, designated=None):
    """A gate's condition: a chunk of the call the switch holds TAKEN, by helper ``by`` and
    designated (chunk modulo three helpers) to ``designated``, where given."""
    def check(state, start: int) -> bool:
        return (state.state == P.SlotState.TAKEN and state.chunk >= start
                and by in (None, state.helper) and designated in (None, state.chunk % 3))
    return check


def all_seen(conditions, start: int):
    """A gate: every condition holds for some aggregator of the job."""
    return lambda states: all(any(c(s, start) for s in states) for c in conditions)


def run_takeover(tmp_path, n=4, elements=5_000, held=3, until=None, helpers=(0, 1, 2),
                 stragglers=(3,), loss=0.0, impairment=None, takeover_after=None,
                 host_share=0.0, **comm_options):
    """Three calls of ``n`` workers, worker ``held`` (if any) held back each time until every
    condition of ``until`` (default: a chunk taken over) holds on the switch; the exact sums
    checked, the workers' call statistics returned. 5000 elements: 79 chunks a call, more than
    twice round the 16 slots of both shadow sets."""
    until = until or [taken_over()]
    mp = multiprocessing.get_context("spawn")
    gate = (mp.Queue(), [mp.Event() for _ in range(3)])
    comm_options = {"stall_timeout": 600.0} | comm_options
    with LocalCluster([local_job(1, n, slots=16)], tmp_path) as cluster:
        if loss:
            cluster.controller.set_loss(loss)
            cluster.controller.set_loss(loss, direction="egress")
        group = cluster.start_workers(
            straggling_calls,
            {1: [(elements, helpers, stragglers, takeover_after or {},
                  gate if w == held else None, host_share) for w in range(n)]},
            impairment=impairment, **comm_options)
        for call in range(3 if held is not None else 0):
            seen = all_seen(until, gate[0].get(timeout=300))
            wait_for(lambda: seen(aggregators(cluster, 1)),  # noqa: B023 - used at once
                     f"call {call}: chunks taken over as the test needs", poll=0.05)
            gate[1][call].set()
        results = group.join(300)
    stats = {w: results[(1, w)][1] for w in range(n)}
    reference = AllreduceReference(n)
    want = [reference([inputs(w, c, elements) for w in range(n)]) for c in range(3)]
    floats = [np.sum([inputs(w, c, elements).astype(np.float64) for w in range(n)], axis=0)
              for c in range(3)]
    for w in range(n):
        for c in range(3):
            got = results[(1, w)][0][c]
            if stats[w][c].fallback is None:
                np.testing.assert_array_equal(got, want[c], err_msg=f"worker {w}, call {c}")
            else:  # gloo's float32 sum of the raw inputs, the same on every worker
                np.testing.assert_allclose(got, floats[c], rtol=1e-6, atol=1e-6)
                np.testing.assert_array_equal(got, results[(1, 0)][0][c])
    return stats


@pytest.mark.parametrize("loss, shards", [(0.0, 1), (0.01, 1), (0.05, 1), (0.01, 2)])
def test_takeover_gives_exact_sums_to_every_worker_under_loss(tmp_path, loss, shards):
    """... and with each worker's calls split over two shards: a chunk's helper duty, and a
    straggler's contribution to it, belong to the shard of its slot."""
    stats = run_takeover(tmp_path, loss=loss, shards=shards)
    leaders = [s for w in (0, 1, 2) for s in stats[w]]
    assert sum(s.takeovers for s in leaders) > 0
    assert sum(s.helper_results for s in leaders) > 0
    assert sum(s.helper_data for s in stats[3]) > 0  # the straggler sent straight to helpers
    assert all(s.fallback is None for w in stats for s in stats[w])


def test_takeover_survives_a_helper_that_loses_a_fifth_of_its_packets(tmp_path):
    """A round trip to worker 1 fails one time in three: it gets longer before it calls the
    switch dead. Its losses back its round-trip timer off, and a helper waits at least twice
    that timer before it takes a chunk, so the next helper in duty order would take every
    chunk designated to 1 first: workers 0 and 2 never take over here, and worker 1 takes the
    chunks designated to it and, second in duty order, those designated to 0."""
    stats = run_takeover(tmp_path, impairment={1: {"drop": 0.2, "seed": 5}},
                         takeover_after={0: 3600.0, 2: 3600.0},
                         until=[taken_over(by=1)], silence_timeout=20.0)
    assert sum(s.helper_results for s in stats[1]) > 0


def test_a_slow_helper_is_replaced_by_the_next_one(tmp_path):
    """Worker 1 would act on its helper duty only long after the straggler arrives: the next
    helper in duty order (worker 2) takes over the chunks whose designated helper is 1 on top of
    its own. The straggler waits, each call, until the switch holds a chunk designated to worker
    1 taken over by worker 2, and one of worker 0's own taken by it; the sums stay exact."""
    stats = run_takeover(tmp_path, takeover_after={1: 3600.0},
                         until=[taken_over(by=2, designated=1), taken_over(by=0, designated=0)])
    completed = {w: sum(s.helper_results for s in stats[w]) for w in (0, 1, 2)}
    print(f"helper results per worker: {completed}")
    assert completed[1] == 0
    assert completed[0] > 0 and completed[2] > 0


def test_an_undetected_straggler_among_the_helpers(tmp_path):
    """Everyone is a helper and no straggler is known yet (a transient one): chunks whose
    designated helper is the straggler itself are taken by the next helper."""
    stats = run_takeover(tmp_path, helpers=(0, 1, 2, 3), stragglers=())
    assert sum(s.takeovers for w in (0, 1, 2) for s in stats[w]) > 0


@pytest.mark.parametrize("loss,impairment", [(0.0, None), (0.01, None), (0.05, None),
                                             (0.0, {"duplicate": 0.1, "reorder": 0.1,
                                                    "seed": 3})],
                         ids=["clean", "1%", "5%", "duplicated-reordered"])
def test_chunks_summed_on_hosts_are_exact(tmp_path, loss, impairment):
    """Three quarters of each call's chunks summed on the helpers' hosts (docs/protocol.md
    §7.3), a straggler late to every call, loss on the switch's ports, or every link
    duplicating and reordering: every worker gets the exact sum, the helpers summed chunks and
    the straggler sent its contributions straight to them."""
    stats = run_takeover(tmp_path, loss=loss, impairment=impairment, host_share=0.75)
    hosted = {w: sum(s.host_chunks for s in stats[w]) for w in stats}
    assert len(set(hosted.values())) == 1 and hosted[0] == 3 * int(0.75 * num_blocks(5_000))
    assert sum(s.helper_results for w in (0, 1, 2) for s in stats[w]) >= hosted[0]
    assert sum(s.helper_data for s in stats[3]) >= hosted[0]
    assert all(s.fallback is None for w in stats for s in stats[w])


def test_a_helper_whose_link_dies_leaves_exact_sums_through_the_fallback(tmp_path):
    """Worker 1, a helper of chunks summed on hosts, loses every frame from the first call on:
    no chunk it helps with completes, and every worker completes every call through the gloo
    fallback instead, with the exact sum."""
    stats = run_takeover(tmp_path, host_share=0.5, held=None, impairment={1: {"drop": 1.0}},
                         distributed=True, silence_timeout=2.0, stall_timeout=4.0)
    assert all(s.fallback is not None for w in stats for s in stats[w])


RING_PLANS = (True, False, True)  # per call: through the hosts' ring, or the switch


def ring_calls(comm, elements):
    """Three calls, the first and the last through the ring (RoundPlan.ring), the last a mean;
    and the interpreter's switch interval as the communicator left it."""
    n = comm.config.n_workers
    out = [sys.getswitchinterval()]
    for call, ring in enumerate(RING_PLANS):
        weights = [1.0] * n if call == 2 else None
        result = comm.allreduce(inputs(comm.config.worker, call, elements), weights, tag="t",
                                plan=RoundPlan(ring=ring))
        out.append((result, comm.last_stats))
    comm.close(linger=0.5)
    return out


@pytest.mark.parametrize("fallback", [True, False], ids=["gloo", "no-fallback-group"])
def test_calls_the_plan_sends_through_the_ring(tmp_path, fallback):
    """With the job's gloo group, a call planned ``ring`` sends nothing to the switch and every
    worker gets gloo's sum of the raw inputs (the mean, with weights); the call between them
    goes through the switch with the exact quantized sum. Without a fallback group the plan's
    ring cannot be followed: every call goes through the switch, exact. Each worker's
    communicator lowered the interpreter's switch interval (communicator.SWITCH_INTERVAL_S)."""
    n, elements = 3, 5_000
    with LocalCluster([local_job(1, n, slots=16)], tmp_path) as cluster:
        results = cluster.run_workers(ring_calls, {1: [elements] * n}, distributed=fallback)
    # a worker process starts at CPython's 5 ms; its communicator's I/O thread needs less
    assert all(results[(1, w)].pop(0) == SWITCH_INTERVAL_S for w in range(n))
    reference = AllreduceReference(n)
    for call, ring in enumerate(RING_PLANS):
        raw = [inputs(w, call, elements) for w in range(n)]
        floats = np.sum([x.astype(np.float64) for x in raw], axis=0) / (n if call == 2 else 1)
        exact = None if ring and fallback else reference(raw, average=call == 2)
        for w in range(n):
            got, stats = results[(1, w)][call]
            assert stats.ring == (ring and fallback)
            if stats.ring:
                assert stats.packets_sent == 0 and stats.fallback is None
                np.testing.assert_allclose(got, floats, rtol=1e-5, atol=1e-6)
                np.testing.assert_array_equal(got, results[(1, 0)][call][0])
            else:
                assert stats.packets_sent > 0
                np.testing.assert_array_equal(got, exact)


@pytest.mark.parametrize("seed", range(5))
def test_the_detectors_median_ignores_nan_as_numpys_does(seed):
    rng = np.random.default_rng(seed)
    for _ in range(200):
        x = rng.standard_normal((int(rng.integers(1, 9)), int(rng.integers(1, 6))))
        x[rng.random(x.shape) < 0.3] = np.nan
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # numpy warns on all-NaN columns
            for axis in (0, 1):
                np.testing.assert_array_equal(_nanmedian(x, axis), np.nanmedian(x, axis=axis))
            np.testing.assert_array_equal(_nanmedian(x.ravel()), np.nanmedian(x))

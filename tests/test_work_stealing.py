"""Work stealing (host_lib/scheduling/work_stealing.py): every micro-batch of every share is
computed exactly once, by its owner from the head or by a thief from the tail, under contention
and in every straggler scenario; and a training run with it gives the single-process reference's
model."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter

import numpy as np
import pytest
import torch
import torch.distributed as dist

from experiments import digits
from experiments.launch import run_training
from experiments.stragglers import SlowdownSchedule
from host_lib.scheduling.sampling import GlobalBatchSampler, split
from host_lib.scheduling.stealing_model import ShareClaims, schedule
from host_lib.scheduling.work_stealing import (
    Expectation,
    WorkStealing,
    micro_batches,
    progress,
    reserve_now,
    slow_prior,
    worth_taking,
)


def test_micro_batches_cut_a_share_in_order():
    share = np.arange(10, 20)
    assert [m.tolist() for m in micro_batches(share, 3)] == [[10, 11, 12, 13], [14, 15, 16],
                                                           [17, 18, 19]]
    assert [m.tolist() for m in micro_batches(share[:2], 3)] == [[10], [11]]
    assert micro_batches(share[:0], 4) == []
    with pytest.raises(ValueError):
        WorkStealing(dist.HashStore(), 0, 2, 0)


def test_the_owner_stops_at_the_first_micro_batch_a_thief_took():
    store = dist.HashStore()
    shares = [np.arange(16), np.arange(16, 20)]  # 8 micro-batches of 2, and 4 of 1
    # The plan expected the owner to compute a sample per nanosecond: it is behind at once.
    expected = Expectation(per_sample_s=(1e-9, 1e-9))
    owner = WorkStealing(store, 0, 2, 8).iteration(0, shares, expected=expected)
    thief = WorkStealing(store, 1, 2, 8).iteration(0, shares, per_sample_s=lambda: 1e-9,
                                                   expected=expected)
    first = next(owner)
    own = [next(thief) for _ in range(3)]  # its last one it reserves for its pass
    stolen = [next(thief), next(thief)]
    rest = list(owner)
    assert (first.owner, first.index) == (0, 0)
    assert [(m.owner, m.index, m.reserved) for m in own] == [(1, 0, False), (1, 1, False),
                                                            (1, 2, False)]
    assert [(m.owner, m.index) for m in stolen] == [(0, 7), (0, 6)]
    assert [(m.index, m.reserved) for m in rest] == [(1, False), (2, False), (3, False),
                                                     (4, False), (5, True)]
    assert [(m.owner, m.index, m.reserved) for m in thief] == [(1, 3, True)]  # nothing left
    got = np.concatenate([m.samples for m in [first, *own, *stolen, *rest]] + [shares[1][3:]])
    assert sorted(got.tolist()) == list(range(20))


def test_a_worker_reserves_what_its_pass_through_ddp_needs():
    """With ``keep_s`` the owner claims, once what it has left of its own would take no longer
    than that at its measured speed, all of it at once; a worker without a share of its own
    (it has not paid the step's fixed cost) steals nothing."""
    store = dist.HashStore()
    shares = [np.arange(32), np.arange(32, 32), np.arange(32, 32)]
    speed = {"per_sample_s": None}
    owner = WorkStealing(store, 0, 3, 8).iteration(
        0, shares, keep_s=0.016, per_sample_s=lambda: speed["per_sample_s"])
    assert [m.index for m in [next(owner), next(owner)]] == [0, 1]  # speed unknown: none yet
    speed["per_sample_s"] = 0.001  # 4 samples a micro-batch: 12 ms after the next one
    assert [m.index for m in [next(owner), next(owner)]] == [2, 3]
    idle = WorkStealing(store, 2, 3, 8).iteration(0, shares)
    assert list(idle) == []
    assert [(m.owner, m.index, m.reserved) for m in owner] == [(0, 4, True), (0, 5, True),
                                                              (0, 6, True), (0, 7, True)]


def test_a_reserve_that_meets_a_thief_keeps_only_what_the_thief_left():
    store = dist.HashStore()
    shares = [np.arange(16), np.arange(16, 16)]
    speed = {"per_sample_s": None}
    owner = WorkStealing(store, 0, 2, 8).iteration(0, shares, keep_s=1.0,
                                                   per_sample_s=lambda: speed["per_sample_s"])
    first = next(owner)
    speed["per_sample_s"] = 0.001  # known from here on: the owner reserves the rest next
    store.add(f"{WorkStealing(store, 1, 2, 8).prefix}/0/0", (1 << 20) * 2)  # two thieves took
    rest = list(owner)
    assert (first.index, first.reserved) == (0, False)
    assert [(m.index, m.reserved) for m in rest] == [(i, True) for i in range(1, 6)]


def test_reserve_and_stealing_rules():
    assert reserve_now([4], None, 0.0)  # the last one is always its own
    assert not reserve_now([], 0.001, 1.0)
    assert not reserve_now([4, 4], None, 1.0)  # speed unknown
    assert reserve_now([4, 4], 0.001, 0.0041)  # the pass lasts 8 ms: at least keep_s
    assert not reserve_now([4, 4], 0.001, 0.004)  # 4 ms after this one: it computes one more
    assert slow_prior((1.0, 1.0, 1.6), 2) == 1.6 and slow_prior((1.0, 1.0, 1.4), 2) is None
    assert slow_prior(None, 0) is None
    left = [np.array([4, 4, 4]), np.array([4, 4]), np.array([4])]
    # 30 ms into the iteration; the plan expected 1 ms per effective sample of owners 0 and 1
    # (30 of them by now), 3 ms of owner 2; the thief computes at 1 ms per sample
    plan = Expectation((1e-3, 1e-3, 3e-3), kappa=2.0)
    owners = [0, 1, 2]
    # owner 0 did 6 (5x behind: 12 samples at 5 ms = 60 ms to go), owner 1 did 10 (3x: 24 ms)
    assert worth_taking(left, [6.0, 10.0, 2.0], plan, owners, 0.030, 0.010, 1e-3) == 0
    assert worth_taking(left, [6.0, 10.0, 2.0], plan, owners, 0.030, 0.057, 1e-3) is None
    assert worth_taking(left, [6.0, 10.0, 2.0], plan, owners, 0.030, 0.0559, 1e-3) == 0
    # on schedule (at least 1 / BEHIND of what was expected), nobody is taken from
    assert worth_taking(left, [20.0, 25.0, 2.0], plan, owners, 0.030, 0.0, 1e-3) is None
    # owner 2 is slow as expected; its one micro-batch left is not worth taking anyway
    assert worth_taking(left[2:], [2.0], plan, [2], 0.030, 0.0, 1e-3) is None
    assert progress(np.array([4, 4, 4]), 0, 2.0) == 0.0
    assert progress(np.array([4, 4, 4]), 1, 2.0) == 3.0  # half of the first, fixed cost too
    assert progress(np.array([4, 4, 4]), 2, 2.0) == 8.0


SCENARIOS = {
    "none": SlowdownSchedule(),
    "static-3x": SlowdownSchedule(static={3: 3.0}),
    "transient": SlowdownSchedule(transient_prob=0.3, transient_len=2, seed=1),
    "heterogeneous": SlowdownSchedule(static={2: 1.6, 3: 2.5}),
}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_every_sample_is_computed_exactly_once_under_contention(scenario):
    """Four threads, each sleeping its slowdown times a per-sample time per micro-batch, share
    one store for twelve iterations; a barrier stands for the allreduce. At static 3x, in the
    iterations with even shares, the straggler waits after its first micro-batch until a thief
    has taken one of its own (it is three times slower: by construction, not by the clock)."""
    world, batch, pieces, iterations = 4, 96, 8, 12
    schedule, sampler = SCENARIOS[scenario], GlobalBatchSampler(1000, batch, seed=3)
    shares_of = [[24, 24, 24, 24], [30, 30, 30, 6], [20, 30, 40, 6]]
    store, barrier = dist.HashStore(), threading.Barrier(world)
    done: list[list[tuple[int, int, int, list[int]]]] = [[] for _ in range(world)]
    robbed = [threading.Event() for _ in range(iterations)]   # worker 3's, per iteration
    errors = []

    def worker(rank):
        try:
            stealing = WorkStealing(store, rank, world, pieces)
            # every worker is expected to compute at the unslowed speed (the plan's view)
            expected = Expectation(per_sample_s=(0.0005,) * world)
            for it in range(iterations):
                shares = split(sampler.batch(it), shares_of[it % 3])
                speed = 0.0005 * schedule.factor(rank, it)
                for mb in stealing.iteration(it, shares, per_sample_s=lambda s=speed: s,
                                             expected=expected):
                    time.sleep(0.0005 * len(mb.samples) * schedule.factor(rank, it))
                    done[rank].append((it, mb.owner, mb.index, mb.samples.tolist()))
                    if mb.owner == 3 != rank:
                        robbed[it].set()
                    if (scenario == "static-3x" and rank == mb.owner == 3 and it % 3 == 0
                            and mb.index == 0):
                        assert robbed[it].wait(30)
                barrier.wait(timeout=30)
        except Exception as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=worker, args=(r,)) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    records = [r for rank in done for r in rank]
    claims = Counter((it, owner, index) for it, owner, index, _ in records)
    assert max(claims.values()) == 1
    for it in range(iterations):
        got = sorted(s for i, _, _, samples in records if i == it for s in samples)
        assert got == sorted(sampler.batch(it).tolist())
    if scenario == "static-3x":  # its even shares are the ones it cannot finish in time
        stolen = {it for rank, rank_done in enumerate(done) for it, owner, _, _ in rank_done
                  if owner == 3 != rank}
        assert set(range(0, iterations, 3)) <= stolen


def reference_training(seed: int, batch: int, iterations: int, lr: float) -> dict:
    """The model experiments/train.py trains, trained by one process on the whole global batch
    (mean loss, SGD with momentum 0.9), independent of shares, micro-batches and workers."""
    xtr, ytr, _, _ = digits.load(seed)
    net = digits.model(seed)
    optimizer = torch.optim.SGD(net.parameters(), lr=lr, momentum=0.9)
    sampler = GlobalBatchSampler(len(xtr), batch, seed)
    for it in range(iterations):
        idx = sampler.batch(it)
        torch.nn.functional.cross_entropy(net(xtr[idx]), ytr[idx]).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return net.state_dict()


def max_difference(a: dict, b: dict) -> float:
    return max(float((a[k] - b[k]).abs().max()) for k in a)


@pytest.mark.parametrize("stragglers,transient,profile",
                         [("", 0.0, "resnet50"), ("3x@3", 0.0, "resnet50"),
                          ("", 0.5, "resnet50"), ("3x@3", 0.0, "")],
                         ids=["none", "static-3x", "transient", "static-3x-real-compute"])
def test_training_with_work_stealing_matches_the_single_process_reference(
        tmp_path, stragglers, transient, profile):
    """SA-ATP through the embedded switch, 4 workers, emulated resnet50 compute (the real
    gradient computed once per iteration) or real compute (each micro-batch when claimed): each
    iteration's micro-batches (from the rank logs) cover the global batch exactly once, some are
    stolen from a straggler, and the trained weights are the reference's to within the switch's
    fixed-point rounding, far closer than a run that lost one sample per iteration would be."""
    batch, iterations, lr = 64, 8, 0.1
    run_training(tmp_path, 4, "switch", [
        "--policy", "sa-atp", "--iterations", str(iterations), "--global-batch", str(batch),
        "--lr", str(lr), "--profile", profile, "--stragglers", stragglers,
        "--transient-prob", str(transient), "--eval-every", "1000", "--no-progress",
        "--save-model", str(tmp_path / "model.pt")], output=tmp_path / "torchrun.log",
        timeout=300)
    sampler = GlobalBatchSampler(len(digits.load(0)[0]), batch, 0)
    logs = [[json.loads(line) for line in open(tmp_path / f"rank{r}.jsonl")] for r in range(4)]
    pieces = 8  # experiments/train.py's micro-batches per share
    for it in range(iterations):
        records = [log[it] for log in logs]
        shares = split(sampler.batch(it), records[0]["shares"])
        every = {(o, i): m for o, share in enumerate(shares)
                 for i, m in enumerate(micro_batches(share, pieces))}
        claimed = Counter((o, i) for r in records for o, i in r["micro_batches"])
        assert set(claimed) == set(every) and max(claimed.values()) == 1
        assert sum(r["samples"] for r in records) == batch
    if stragglers and profile:  # a 3x straggler: the plans compute through claims
        # (how many micro-batches change hands depends on the split the cost model picks,
        # which may give the straggler nothing; the contention test above counts them)
        assert any(r["stole"] for r in logs[0])
    trained = torch.load(tmp_path / "model.pt")
    reference = reference_training(0, batch, iterations, lr)
    missing_one = reference_training_without_one_sample(batch, iterations, lr)
    error = max_difference(trained, reference)
    assert error < 1e-5
    assert max_difference(missing_one, reference) > 20 * max(error, 1e-7)


def test_two_jobs_on_one_switch_each_train_their_own_reference(tmp_path):
    """The harness's multi-job scenario: an SA-ATP job with a 3x straggler and a neighbour job
    (plain synchronous, another seed) train through one embedded switch at the same time, each
    with its own aggregators; each ends with the weights of its own single-process reference,
    so neither job's contributions ever entered the other's sums."""
    batch, iterations, lr = 64, 6, 0.1
    common = ["--iterations", str(iterations), "--global-batch", str(batch), "--lr", str(lr),
              "--profile", "resnet50", "--eval-every", "1000", "--no-progress"]
    run_training(tmp_path, 4, "switch", [
        "--policy", "sa-atp", "--stragglers", "3x@3", "--seed", "0",
        "--save-model", str(tmp_path / "model.pt"), *common], slots=8,
        output=tmp_path / "torchrun.log", timeout=300, neighbour_args=[
            "--policy", "synchronous", "--seed", "1",
            "--save-model", str(tmp_path / "neighbour" / "model.pt"), *common])
    for path, seed in ((tmp_path, 0), (tmp_path / "neighbour", 1)):
        assert len((path / "rank0.jsonl").read_text().splitlines()) == iterations
        trained = torch.load(path / "model.pt")
        assert max_difference(trained, reference_training(seed, batch, iterations, lr)) < 1e-5
    # the references differ, so the comparison can tell the jobs apart
    assert max_difference(reference_training(0, batch, iterations, lr),
                          reference_training(1, batch, iterations, lr)) > 1e-2


def reference_training_without_one_sample(batch: int, iterations: int, lr: float) -> dict:
    """The reference with the last sample of every global batch left out of the sum (still
    divided by the batch): what a lost micro-batch tail would train."""
    xtr, ytr, _, _ = digits.load(0)
    net = digits.model(0)
    optimizer = torch.optim.SGD(net.parameters(), lr=lr, momentum=0.9)
    sampler = GlobalBatchSampler(len(xtr), batch, 0)
    for it in range(iterations):
        idx = sampler.batch(it)[:-1]
        (torch.nn.functional.cross_entropy(net(xtr[idx]), ytr[idx], reduction="sum")
         / batch).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return net.state_dict()


@pytest.mark.parametrize("keep_s", [0.0, 0.012])
@pytest.mark.parametrize("slowness", [[1, 1, 1, 1], [1, 1, 1, 3], [1, 1, 1.6, 2.5],
                                      [1, 4, 1, 1]])
def test_the_modelled_schedule_claims_every_micro_batch_once_and_balances(slowness, keep_s):
    """host_lib.scheduling.stealing_model (the model of host_lib.scheduling.work_stealing that
    the cost model and the simulator replay): every (owner, index) once, each worker's pass
    through DDP is its reserve and ends its compute, and the compute ends within two
    micro-batches (and the late owner's pass) of the fluid bound (each worker pays the fixed
    cost once, then the remaining samples spread over the workers' per-sample rates)."""
    shares, pieces, fixed, per_sample = [64, 64, 64, 64], 8, 0.010, 0.00037
    slow = np.asarray(slowness, float)
    s = schedule(shares, pieces, fixed * slow, per_sample * slow, np.zeros(4), keep_s=keep_s)
    every = {(o, i) for o, share in enumerate(shares) for i in range(pieces)}
    claimed = Counter(mb for rank in s.done for mb in rank)
    assert set(claimed) == every and max(claimed.values()) == 1
    assert s.samples.sum() == sum(shares)
    # Fluid bound T: sum over workers of (T - fixed * s) / (per_sample * s) = all samples.
    rates = 1 / (per_sample * slow)
    bound = (sum(shares) + (rates * fixed * slow).sum()) / rates.sum()
    # A thief leaves a share's last micro-batch: its owner may end up to two of its own late.
    assert bound <= s.ends.max() <= bound + 2 * per_sample * 64 / pieces * slow.max()
    if slow.max() > 1:
        assert sum(o != r for r, rank in enumerate(s.done) for o, _ in rank) > 0
    if keep_s:  # the owners that were not taken from keep a pass of keep_s at least
        taken = {o for r, rank in enumerate(s.done) for o, _ in rank if o != r}
        fast = [w for w in range(4) if slow[w] == 1 and w not in taken]
        assert fast and all(s.pass_s[w] >= keep_s * 0.9 for w in fast)


@pytest.mark.parametrize("seed", range(4))
def test_the_models_look_at_every_share_picks_what_a_worker_picks(seed):
    """The model keeps every share's claims as arrays (stealing_model.ShareClaims); its pick must
    be the one a worker makes from the lists of unclaimed micro-batches it reads from the
    store (worth_taking), over random shares, claims, progress and plans."""
    rng = np.random.default_rng(seed)
    for _ in range(300):
        n, pieces = int(rng.integers(2, 10)), int(rng.integers(1, 9))
        cut = [[len(m) for m in micro_batches(np.arange(s), pieces)]
               for s in rng.integers(0, 80, n)]
        kappa = float(rng.choice([0.0, rng.uniform(0, 20)]))
        planned = None if rng.random() < 0.3 else rng.uniform(1e-4, 1e-3, n)
        shares = ShareClaims(cut, kappa, planned)
        for v, c in enumerate(cut):
            shares.head[v] = rng.integers(0, len(c) + 1)
            shares.tail[v] = rng.integers(0, len(c) - shares.head[v] + 1)
        thief = int(rng.integers(n))
        elapsed, reserved, per = (float(rng.uniform(0, 0.05)), float(rng.uniform(0, 0.01)),
                                  float(rng.uniform(1e-4, 1e-3)))
        others = [v for v in range(n) if v != thief]
        left = [np.array(cut[v][shares.head[v]:len(cut[v]) - shares.tail[v]]) for v in others]
        done = [progress(np.array(cut[v]), int(shares.head[v]), kappa) for v in others]
        expected = Expectation(None if planned is None else tuple(planned), kappa)
        pick = worth_taking(left, done, expected, others, elapsed, reserved, per)
        assert shares.pick(thief, elapsed, reserved, per) == (None if pick is None
                                                              else others[pick])

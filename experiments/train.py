"""Data-parallel training of the digits MLP with DDP, its gradients summed by gloo or by the
switch (the SA-ATP DDP comm hook), under a straggler policy. Run it under torchrun, one process
per worker:

    torchrun --nproc-per-node 4 -m experiments.train --comm switch --policy sa-atp \\
        --job-spec runs/demo/job.toml --udp-ports runs/demo/ports.json --log-dir runs/demo/sa

Every iteration, each worker asks the policy for the iteration's plan (computed identically on every
worker from the compute times all workers share through the torch.distributed store), computes the
gradient *sum* over its share of the global batch, and the aggregate is divided by the number of
samples it sums. host_lib's PolicyDriver applies the plans; this script adds the model, the data and
the emulated compute. Policies whose gradients may be delivered iterations after they were started
(Partial-Reduce) run in a second mode without DDP: a worker starts a gradient when its share is
non-zero, keeps computing while it sits iterations out, and delivers the gradient (scaled by its
staleness discount) when the plan makes it a contributor. Policies that steal work (SA-ATP) compute,
in the iterations their plan says so, the micro-batches :mod:`host_lib.scheduling.work_stealing`
hands out without synchronising, and end with the ones reserved for one pass through DDP, whose
backward runs the comm hook on the accumulated gradient.

Each rank writes one JSON line per iteration to ``<log-dir>/rank<r>.jsonl``; rank 0 shows a
progress bar.
"""

import argparse
import json
import math
import os
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from torch.distributed.distributed_c10d import _get_default_store
from torch.nn.parallel import DistributedDataParallel

from experiments import digits
from experiments.emulated_link import EmulatedLink
from experiments.stragglers import PROFILES, SlowdownSchedule, StepTimeProfile, pad_to
from host_lib.pytorch.ddp_hook import sa_atp_hook
from host_lib.scheduling.policies.base import IterationPlan
from host_lib.scheduling.policies.driver import PendingGradient, PolicyDriver
from host_lib.scheduling.policies.registry import POLICIES, make_policy
from host_lib.scheduling.sampling import GlobalBatchSampler
from host_lib.scheduling.work_stealing import micro_batch_sizes
from topologies import lifetime


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--comm", choices=["gloo", "switch"], default="switch")
    p.add_argument("--policy", choices=sorted(POLICIES), default="synchronous")
    p.add_argument("--job-spec", type=Path, help="job spec TOML (switch)")
    p.add_argument("--udp-ports", type=Path,
                   help="embedded switch's UDP port map (JSON written by softswitch-grpc)")
    p.add_argument("--interface", help="send raw frames on this interface instead (Mininet)")
    p.add_argument("--iterations", type=int, default=200)
    p.add_argument("--global-batch", type=int, default=128)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--eval-every", type=int, default=10)
    p.add_argument("--stragglers", default="", help="e.g. '3x@3': rank 3 three times slower")
    p.add_argument("--speed-classes", default="",
                   help="heterogeneous cluster, e.g. '1,1.6,2.5': ranks split into three "
                        "contiguous classes, slowdown 1, 1.6 and 2.5")
    p.add_argument("--transient-prob", type=float, default=0.0,
                   help="per-iteration probability of a transient 3x slowdown per worker")
    p.add_argument("--profile", help="emulate the compute of this model (resnet50, vgg16, ...)")
    p.add_argument("--profile-file", type=Path, default=PROFILES)
    p.add_argument("--pad-gradient", type=int, default=0,
                   help="communicate this many more (zero) gradient elements per iteration, "
                        "as a larger model would")
    p.add_argument("--wire-ms", type=float, default=0.0,
                   help="emulate host links on which this worker's whole gradient takes this "
                        "long to send (experiments/emulated_link.py); 0: this machine's speed")
    p.add_argument("--micro-batches", type=int, default=8,
                   help="work stealing: micro-batches per worker's share")
    p.add_argument("--silence-timeout", type=float, default=5.0)
    p.add_argument("--save-model", type=Path, help="rank 0 saves the trained weights here")
    p.add_argument("--log-dir", type=Path, required=True)
    p.add_argument("--no-progress", action="store_true")
    return p.parse_args(argv)


class GlooSum:
    """The gloo baseline's comm hook: sum, then divide by the samples summed."""

    def __init__(self):
        self.group = dist.new_group(backend="gloo")
        self.divisor = 1.0

    def hook(self, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
        divisor = self.divisor
        return dist.all_reduce(bucket.buffer(), group=self.group, async_op=True).get_future() \
            .then(lambda fut: fut.value()[0].div_(divisor))


def gloo_hook(state: GlooSum, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    return state.hook(bucket)


def call_times(calls) -> dict[str, float]:
    """What an iteration's allreduce calls took (COMM_FIELDS of the step exchange): in all, on
    the switch's chunks and on the chunks summed on hosts (NaN without calls)."""
    if not calls:
        return {}
    return {"busy_s": sum(c.elapsed_s for c in calls), "switch_s": sum(c.switch_s for c in calls),
            "host_s": sum(c.host_s for c in calls)}


def switch_hook_state(args, fallback: bool = True):
    """Aggregator, link and hook state for this rank's worker of the job. Without
    ``fallback`` the communicator has no gloo fallback: its per-call agreement is a collective
    that would hold every worker to the pace of the slowest."""
    from host_lib.pytorch.connect import hook_state

    return hook_state(args.job_spec, udp_ports=None if args.interface else args.udp_ports,
                      interface=args.interface, mean=False, fallback=fallback,
                      silence_timeout=args.silence_timeout)


@dataclass
class StepResult:
    compute_s: float
    samples: int
    loss: float
    contributed: bool
    comm_started: float  # perf_counter when this worker's compute ended
    micro_batches: list[tuple[int, int]] | None = None  # (owner, index) computed (stealing)


class Trainer:
    """One rank: model, data, emulated compute, and the communication its policy needs."""

    def __init__(self, args, rank: int, world: int):
        self.args, self.rank, self.world = args, rank, world
        self.xtr, self.ytr, self.xte, self.yte = digits.load(args.seed)
        self.net = digits.model(args.seed, args.pad_gradient)
        self.policy = make_policy(args.policy, world, args.global_batch)
        self.switch = args.comm == "switch"
        self.delayed = self.policy.delays_gradients
        if self.switch:
            self.state = switch_hook_state(args, fallback=not self.policy.abandons_late_work)
        if not self.delayed:
            self.ddp = DistributedDataParallel(self.net)
            if self.switch:
                self.ddp.register_comm_hook(self.state, sa_atp_hook)
            else:
                self.state = GlooSum()
                self.ddp.register_comm_hook(self.state, gloo_hook)
        self.optimizer = torch.optim.SGD(self.net.parameters(), lr=args.lr, momentum=0.9)
        self.driver = PolicyDriver(self.policy, rank, world, _get_default_store(),
                                   GlobalBatchSampler(len(self.xtr), args.global_batch, args.seed),
                                   hook_state=self.state if self.switch else None,
                                   micro_batches=args.micro_batches)
        self.schedule = SlowdownSchedule.parse(args.stragglers, classes=args.speed_classes,
                                               n_workers=world,
                                               transient_prob=args.transient_prob,
                                               seed=args.seed)
        self.profile = (StepTimeProfile.load(args.profile_file, args.profile) if args.profile
                        else None)
        starts = args.log_dir / "link_starts.bin"
        if args.wire_ms and rank == 0:
            EmulatedLink.create_board(starts, world)
        if args.wire_ms:
            dist.barrier()  # the board exists
        self.link = EmulatedLink(args.wire_ms / 1e3, world, rank, ring=not self.switch,
                                 starts=starts)

    def plan(self, it: int) -> IterationPlan:
        return self.driver.plan(it)

    def step(self, it: int, plan: IterationPlan) -> dict:
        t0 = time.perf_counter()
        result = (self.delayed_step(it, plan, t0) if self.delayed
                  else self.stealing_step(it, plan, t0) if plan.steal
                  else self.synchronous_step(it, plan, t0))
        end = time.perf_counter()
        calls = self.state.drain_stats() if self.switch else []
        self.driver.communicated(end - result.comm_started, **call_times(calls))
        record = {"it": it, "rank": self.rank, "iter_s": end - t0, "end": time.time(),
                  "compute_s": result.compute_s, "comm_s": end - result.comm_started,
                  "slowdown": self.schedule.factor(self.rank, it), "samples": result.samples,
                  "contributes": result.contributed, "loss": result.loss, "plan": plan.note}
        if self.policy.steals_work:
            done = result.micro_batches
            if done is None:  # a step without stealing computed its whole share
                pieces = micro_batch_sizes(plan.shares[self.rank], self.args.micro_batches)
                done = [(self.rank, i) for i in range(len(pieces))]
            record.update(shares=list(plan.shares), micro_batches=done, stole=plan.steal)
        if self.switch:
            record.update(fallback=sum(1 for c in calls if c.fallback),
                          packets=sum(c.packets_sent for c in calls),
                          retransmissions=sum(c.retransmissions for c in calls),
                          takeovers=sum(c.takeovers for c in calls),
                          taken=sum(c.taken for c in calls),
                          hosted=sum(c.host_chunks for c in calls),
                          helped=sum(c.helper_results for c in calls))
        return record

    def emulated(self, samples: int, it: int, real_s: float) -> float:
        """Compute time of a step of ``samples``: the profile's GPU time (or the real time),
        times this worker's slowdown."""
        base = self.profile.time(samples) if self.profile else real_s
        return base * self.schedule.factor(self.rank, it)

    def synchronous_step(self, it: int, plan: IterationPlan, t0: float) -> StepResult:
        """Compute the share and aggregate it in DDP's backward pass (the comm hook)."""
        mine, round_plan = self.driver.share(it, plan)
        if not self.switch:
            self.state.divisor = float(sum(plan.weights()))
        loss = torch.nn.functional.cross_entropy(self.ddp(self.xtr[mine]), self.ytr[mine],
                                                 reduction="sum")
        pad_to(self.emulated(len(mine), it, time.perf_counter() - t0), t0)
        compute = time.perf_counter() - t0
        # The backward, which hands DDP the buckets, runs after the padded compute (lead 0).
        self.driver.computed(it, compute, len(mine), pass_s=compute, lead_s=0.0)
        comm_started = self.link.start(it, round_plan.contribute)
        loss.backward()  # the comm hook runs here
        self.link.finish(it, comm_started, plan.contributors, plan.fanin)
        self.driver.observe(it, self.flat_grad().numpy())
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return StepResult(compute, len(mine), float(loss.detach()) / max(1, len(mine)),
                          round_plan.contribute, comm_started)

    def stealing_step(self, it: int, plan: IterationPlan, t0: float) -> StepResult:
        """Compute micro-batches, own and stolen, as they are claimed, their gradients
        accumulating outside DDP, then the reserved ones together in one pass through DDP,
        whose backward pass runs the comm hook on the sum, as a synchronous step's does (with
        nothing reserved, a pass over no samples does). A stolen micro-batch costs this worker
        its own per-sample time; the step's fixed cost (the profile's) is paid once."""
        mine, round_plan = self.driver.share(it, plan)
        if not self.switch:
            self.state.divisor = float(sum(plan.weights()))
        factor = self.schedule.factor(self.rank, it)
        target, samples, loss, done, reserved = 0.0, 0, 0.0, [], []
        per_sample: list[float] = []  # this worker's compute time per sample, as measured
        first = (0, 0.0)  # the first micro-batch's samples and time (with the fixed cost)
        for mb in self.driver.micro_batches(it, plan, lambda: per_sample[-1] if per_sample
                                            else None):
            if mb.reserved:
                reserved.append(mb)
                continue
            started = time.perf_counter()
            loss += self.backward(self.net, mb.samples)
            spent = self.spent(len(mb.samples), not done, factor, started)
            if not done:
                first = (len(mb.samples), spent)
            if self.profile or done:  # emulated times, or one without the fixed cost
                per_sample.append(factor * self.profile.a if self.profile else
                                  spent / len(mb.samples))
            target += spent
            pad_to(target, t0)
            samples += len(mb.samples)
            done.append((mb.owner, mb.index))
        rows = (np.concatenate([mb.samples for mb in reserved]) if reserved else mine[:0])
        started = time.perf_counter()
        last = self.loss(self.ddp, rows)  # forward through DDP, backward after the compute
        pass_s = self.spent(len(rows), not done, factor, started) if len(rows) else 0.0
        target += pass_s
        pad_to(target, t0)
        samples += len(rows)
        done += [(mb.owner, mb.index) for mb in reserved]
        compute = time.perf_counter() - t0
        # The emulated compute is padded before the backward runs: nothing of the gradient is
        # on its way during the pass (lead 0).
        fixed = first[1] - first[0] * per_sample[-1] if per_sample and first[0] else math.nan
        self.driver.computed(it, compute, samples, pass_s=pass_s, lead_s=0.0, fixed_s=fixed)
        comm_started = self.link.start(it, round_plan.contribute)
        last.backward()  # the comm hook runs here
        self.link.finish(it, comm_started, plan.contributors, plan.fanin)
        loss += float(last.detach())
        self.driver.observe(it, self.flat_grad().numpy())
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return StepResult(compute, samples, loss / max(1, samples), round_plan.contribute,
                          comm_started, done)

    def spent(self, samples: int, first: bool, factor: float, started: float) -> float:
        """Emulated compute time of a micro-batch of ``samples`` that started at ``started``:
        the profile's (its fixed cost in the first a worker computes) or the real time, times
        this worker's slowdown."""
        if self.profile is None:
            return factor * (time.perf_counter() - started)
        return factor * (self.profile.a * samples + (self.profile.c if first else 0.0))

    def loss(self, model: torch.nn.Module, samples: np.ndarray) -> torch.Tensor:
        """The summed loss over ``samples`` (its backward pass still to run)."""
        return torch.nn.functional.cross_entropy(model(self.xtr[samples]), self.ytr[samples],
                                                 reduction="sum")

    def backward(self, model: torch.nn.Module, samples: np.ndarray) -> float:
        """Add the gradient of the summed loss over ``samples`` to the parameters' gradients;
        the loss."""
        loss = self.loss(model, samples)
        loss.backward()
        return float(loss.detach())

    def delayed_step(self, it: int, plan: IterationPlan, t0: float) -> StepResult:
        """Start a gradient if the plan gives us a share; deliver the one under way if it makes
        us a contributor (waiting for its compute to end); otherwise sit the iteration out."""
        if plan.shares[self.rank]:
            mine = self.driver.samples(it, plan)
            self.optimizer.zero_grad(set_to_none=True)
            loss = torch.nn.functional.cross_entropy(self.net(self.xtr[mine]), self.ytr[mine],
                                                     reduction="sum")
            loss.backward()
            self.driver.hold(PendingGradient(
                len(mine), self.flat_grad().numpy(), float(loss.detach()) / len(mine), t0,
                self.emulated(len(mine), it, time.perf_counter() - t0)))
        pending = self.driver.deliver(plan)
        if pending is not None:
            pad_to(pending.compute_s, pending.started)
            result = StepResult(pending.compute_s, pending.samples, pending.loss, True,
                                time.perf_counter())
            values = pending.grad
        else:
            result = StepResult(0.0, 0, math.nan, False, t0)
            values = np.zeros(sum(p.numel() for p in self.net.parameters()), np.float32)
        self.driver.computed(it, result.compute_s, result.samples)
        comm_started = self.link.start(it, result.contributed)
        total = torch.from_numpy(self.driver.reduce(
            values, plan, lambda v: dist.all_reduce(torch.from_numpy(v))))
        self.link.finish(it, comm_started, plan.contributors, plan.fanin)
        offset = 0
        for p in self.net.parameters():
            p.grad = total[offset:offset + p.numel()].view_as(p).clone()
            offset += p.numel()
        self.driver.observe(it, total.numpy())
        self.optimizer.step()
        return result

    def flat_grad(self) -> torch.Tensor:
        return torch.cat([p.grad.reshape(-1) for p in self.net.parameters()])

    def close(self) -> None:
        self.driver.close()
        if self.switch:
            self.state.communicator.close()


def main(argv=None) -> None:
    args = parse_args(argv)
    dist.init_process_group("gloo", timeout=timedelta(minutes=10))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)
    trainer = Trainer(args, rank, world)

    args.log_dir.mkdir(parents=True, exist_ok=True)
    log = open(args.log_dir / f"rank{rank}.jsonl", "w")
    progress = None
    if rank == 0 and not args.no_progress:
        from tqdm import tqdm
        progress = tqdm(total=args.iterations, desc=f"{args.comm}/{args.policy}", unit="it")
    dist.barrier()
    start = time.perf_counter()
    for it in range(args.iterations):
        record = trainer.step(it, trainer.plan(it))
        record["t"] = time.perf_counter() - start
        if rank == 0 and (it % args.eval_every == args.eval_every - 1 or it == args.iterations - 1):
            record["test_acc"] = digits.accuracy(trainer.net, trainer.xte, trainer.yte)
        log.write(json.dumps(record) + "\n")
        if progress is not None:
            progress.update(1)
            if "test_acc" in record:
                progress.set_postfix(acc=f"{record['test_acc']:.3f}")
    log.close()
    if progress is not None:
        progress.close()
    if rank == 0 and args.save_model:
        torch.save(trainer.net.state_dict(), args.save_model)
    dist.barrier()  # nobody stops answering peers while one still finishes
    trainer.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    lifetime.die_with_launcher()  # a worker ends with its torchrun, however torchrun ends
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()

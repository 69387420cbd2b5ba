"""Data-parallel training of the digits MLP with DDP, its gradients summed by gloo or by the
switch (the SA-ATP DDP comm hook), under a straggler policy. Run it under torchrun, one process
per worker:

    torchrun --nproc-per-node 4 -m examples.train --comm switch --policy sa-atp \\
        --job-spec runs/demo/job.toml --udp-ports runs/demo/ports.json --log-dir runs/demo/sa

Every iteration, each worker asks the policy for the iteration's plan (computed identically on
every worker from the compute times all workers share through the torch.distributed store),
computes the gradient *sum* over its share of the global batch, and the aggregate is divided by
the number of samples it sums. Each rank writes one JSON line per iteration to
``<log-dir>/rank<r>.jsonl``; rank 0 shows a progress bar.
"""

import argparse
import json
import os
import time
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed.distributed_c10d import _get_default_store
from torch.nn.parallel import DistributedDataParallel

from examples import digits
from host_lib.ddp_hook import sa_atp_hook
from host_lib.policies.exchange import StepTimeExchange
from host_lib.policies.registry import POLICIES, make_policy
from host_lib.sampling import GlobalBatchSampler, split
from host_lib.stragglers import SlowdownSchedule, StepTimeProfile, pad_to

PROFILES = Path(__file__).resolve().parent / "profiles" / "h100_step_times.json"


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
    p.add_argument("--transient-prob", type=float, default=0.0,
                   help="per-iteration probability of a transient 3x slowdown per worker")
    p.add_argument("--profile", help="emulate the compute of this model (resnet50, vgg16, ...)")
    p.add_argument("--profile-file", type=Path, default=PROFILES)
    p.add_argument("--silence-timeout", type=float, default=5.0)
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


def switch_hook_state(args, rank: int):
    """Aggregator, link and hook state for this rank's worker of the job."""
    from control_plane.jobs import load_spec
    from host_lib.aggregator import AggregatorConfig, SwitchAggregator
    from host_lib.ddp_hook import SaAtpHookState
    from host_lib.fallback import FallbackGroup
    from host_lib.links import RawEthernetLink, UdpTunnelLink

    spec = load_spec(args.job_spec)
    config = AggregatorConfig.from_spec(spec, rank, silence_timeout=args.silence_timeout)
    if args.interface:
        link = RawEthernetLink(args.interface, config.local.ip, config.local.port)
    else:
        ports = json.loads(args.udp_ports.read_text())
        host, port = ports[str(spec.worker(rank).port)]
        link = UdpTunnelLink((host, port))
    return SaAtpHookState(SwitchAggregator(config, link, FallbackGroup.create()))


def main(argv=None) -> None:
    args = parse_args(argv)
    dist.init_process_group("gloo", timeout=timedelta(minutes=10))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)
    xtr, ytr, xte, yte = digits.load(args.seed)
    net = digits.model(args.seed)
    ddp = DistributedDataParallel(net)
    if args.comm == "switch":
        state = switch_hook_state(args, rank)
        ddp.register_comm_hook(state, sa_atp_hook)
    else:
        state = GlooSum()
        ddp.register_comm_hook(state, gloo_hook)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9)
    sampler = GlobalBatchSampler(len(xtr), args.global_batch, args.seed)
    schedule = SlowdownSchedule.parse(args.stragglers, transient_prob=args.transient_prob,
                                      seed=args.seed)
    profile = StepTimeProfile.load(args.profile_file, args.profile) if args.profile else None
    policy = make_policy(args.policy, world, args.global_batch)
    exchange = StepTimeExchange(_get_default_store(), rank, world)

    args.log_dir.mkdir(parents=True, exist_ok=True)
    log = open(args.log_dir / f"rank{rank}.jsonl", "w")
    progress = None
    if rank == 0 and not args.no_progress:
        from tqdm import tqdm
        progress = tqdm(total=args.iterations, desc=f"{args.comm}/{args.policy}", unit="it")
    dist.barrier()
    start = time.perf_counter()
    for it in range(args.iterations):
        history = exchange.collect(it - 1)
        plan = policy.plan(it, history)
        if args.comm == "switch":
            state.plan, state.weights = plan.round_plan(rank), plan.weights()
        else:
            state.divisor = float(sum(plan.weights()))
        mine = split(sampler.batch(it), list(plan.shares))[rank]
        t0 = time.perf_counter()
        loss = torch.nn.functional.cross_entropy(ddp(xtr[mine]), ytr[mine], reduction="sum")
        factor = schedule.factor(rank, it)
        base = profile.time(len(mine)) if profile else time.perf_counter() - t0
        pad_to(base * factor, t0)
        compute = time.perf_counter() - t0
        exchange.publish(it, compute, len(mine))
        loss.backward()  # the comm hook runs here
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        elapsed = time.perf_counter() - t0
        record = {"it": it, "rank": rank, "t": time.perf_counter() - start, "iter_s": elapsed,
                  "compute_s": compute, "comm_s": elapsed - compute, "slowdown": factor,
                  "samples": len(mine), "contributes": plan.contributes(rank),
                  "loss": float(loss.detach()) / max(1, len(mine)), "plan": plan.note}
        if args.comm == "switch":
            calls = state.drain_stats()
            record.update(fallback=sum(1 for c in calls if c.fallback),
                          retransmissions=sum(c.retransmissions for c in calls),
                          taken=sum(c.taken for c in calls),
                          helped=sum(c.helper_results for c in calls))
        if rank == 0 and (it % args.eval_every == args.eval_every - 1 or it == args.iterations - 1):
            record["test_acc"] = digits.accuracy(net, xte, yte)
        log.write(json.dumps(record) + "\n")
        if progress is not None:
            progress.update(1)
            if "test_acc" in record:
                progress.set_postfix(acc=f"{record['test_acc']:.3f}")
    log.close()
    if progress is not None:
        progress.close()
    dist.barrier()  # nobody stops answering peers while one still finishes
    if args.comm == "switch":
        state.aggregator.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()

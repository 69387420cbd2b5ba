"""The ``sa_atp`` torch.distributed backend in real worker processes: float32 allreduce (SUM,
AVG, async, DDP's bucket, through ``init_process_group`` and through ``new_group``) summed by the
switch, exactly as the quantization reference says, and everything else served by gloo, exactly
as numpy says."""

from __future__ import annotations

import multiprocessing
import traceback

import numpy as np

from protocol import constants as P
from tests.quant_reference import AllreduceReference
from topologies.local import LocalCluster, WorkerGroup, local_job
from topologies.switch_process import free_tcp_port

N = 4
ELEMENTS = 1000  # 16 chunks per call
BLOCKS = -(-ELEMENTS // P.LANES)


def inputs(rank: int, call: int) -> np.ndarray:
    """|x| < 1/2: the default exponent fits the first call and the predicted one every later
    call, so no block needs a repair and each call is exactly BLOCKS chunks."""
    return np.random.default_rng((rank, call)).uniform(-0.5, 0.5, ELEMENTS).astype(np.float32)


def ddp_batch(rank: int) -> np.ndarray:
    return inputs(rank, 6)[:8].reshape(2, 4)


def ddp_gradient(rank: int) -> np.ndarray:
    """d/d(weight, bias) of the summed outputs of Linear(4, 1) on the batch."""
    return np.append(ddp_batch(rank).sum(axis=0), 2.0).astype(np.float32)


def exercise(rank: int, dist_port: int, world_job, group_job, udp_ports) -> dict:
    import torch
    import torch.distributed as dist

    from host_lib.pytorch.c10d_backend import SwitchOptions

    dist.init_process_group("sa_atp", init_method=f"tcp://127.0.0.1:{dist_port}", rank=rank,
                            world_size=N, pg_options=SwitchOptions(world_job, udp_ports=udp_ports))
    out: dict = {}
    for call, op in enumerate([dist.ReduceOp.SUM, dist.ReduceOp.SUM, dist.ReduceOp.AVG]):
        t = torch.from_numpy(inputs(rank, call))
        dist.all_reduce(t, op=op)
        out[call] = t.numpy()
    t = torch.from_numpy(inputs(rank, 3))
    dist.all_reduce(t, async_op=True).wait()
    out[3] = t.numpy()
    ints = torch.arange(7, dtype=torch.int64) * (rank + 1) + 2**40
    dist.all_reduce(ints)
    peak = torch.from_numpy(inputs(rank, 4))
    dist.all_reduce(peak, op=dist.ReduceOp.MAX)
    gathered = [torch.zeros(3) for _ in range(N)]
    dist.all_gather(gathered, torch.full((3,), float(rank)))
    out.update(ints=ints.numpy(), max=peak.numpy(), gathered=[g.numpy() for g in gathered])

    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
    model(torch.from_numpy(ddp_batch(rank))).sum().backward()
    out["ddp"] = torch.cat([model.module.weight.grad.reshape(-1), model.module.bias.grad]).numpy()

    group = dist.new_group(backend="sa_atp",
                           pg_options=SwitchOptions(group_job, udp_ports=udp_ports))
    t = torch.from_numpy(inputs(rank, 5))
    dist.all_reduce(t, group=group)
    out["group"] = t.numpy()
    out["chunks"] = (dist.group.WORLD.communicator.next_chunk, group.communicator.next_chunk)
    dist.destroy_process_group()
    return out


def _rank_main(rank: int, args: tuple, results) -> None:
    try:
        results.put(((0, rank), True, exercise(rank, *args)))
    except BaseException:  # noqa: BLE001 - reported to the parent with its traceback
        results.put(((0, rank), False, traceback.format_exc()))


def test_float32_allreduce_goes_through_the_switch_and_the_rest_through_gloo(tmp_path):
    jobs = [local_job(1, N), local_job(2, N, first_port=N + 1)]
    with LocalCluster(jobs, tmp_path) as cluster:
        ports = {str(p): list(addr) for p, addr in cluster.switch.udp_ports.items()}
        args = (free_tcp_port(), jobs[0], jobs[1], ports)
        ctx = multiprocessing.get_context("spawn")
        queue = ctx.Queue()
        procs = [((0, r), ctx.Process(target=_rank_main, args=(r, args, queue), daemon=True))
                 for r in range(N)]
        for _, p in procs:
            p.start()
        results = WorkerGroup(procs, queue, args).join(300)
        counters = [cluster.controller.counters(job.id) for job in jobs]

    world_ref, group_ref = AllreduceReference(N), AllreduceReference(N)
    want = [world_ref([inputs(r, 0) for r in range(N)]),
            world_ref([inputs(r, 1) for r in range(N)]),
            world_ref([inputs(r, 2) for r in range(N)], average=True),
            world_ref([inputs(r, 3) for r in range(N)])]
    want_group = group_ref([inputs(r, 5) for r in range(N)])
    # DDP divides its bucket by the world size (exact: a power of two), then sums it.
    want_ddp = AllreduceReference(N)([ddp_gradient(r) / N for r in range(N)])
    for rank in range(N):
        got = results[(0, rank)]
        for call in range(4):
            np.testing.assert_array_equal(got[call], want[call], err_msg=f"rank {rank} {call}")
        np.testing.assert_array_equal(got["group"], want_group)
        np.testing.assert_array_equal(got["ddp"], want_ddp)
        np.testing.assert_array_equal(got["ints"], np.arange(7) * sum(range(1, N + 1)) + N * 2**40)
        np.testing.assert_array_equal(got["max"], np.max([inputs(r, 4) for r in range(N)], 0))
        np.testing.assert_array_equal(np.stack(got["gathered"]), np.arange(N)[:, None].repeat(3, 1))
        # Only the four float32 SUM/AVG calls and DDP's one bucket took chunk ids; the group's
        # one call its own.
        assert got["chunks"] == (4 * BLOCKS + 1, BLOCKS)
    world, group = counters
    assert world["ingress"]["packets"]["DATA"] >= N * 4 * BLOCKS
    assert world["egress"]["packets"]["RESULT"] >= N * 4 * BLOCKS
    assert group["ingress"]["packets"]["DATA"] >= N * BLOCKS

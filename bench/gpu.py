"""CUDA gradient buckets: the DDP hook's device path against its host path (issue 22, item 4),
and the quantizer's fused kernel against a device copy (issue 38, item 4).

The hook quantizes a CUDA float32 bucket on its GPU and copies only the int32 lanes and block
exponents into pinned host memory on a side stream (:mod:`host_lib.pytorch.device_staging`); on the
host path the bucket crosses as float32 into pinned memory and the host quantizes it. Measured
per bucket size: how long each path holds DDP's caller (the hook's return), also when ~10 ms of
kernels are still queued before it, as the backward pass's are when DDP calls the hook, and how
long until the host holds the lanes. Then a DDP job of 4 workers sharing the GPU, through the
embedded switch, with the device path, the host path, gloo's ``allreduce_hook`` on the same CUDA
buckets, and the same model on CPU, interleaved iteration by iteration.

Needs a CUDA device; elsewhere (CI, the 2-core development machine) the section reports
``skipped``. ``python -m bench --only gpu --out bench/results/gpu.json`` runs it alone.
"""

from __future__ import annotations

import statistics
import tempfile
import time

import numpy as np
import torch

from host_lib.engine.quantize import BlockQuantizer, block_exponents, num_blocks, predict_scales
from host_lib.pytorch.device_staging import DeviceStaging
from topologies.local import LocalCluster, local_job

N_WORKERS = 4
BUCKETS = (1 << 20, 1 << 22, 25 * (1 << 20) // 4)  # 4 MiB, 16 MiB, DDP's default 25 MiB
HOOK_VARIANTS = ("device", "host", "gloo", "cpu")
BACKLOG_CYCLES = 20_000_000  # ~10 ms of GPU clock cycles


def _staging(elements: int, device: str, repeat: int = 20) -> dict[str, float]:
    """Median seconds of each path for one bucket: until the hook could return, and until the
    host holds the bucket's lanes."""
    x = torch.randn(elements, device=device) * 1e-2
    scales = predict_scales(block_exponents(x.cpu().numpy()), num_blocks(elements))
    staging = DeviceStaging(N_WORKERS)
    quantizer = BlockQuantizer(N_WORKERS)
    pinned = torch.empty(elements, dtype=torch.float32, pin_memory=x.is_cuda)
    lanes, _ = quantizer.quantize(pinned.numpy(), scales)

    def sync() -> None:
        if x.is_cuda:
            torch.cuda.synchronize()

    def backlog() -> None:  # the backward kernels DDP's hook is called behind
        if x.is_cuda and busy:
            torch.cuda._sleep(BACKLOG_CYCLES)

    def device_path() -> tuple[float, float]:
        backlog()
        t0 = time.perf_counter()
        staged = staging.stage("bucket", x, scales)
        returned = time.perf_counter()
        staged.wait()
        return returned - t0, time.perf_counter() - t0

    def host_path() -> tuple[float, float]:  # what SaAtpHookState.staging + the I/O thread do
        backlog()
        t0 = time.perf_counter()
        pinned.copy_(x, non_blocking=x.is_cuda)
        sync()
        returned = time.perf_counter()
        quantizer.quantize(pinned.numpy(), scales, out=lanes)
        return returned - t0, time.perf_counter() - t0

    paths = {"device": device_path, "host": host_path}
    out: dict[str, float] = {"elements": elements}
    for busy in (False, True):
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in paths}
        for i in range(repeat + 2):
            for name, fn in paths.items():
                sync()
                t = fn()
                if i >= 2:  # the first two warm up kernels and allocators
                    times[name].append(t)
        for name, ts in times.items():
            if busy:
                out[f"{name}_return_behind_backlog_s"] = statistics.median(t[0] for t in ts)
            else:
                out[f"{name}_return_s"] = statistics.median(t[0] for t in ts)
                out[f"{name}_lanes_on_host_s"] = statistics.median(t[1] for t in ts)
    out["host_over_device"] = out["host_lanes_on_host_s"] / out["device_lanes_on_host_s"]
    return out


def _kernel_vs_copy(elements: int = 1 << 26, repeat: int = 20) -> dict:
    """The quantizer on a CUDA bucket of ``elements`` float32: the fused kernel
    (:mod:`host_lib.pytorch.quantize_triton`) and the torch operations it replaces, each against
    a device copy of the same bucket (what moving it costs at the memory's speed); median GPU
    times from CUDA events."""
    from host_lib.pytorch import quantize_torch, quantize_triton

    x = torch.randn(elements, device="cuda") * 1e-2
    scales = torch.from_numpy(predict_scales(None, num_blocks(elements)).astype(np.int32)).cuda()
    bits = BlockQuantizer(N_WORKERS).qbits
    y = torch.empty_like(x)
    runs = {"copy": lambda: y.copy_(x),
            "torch_ops": lambda: quantize_torch.quantize(x, scales, bits, fused=False)}
    if quantize_triton.available(x):
        runs["fused"] = lambda: quantize_triton.quantize(x, scales, bits)
    times: dict[str, list[float]] = {name: [] for name in runs}
    for i in range(repeat + 2):
        for name, fn in runs.items():
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            if i >= 2:
                times[name].append(start.elapsed_time(end) / 1e3)
    out = {"elements": elements} | {f"{name}_s": statistics.median(ts)
                                    for name, ts in times.items()}
    for name in ("fused", "torch_ops"):
        if f"{name}_s" in out:
            out[f"{name}_ratio_to_copy"] = out["copy_s"] / out[f"{name}_s"]
    out["ratio_to_copy"] = out.get("fused_ratio_to_copy")  # the fused kernel's, None without it
    return out


def _backlog_s() -> float:
    """How long the GPU takes for the backlog queued before each timed call."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    torch.cuda._sleep(BACKLOG_CYCLES)
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def _hook_worker(comm, arg):
    """One worker of the hook job: per variant, the wall time of each training iteration."""
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
    from torch.nn.parallel import DistributedDataParallel

    from host_lib.pytorch.ddp_hook import SaAtpHookState, sa_atp_hook

    iterations, batch, gpu = arg
    torch.manual_seed(0)
    nets, inputs = {}, {}
    for variant in HOOK_VARIANTS:
        device = "cpu" if variant == "cpu" else gpu
        model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(),
                                    torch.nn.Linear(512, 256), torch.nn.ReLU(),
                                    torch.nn.Linear(256, 10)).to(device)
        net = DistributedDataParallel(model, device_ids=[0] if device == "cuda" else None,
                                      bucket_cap_mb=0.25)
        if variant == "gloo":
            net.register_comm_hook(dist.group.WORLD, allreduce_hook)
        else:
            state = SaAtpHookState(comm, weights=[1.0] * N_WORKERS,
                                   quantize_on_device=False if variant == "host" else None)
            net.register_comm_hook(state, sa_atp_hook)
        nets[variant] = net
        inputs[variant] = (torch.randn(batch, 256, device=device),
                           torch.randint(0, 10, (batch,), device=device))
    times = {variant: [] for variant in HOOK_VARIANTS}
    for _ in range(iterations):
        for variant, net in nets.items():
            x, y = inputs[variant]
            dist.barrier()
            t0 = time.perf_counter()
            net.zero_grad()
            torch.nn.functional.cross_entropy(net(x), y).backward()
            if x.is_cuda:
                torch.cuda.synchronize()
            times[variant].append(time.perf_counter() - t0)
    comm.close()
    return times, sum(p.numel() for p in model.parameters())


def _hook_job(device: str, iterations: int = 12, warmup: int = 2, batch: int = 64) -> dict:
    """Median iteration time per variant (the slowest worker's, per iteration)."""
    spec = local_job(1, N_WORKERS, slots=256)
    with tempfile.TemporaryDirectory() as run_dir, LocalCluster([spec], run_dir) as cluster:
        results = cluster.run_workers(_hook_worker,
                                      {1: [(iterations + warmup, batch, device)] * N_WORKERS},
                                      distributed=True, timeout=600)
    out = {"workers": N_WORKERS, "iterations": iterations, "parameters": results[(1, 0)][1]}
    for variant in HOOK_VARIANTS:
        slowest = np.max([results[(1, w)][0][variant] for w in range(N_WORKERS)], axis=0)
        out[f"{variant}_iteration_s"] = float(np.median(slowest[warmup:]))
    return out


def run(device: str | None = None) -> dict:
    """``device`` defaults to CUDA; ``"cpu"`` runs the same steps on CPU tensors (a dry run)."""
    if device is None and not torch.cuda.is_available():
        return {"skipped": "no CUDA device"}
    device = device or "cuda"
    result = {"device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
              "torch": torch.__version__}
    result["hook_job"] = _hook_job(device)  # first: its workers are spawned before this process
    result["staging"] = [_staging(n, device) for n in BUCKETS]  # touches the GPU
    if device == "cuda":
        result["backlog_s"] = _backlog_s()
        result["fused_quantize"] = _kernel_vs_copy()
    return result


def summary(r: dict) -> list[str]:
    if "skipped" in r:
        return [f"skipped: {r['skipped']}"]
    lines = [f"on {r['device']} (torch {r['torch']})"]
    if "fused_quantize" in r:
        k = r["fused_quantize"]
        fused = (f"fused kernel {k['fused_s'] * 1e3:.2f} ms = {k['fused_ratio_to_copy']:.2f}x a "
                 f"device copy's rate (goal >= 0.5x)" if "fused_s" in k else "no Triton")
        lines.append(f"quantizing {k['elements'] / 2**20:.0f} M float32: {fused}; torch "
                     f"operations {k['torch_ops_s'] * 1e3:.2f} ms = "
                     f"{k['torch_ops_ratio_to_copy']:.2f}x; copy {k['copy_s'] * 1e3:.3f} ms")
    for s in r["staging"]:
        lines.append(
            f"bucket {s['elements'] * 4 / 2**20:.0f} MiB: hook returns after "
            f"{s['device_return_s'] * 1e3:.2f} ms (device path; goal <= 0.1) vs "
            f"{s['host_return_s'] * 1e3:.2f}"
            f" ms (host path); lanes on the host after {s['device_lanes_on_host_s'] * 1e3:.2f} vs"
            f" {s['host_lanes_on_host_s'] * 1e3:.2f} ms ({s['host_over_device']:.1f}x)")
        if "backlog_s" in r:
            lines.append(
                f"  behind {r['backlog_s'] * 1e3:.1f} ms of queued kernels, the hook returns after "
                f"{s['device_return_behind_backlog_s'] * 1e3:.2f} ms (device path) vs "
                f"{s['host_return_behind_backlog_s'] * 1e3:.2f} ms (host path)")
    h = r["hook_job"]
    lines.append(f"DDP job, {h['workers']} workers on one device, {h['parameters']:,} parameters, "
                 "ms per iteration: " + ", ".join(
                     f"{v} {h[f'{v}_iteration_s'] * 1e3:.1f}" for v in HOOK_VARIANTS))
    return lines

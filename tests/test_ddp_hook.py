"""The DDP communication hook against torch's own allreduce_hook, and a seeded training run
through the switch against the same run with gloo."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from experiments import digits
from host_lib.engine.quantize import DEFAULT_EXPONENT, HEADROOM_BITS, qbits
from protocol import constants as P
from topologies.local import LocalCluster, local_job

N = 4
STEPS = 4
BATCH = 48


def gradients_both_ways(comm, arg):
    """Per step: this worker's local gradient, and the averaged gradient DDP hands the
    optimizer with our hook and with torch's allreduce_hook (gloo), from the same model on
    ``device``; and whether every staging buffer the hook used is pinned host memory."""
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
    from torch.nn.parallel import DistributedDataParallel

    from host_lib.pytorch.ddp_hook import SaAtpHookState, sa_atp_hook

    rank, device = arg
    on_device = device == "cpu-on-device"  # the GPU path, run on CPU tensors
    device = "cpu" if on_device else device
    xtr, ytr, _, _ = digits.load()
    xtr, ytr = xtr.to(device), ytr.to(device)
    ids = [0] if device == "cuda" else None
    nets = {"switch": DistributedDataParallel(digits.model(0).to(device), device_ids=ids),
            "gloo": DistributedDataParallel(digits.model(0).to(device), device_ids=ids)}
    state = SaAtpHookState(comm, weights=[1.0] * N, quantize_on_device=on_device or None)
    nets["switch"].register_comm_hook(state, sa_atp_hook)
    nets["gloo"].register_comm_hook(dist.group.WORLD, allreduce_hook)
    out = {"local": [], "switch": [], "gloo": []}

    def flat_grad(net):
        return torch.cat([p.grad.reshape(-1) for p in net.parameters()]).cpu().numpy()

    for step in range(STEPS):
        start = (step * N + rank) * BATCH
        x, y = xtr[start:start + BATCH], ytr[start:start + BATCH]
        for name, net in nets.items():
            net.zero_grad()
            torch.nn.functional.cross_entropy(net(x), y).backward()
            out[name].append(flat_grad(net))
        local = digits.model(0).to(device)
        local.load_state_dict(nets["gloo"].module.state_dict())
        torch.nn.functional.cross_entropy(local(x), y).backward()
        out["local"].append(flat_grad(local))
        with torch.no_grad():  # both step with gloo's gradient: the same model next step
            for p, q in zip(nets["switch"].parameters(), nets["gloo"].parameters(),
                            strict=True):
                p -= 0.5 * q.grad
                q -= 0.5 * q.grad
    comm.close()
    buffers = state.staged.all() + (state.device.host.all() if state.device else [])
    out["pinned"] = bool(buffers) and all(b.is_pinned() for b in buffers)
    out["on_device"] = state.device is not None
    return out


def quantization_bound(local: list[np.ndarray]) -> list[np.ndarray]:
    """Per step and element, the most the switch's mean may differ from the exact mean
    (docs/protocol.md §5): each block is quantized at an agreed exponent E no larger than
    the largest block exponent seen so far plus the headroom (DEFAULT_EXPONENT before any),
    and each worker's value is off by at most 2^E / 2^(j+1), so the mean is too."""
    j = qbits(N)
    bounds, seen = [], None
    for step in range(STEPS):
        peak = np.max([np.abs(g[step]) for g in local], axis=0)
        pad = -len(peak) % P.LANES
        blocks = np.pad(peak, (0, pad)).reshape(-1, P.LANES).max(axis=1)
        exps = np.frexp(blocks)[1] + HEADROOM_BITS
        seen = exps if seen is None else np.maximum(seen, exps)
        e = np.maximum(seen, DEFAULT_EXPONENT).astype(np.float64)
        per_block = np.ldexp(1.0, (e - j - 1).astype(int))
        bounds.append(np.repeat(per_block, P.LANES)[:len(peak)] * 1.01 + 1e-7 * peak)
    return bounds


@pytest.mark.parametrize("device", [
    "cpu", "cpu-on-device",
    pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(),
                                                  reason="needs a CUDA device")),
])
def test_hook_gives_allreduce_hooks_mean_within_the_quantizer_bound(tmp_path, device):
    with LocalCluster([local_job(1, N, slots=32)], tmp_path) as cluster:
        results = cluster.run_workers(gradients_both_ways,
                                      {1: [(w, device) for w in range(N)]},
                                      distributed=True, timeout=300)
    local = [np.array(results[(1, w)]["local"]) for w in range(N)]
    bound = quantization_bound(local)
    exact = np.mean(local, axis=0)
    for w in range(N):
        for step in range(STEPS):
            switch = results[(1, w)]["switch"][step]
            gloo = results[(1, w)]["gloo"][step]
            np.testing.assert_allclose(gloo, exact[step], rtol=1e-5, atol=1e-6)
            excess = np.abs(switch - gloo) - bound[step]
            assert excess.max() <= 0, (f"worker {w} step {step}: off by {excess.max():.3g} "
                                       f"beyond the bound")
        # every worker applies the same bits
        np.testing.assert_array_equal(results[(1, w)]["switch"], results[(1, 0)]["switch"])
        # CPU float32 buckets go straight through; CUDA buckets are quantized on the GPU and
        # their lanes go through pinned memory
        assert results[(1, w)]["pinned"] == (device == "cuda")
        assert results[(1, w)]["on_device"] == (device != "cpu")


@pytest.mark.slow
def test_seeded_training_reaches_gloos_accuracy_through_the_switch(tmp_path):
    from examples.main_job import parse_args, run_method

    args = parse_args(["--methods", "gloo,switch", "--straggler", "1", "--iterations", "60",
                       "--profile", "", "--out", str(tmp_path), "--quiet"])
    gloo, switch = run_method(args, "gloo"), run_method(args, "switch")
    assert gloo.final_accuracy > 0.85  # it trained at all
    assert abs(gloo.final_accuracy - switch.final_accuracy) <= 0.005
    assert switch.fallback_calls == 0

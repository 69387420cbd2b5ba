"""What a worker computes and sends each iteration: a model's parameter tensors in registration
order (with the FLOPs of the layer each belongs to), its H100 step-time profile, the DDP buckets
its gradient is cut into and when backprop releases each of them.

Layer lists are written out from the models' definitions (torchvision's ResNet-50 and VGG-16,
GPT-2 medium); tests check their parameter counts against the counts measured with torch in
``experiments/profiles/h100_step_times.json``.

Bucket release: DDP fills buckets in reverse registration order (the order backprop produces
gradients), the first one capped at 1 MiB, the others at 25 MiB (DDP's defaults). A step spends
``FORWARD_SHARE`` of its time in the forward pass; backprop then walks the layers in reverse,
spending time in proportion to each layer's FLOPs, and a bucket is ready once its last tensor's
layer is done.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from experiments.stragglers import StepTimeProfile

PROFILES = (Path(__file__).resolve().parent.parent / "experiments" / "profiles"
            / "h100_step_times.json")
FIRST_BUCKET_BYTES = 1 << 20
BUCKET_BYTES = 25 << 20
FORWARD_SHARE = 1 / 3  # backward costs about twice the forward pass
H100_BF16_FLOPS = 989e12  # dense bf16 peak
TRANSFORMER_MFU = 0.40  # assumed achieved share of peak for the transformer (not measured)
TRANSFORMER_STEP_OVERHEAD_S = 0.010  # per-step constant, as ResNet-50's measured one


@dataclass(frozen=True)
class Tensor:
    params: int
    flops: float  # forward FLOPs per sample of the layer the tensor belongs to (0: none)


@dataclass(frozen=True)
class Bucket:
    nbytes: int
    ready: float  # fraction of the step's compute time after which backprop has produced it


@dataclass(frozen=True)
class Workload:
    """One data-parallel job's per-worker step: ``profile.time(b)`` seconds for b samples on an
    H100, and the gradient buckets sent while (or after) it runs."""

    name: str
    profile: StepTimeProfile
    buckets: tuple[Bucket, ...]
    batch_per_worker: int
    params: int

    @property
    def grad_bytes(self) -> int:
        return sum(b.nbytes for b in self.buckets)


def ddp_buckets(tensors: list[Tensor], bytes_per_value: int = 4) -> tuple[Bucket, ...]:
    """DDP's buckets in the order backprop fills them, each with its release point."""
    flops = np.array([t.flops for t in tensors], np.float64)
    # Backprop visits tensors last-registered first; done_after[i]: share of backward time
    # spent once tensor i's layer is done.
    done_after = np.cumsum(flops[::-1])[::-1] / flops.sum()
    buckets, size, ready, cap = [], 0, 0.0, FIRST_BUCKET_BYTES
    for i in reversed(range(len(tensors))):
        size += tensors[i].params * bytes_per_value
        ready = max(ready, float(done_after[i]))
        if size >= cap:
            buckets.append((size, ready))
            size, cap = 0, BUCKET_BYTES
    if size:
        buckets.append((size, ready))
    return tuple(Bucket(s, FORWARD_SHARE + (1 - FORWARD_SHARE) * r) for s, r in buckets)


def _conv(cin: int, cout: int, k: int, hw: int, bias: bool = False) -> list[Tensor]:
    flops = 2.0 * k * k * cin * cout * hw * hw
    return [Tensor(k * k * cin * cout, flops)] + ([Tensor(cout, 0.0)] if bias else [])


def _bn(c: int) -> list[Tensor]:
    return [Tensor(c, 0.0), Tensor(c, 0.0)]


def _linear(cin: int, cout: int, flops_per_sample: float | None = None) -> list[Tensor]:
    flops = 2.0 * cin * cout if flops_per_sample is None else flops_per_sample
    return [Tensor(cin * cout, flops), Tensor(cout, 0.0)]


def resnet50_tensors() -> list[Tensor]:
    """torchvision's resnet50 (v1.5: stride in the 3x3 convolution), 224x224 inputs."""
    out = _conv(3, 64, 7, 112) + _bn(64)
    cin, hw = 64, 56
    for planes, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for i in range(blocks):
            s = stride if i == 0 else 1
            out += _conv(cin, planes, 1, hw) + _bn(planes)
            hw //= s
            out += _conv(planes, planes, 3, hw) + _bn(planes)
            out += _conv(planes, planes * 4, 1, hw) + _bn(planes * 4)
            if i == 0:
                out += _conv(cin, planes * 4, 1, hw) + _bn(planes * 4)
            cin = planes * 4
    return out + _linear(2048, 1000)


def vgg16_tensors() -> list[Tensor]:
    """torchvision's vgg16 (no batch norm), 224x224 inputs."""
    out, cin, hw = [], 3, 224
    for stage in ((64, 64), (128, 128), (256, 256, 256), (512, 512, 512), (512, 512, 512)):
        for cout in stage:
            out += _conv(cin, cout, 3, hw, bias=True)
            cin = cout
        hw //= 2
    return out + _linear(512 * 7 * 7, 4096) + _linear(4096, 4096) + _linear(4096, 1000)


def gpt2_medium_tensors(seq: int = 1024, d: int = 1024, layers: int = 24,
                        vocab: int = 50257) -> list[Tensor]:
    """GPT-2 medium (354.8 M parameters, input and output embeddings tied), per sequence of
    ``seq`` tokens. The tied embedding is registered first, so its gradient is complete only
    at the very end of backprop; the output projection's FLOPs sit after the last block."""
    out = [Tensor(vocab * d, 0.0), Tensor(seq * d, 0.0)]
    attention = 4.0 * seq * seq * d  # scores and weighted sum, per layer and sequence
    for _ in range(layers):
        out += _bn(d)
        out += _linear(d, 3 * d, 2.0 * d * 3 * d * seq + attention)
        out += _linear(d, d, 2.0 * d * d * seq)
        out += _bn(d)
        out += _linear(d, 4 * d, 2.0 * d * 4 * d * seq)
        out += _linear(4 * d, d, 2.0 * 4 * d * d * seq)
    return out + _bn(d) + [Tensor(0, 2.0 * d * vocab * seq)]


def resnet50() -> Workload:
    profile = StepTimeProfile.load(PROFILES, "resnet50")
    tensors = resnet50_tensors()
    return Workload("resnet50", profile, ddp_buckets(tensors), 64,
                    sum(t.params for t in tensors))


def vgg16() -> Workload:
    profile = StepTimeProfile.load(PROFILES, "vgg16")
    tensors = vgg16_tensors()
    return Workload("vgg16", profile, ddp_buckets(tensors), 64,
                    sum(t.params for t in tensors))


def gpt2_medium() -> Workload:
    """Step time estimated, not measured: 3x the forward FLOPs at TRANSFORMER_MFU of the H100's
    bf16 peak, plus a per-step constant."""
    tensors = gpt2_medium_tensors()
    per_sample = 3 * sum(t.flops for t in tensors) / (TRANSFORMER_MFU * H100_BF16_FLOPS)
    profile = StepTimeProfile(per_sample, TRANSFORMER_STEP_OVERHEAD_S, "gpt2-medium")
    return Workload("gpt2-medium", profile, ddp_buckets(tensors), 8,
                    sum(t.params for t in tensors))


MODELS = {"resnet50": resnet50, "vgg16": vgg16, "gpt2-medium": gpt2_medium}

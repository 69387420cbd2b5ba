"""Gradient buckets quantized where they live, and copied to the host as int32 lanes.

A CUDA bucket is quantized on its GPU (:mod:`host_lib.pytorch.quantize_torch`, bit-identical to the
host quantizer), and its lanes and block exponents are copied into pinned host memory on a side
stream; the communicator's I/O thread waits for that copy only when it reaches the bucket. Nothing
here waits for the GPU, so DDP's hook returns at once, even while the backward pass's kernels are
still queued, and the copy of bucket k+1 runs while bucket k is on the network. The host never
touches the float32 gradient, except to re-quantize the few blocks a repair needs, and for the gloo
fallback. On a CPU tensor the same steps run in place (no stream, no pinning), which is how they are
tested without a GPU.
"""

from __future__ import annotations

import numpy as np
import torch

from host_lib.engine.quantize import num_blocks, qbits
from host_lib.pytorch import quantize_torch
from protocol.constants import LANES


def _on_device(values: np.ndarray, device: torch.device) -> torch.Tensor:
    """``values`` as int32 on ``device``, without waiting for the work queued there: a copy
    from pageable memory would hold the hook until the backward pass's kernels before it ran."""
    host = torch.from_numpy(values.astype(np.int32))
    if device.type != "cuda":
        return host
    return host.pin_memory().to(device, non_blocking=True)


class HostBuffers:
    """Host buffers reused per key, pinned where the data comes from a GPU (a copy into
    pageable memory cannot overlap), so each bucket lands in the same memory every iteration."""

    def __init__(self):
        self._buffers: dict[object, torch.Tensor] = {}

    def get(self, key, shape: tuple[int, ...], dtype: torch.dtype, pinned: bool
            ) -> torch.Tensor:
        buf = self._buffers.get(key)
        if buf is None or tuple(buf.shape) != tuple(shape) or buf.dtype != dtype:
            buf = self._buffers[key] = torch.empty(shape, dtype=dtype, pin_memory=pinned)
        return buf

    def all(self) -> list[torch.Tensor]:
        return list(self._buffers.values())


class StagedBucket:
    """One bucket's lanes on their way to the host (see the module doc)."""

    def __init__(self, tensor: torch.Tensor, scales: np.ndarray, lanes: torch.Tensor,
                 exps: torch.Tensor, copied: torch.cuda.Event | None, bits: int):
        self.tensor = tensor.detach().reshape(-1)
        self.size = self.tensor.numel()
        self.scales = scales
        self._lanes, self._exps, self._copied, self._bits = lanes, exps, copied, bits

    def wait(self) -> tuple[np.ndarray, np.ndarray]:
        """The host lanes (nblocks, LANES) int32 and block exponents, once copied."""
        if self._copied is not None:
            self._copied.synchronize()
        return self._lanes.numpy(), self._exps.numpy()

    def requantize(self, blocks: np.ndarray, scales: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
        """The given blocks again, with other scales (a repair), on the device."""
        nb = num_blocks(self.size)
        padded = torch.nn.functional.pad(self.tensor, (0, nb * LANES - self.size))
        index = torch.from_numpy(blocks.astype(np.int64)).to(self.tensor.device)
        lanes, exps = quantize_torch.quantize(padded.view(nb, LANES)[index].reshape(-1),
                                              torch.from_numpy(scales.astype(np.int32)),
                                              self._bits)
        return lanes.cpu().numpy(), exps.cpu().numpy()

    def host_values(self) -> np.ndarray:
        """The float32 gradient on the host (for the gloo fallback)."""
        return self.tensor.float().cpu().numpy()


class DeviceStaging:
    """Quantizes buckets on their device into reusable (pinned, for CUDA) host buffers."""

    def __init__(self, n_workers: int):
        self.bits = qbits(n_workers)
        self.host = HostBuffers()
        self._stream = torch.cuda.Stream() if torch.cuda.is_available() else None

    def stage(self, key, tensor: torch.Tensor, scales: np.ndarray) -> StagedBucket:
        """Start quantizing ``tensor`` (float32) with ``scales`` (one per block) and copying
        the result to the host; returns at once for a CUDA tensor."""
        flat = tensor.detach().reshape(-1)
        lanes, exps = quantize_torch.quantize(flat, _on_device(scales, flat.device), self.bits)
        host = (self.host.get((key, "lanes"), lanes.shape, torch.int32, flat.is_cuda),
                self.host.get((key, "exps"), exps.shape, torch.int32, flat.is_cuda))
        copied = None
        if flat.is_cuda:
            self._stream.wait_stream(torch.cuda.current_stream(flat.device))
            with torch.cuda.stream(self._stream):
                host[0].copy_(lanes, non_blocking=True)
                host[1].copy_(exps, non_blocking=True)
                lanes.record_stream(self._stream)
                exps.record_stream(self._stream)
                copied = torch.cuda.Event()
                copied.record(self._stream)
        else:
            host[0].copy_(lanes)
            host[1].copy_(exps)
        return StagedBucket(tensor, scales, host[0], host[1], copied, self.bits)

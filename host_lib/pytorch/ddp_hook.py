"""A DDP communication hook that aggregates gradient buckets in the switch.

(No ``from __future__ import annotations`` here: DDP compares the hook's annotations with
the real ``dist.GradBucket`` and ``Future[Tensor]`` types.)

In the style of ``torch.distributed.algorithms.ddp_comm_hooks``::

    state = SaAtpHookState(communicator, weights=[1.0] * world_size)   # mean, as allreduce_hook
    ddp_model.register_comm_hook(state, sa_atp_hook)

The hook hands each bucket to the communicator's I/O thread and returns at once with a
``torch.futures.Future`` that completes with the averaged bucket (or the sum, for training loops
that normalise the loss themselves). CUDA float32 buckets are quantized on their GPU and only their
int32 lanes cross to pinned host memory, on a side stream, overlapping the network transfer of the
bucket before (:mod:`host_lib.pytorch.device_staging`); other CUDA buckets are staged as float32
through pinned memory. A failed switch path falls back to gloo inside the communicator (see
:mod:`host_lib.pytorch.fallback`), so the future always carries the right values or an exception.
"""

import concurrent.futures
import threading
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from host_lib.communicator import SwitchCommunicator
from host_lib.engine.rounds import CallStats, RoundPlan
from host_lib.pytorch.device_staging import DeviceStaging, HostBuffers


@dataclass
class SaAtpHookState:
    """State for :func:`sa_atp_hook`, one per DDP model and rank.

    Args:
        communicator: the rank's :class:`~host_lib.communicator.SwitchCommunicator` (from
            :func:`host_lib.pytorch.connect.hook_state`, or built by hand).
        weights: one per worker; each block of the result is divided by the weights of the
            workers summed in it, so ``[1.0] * world_size`` averages as DDP's default
            ``allreduce_hook`` does. None leaves the plain sum, for training loops that
            normalise the loss themselves.
        plan: how this worker takes part in the current iteration
            (:class:`~host_lib.engine.rounds.RoundPlan`), set per iteration by a straggler
            policy; None takes part plainly.
        quantize_on_device: None quantizes CUDA float32 buckets on their GPU and copies only
            int32 lanes to pinned host memory; True sends every float32 bucket that way (a CPU
            tensor too); False stages every bucket as float32 on the host.

    After each iteration ``drain_stats()`` returns every bucket's
    :class:`~host_lib.engine.rounds.CallStats`.

    Example::

        comm = SwitchCommunicator(CommunicatorConfig.from_spec(spec, rank, run), link)
        state = SaAtpHookState(comm, weights=[1.0] * dist.get_world_size())
        ddp_model.register_comm_hook(state, sa_atp_hook)
    """

    communicator: SwitchCommunicator
    weights: list[float] | None = None
    plan: RoundPlan | None = None
    quantize_on_device: bool | None = None
    stats: list[CallStats] = field(default_factory=list, init=False, repr=False)  # per bucket
    staged: HostBuffers = field(default_factory=HostBuffers, init=False, repr=False)
    device: DeviceStaging | None = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def on_device(self, tensor: torch.Tensor) -> bool:
        if tensor.dtype != torch.float32 or self.quantize_on_device is False:
            return False
        return bool(self.quantize_on_device) or tensor.is_cuda

    def staging(self, bucket_index: int, tensor: torch.Tensor) -> torch.Tensor:
        """A float32 CPU view or copy of the bucket (pinned, for CUDA buckets)."""
        if tensor.device.type == "cpu" and tensor.dtype == torch.float32:
            return tensor.detach()
        buf = self.staged.get(bucket_index, (tensor.numel(),), torch.float32,
                              tensor.is_cuda and torch.cuda.is_available())
        buf.copy_(tensor.detach().reshape(-1), non_blocking=tensor.is_cuda)
        if tensor.is_cuda:
            torch.cuda.current_stream(tensor.device).synchronize()
        return buf

    def record(self, stats: CallStats) -> None:
        with self._lock:
            self.stats.append(stats)

    def drain_stats(self) -> list[CallStats]:
        """The buckets' statistics since the last call (for per-iteration logs)."""
        with self._lock:
            out, self.stats = self.stats, []
        return out


def sa_atp_hook(state: SaAtpHookState, bucket: dist.GradBucket
                ) -> torch.futures.Future[torch.Tensor]:
    """DDP communication hook: the bucket's allreduce through the switch.

    Args:
        state: the rank's :class:`SaAtpHookState`.
        bucket: the gradient bucket DDP hands the hook.

    Returns:
        A ``torch.futures.Future`` that completes, on the communicator's I/O thread, with the
        bucket overwritten in place by the (weighted) sum, on the bucket's device. The hook
        itself returns at once: it waits neither for the network nor for the GPU. If the switch
        cannot complete the call and the communicator has a fallback group, the values come
        through gloo instead; otherwise the future carries the exception.

    Example::

        ddp_model.register_comm_hook(state, sa_atp_hook)
    """
    tensor = bucket.buffer()
    comm, tag = state.communicator, ("bucket", bucket.index(), tensor.numel())
    if state.on_device(tensor):
        if state.device is None:
            state.device = DeviceStaging(comm.config.n_workers)
        staged = state.device.stage(bucket.index(), tensor, comm.scales_for(tag, tensor.numel()))
        pending = comm.allreduce_staged_async(staged, state.weights, tag, state.plan)
    else:
        host = state.staging(bucket.index(), tensor)
        pending = comm.allreduce_async(host.numpy(), weights=state.weights, tag=tag,
                                       plan=state.plan)

    def write_back(result, stats) -> torch.Tensor:
        state.record(stats)
        if tensor.is_cuda:
            with torch.cuda.device(tensor.device):
                tensor.copy_(torch.from_numpy(result).view_as(tensor))
        else:
            tensor.copy_(torch.from_numpy(result).view_as(tensor))
        return tensor

    return completing(pending, write_back)


def completing(pending: concurrent.futures.Future, finish) -> torch.futures.Future:
    """A torch future of ``finish(result, stats)``, called on the communicator's I/O thread when
    its call ``pending`` is done; an exception from either reaches the torch future."""
    future: torch.futures.Future = torch.futures.Future()

    def done(call: concurrent.futures.Future) -> None:
        try:
            future.set_result(finish(*call.result()))
        except BaseException as exc:  # noqa: BLE001 - delivered through the future
            future.set_exception(exc)

    pending.add_done_callback(done)
    return future

"""``sa_atp``: a torch.distributed backend whose float32 allreduce is summed in the switch.

    import host_lib.pytorch.c10d_backend                     # registers the backend
    dist.init_process_group("sa_atp", pg_options=SwitchOptions("job.toml", udp_ports="ports.json"))
    dist.all_reduce(grad)                       # float32 SUM or AVG on CPU: through the switch
    dist.all_reduce(counts)                     # any other dtype or op: gloo
    dist.all_gather(...), dist.broadcast(...)   # every other collective: gloo

or ``dist.new_group(backend="sa_atp", pg_options=...)`` beside a gloo world. Group rank r is
worker r of the job.

It is plain Python: the backend's creator returns a ``dist.ProcessGroup`` subclass, which
torch.distributed (as of the tested 2.13) takes as the process group itself and whose Python
``allreduce`` it calls, from ``dist.all_reduce`` and from DDP's reducer alike. A gloo backend
registered on the group for CPU serves every collective the class does not override; a second
gloo group, of the group's own store, is the communicator's fallback (its per-call agreement
must never interleave with the user's gloo collectives).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed.distributed_c10d import PrefixStore, ProcessGroupGloo

from host_lib.pytorch.connect import communicator
from host_lib.pytorch.ddp_hook import completing
from host_lib.pytorch.fallback import FallbackGroup
from protocol.jobspec import JobSpec

NAME = "sa_atp"


@dataclass(frozen=True)
class SwitchOptions:
    """Where the switch is and which job this group is (``pg_options`` of the group);
    ``config`` holds CommunicatorConfig fields (silence_timeout, metrics_listen, ...)."""

    job_spec: str | Path | JobSpec
    udp_ports: str | Path | dict | None = None
    interface: str | None = None
    config: dict = field(default_factory=dict)


class SwitchWork(dist.Work):
    """A collective under way on the communicator's I/O thread."""

    def __init__(self, future: torch.futures.Future):
        super().__init__()
        self.future = future

    def wait(self, timeout=None) -> bool:
        self.future.wait()  # raises the call's exception, if any
        return True

    def is_completed(self) -> bool:
        return self.future.done()

    def get_future(self) -> torch.futures.Future:
        return self.future


class SwitchProcessGroup(dist.ProcessGroup):
    def __init__(self, store: dist.Store, rank: int, size: int, timeout, options: SwitchOptions):
        super().__init__(rank, size)
        self.gloo = ProcessGroupGloo(PrefixStore("gloo", store), rank, size, timeout)
        self._register_backend(torch.device("cpu"), dist.ProcessGroup.BackendType.GLOO,
                               self.gloo)
        fallback = FallbackGroup(ProcessGroupGloo(PrefixStore("fallback", store), rank, size,
                                                  timeout))
        self.communicator = communicator(options.job_spec, rank, size, store, fallback,
                                       udp_ports=options.udp_ports, interface=options.interface,
                                       **options.config)

    def getBackendName(self) -> str:
        return NAME

    def allreduce(self, tensors, opts=None):
        opts = opts or dist.AllreduceOptions()
        if isinstance(tensors, torch.Tensor):
            tensors = [tensors]
        average = opts.reduceOp == dist.ReduceOp.AVG  # (ReduceOp == RedOpType, not the reverse)
        if not (average or opts.reduceOp == dist.ReduceOp.SUM) \
                or not all(map(_switchable, tensors)):
            return self.gloo.allreduce(tensors, opts)
        flat = torch.cat([t.detach().reshape(-1) for t in tensors])
        weights = [1.0] * self.size() if average else None
        pending = self.communicator.allreduce_async(flat.numpy(), weights=weights)

        def write_back(result, _stats):
            offset = 0
            for t in tensors:
                t.copy_(torch.from_numpy(result[offset:offset + t.numel()]).view_as(t))
                offset += t.numel()
            return tensors

        return SwitchWork(completing(pending, write_back))

    def shutdown(self) -> None:
        self.communicator.close()
        super().shutdown()


def _switchable(t: torch.Tensor) -> bool:
    return t.dtype == torch.float32 and t.device.type == "cpu" and t.layout == torch.strided


def _create(backend_options, pg_options: SwitchOptions | None) -> SwitchProcessGroup:
    if not isinstance(pg_options, SwitchOptions):
        raise ValueError("the sa_atp backend needs pg_options=SwitchOptions(job spec, "
                         "udp_ports=... or interface=...)")
    return SwitchProcessGroup(backend_options.store, backend_options.group_rank,
                              backend_options.group_size, backend_options.timeout, pg_options)


dist.Backend.register_backend(NAME, _create, extended_api=True, devices=["cpu"])

"""Completing an allreduce through torch.distributed (gloo) when the switch cannot.

Each communicator owns its own gloo process group, created collectively by every worker, so that
its agreement collective never interleaves with the training loop's own collectives. After every
call all workers run :meth:`FallbackGroup.agree`: if any of them could not finish through the
switch, all of them complete the call through gloo, so no worker applies a switch result while
another applies a different one, and none applies a call twice.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.distributed as dist


class FallbackGroup:
    def __init__(self, group: dist.ProcessGroup):
        self.group = group

    @classmethod
    def create(cls, timeout=None) -> FallbackGroup:
        """A new gloo group over all ranks; every rank must call this, in the same order."""
        kwargs = {} if timeout is None else {"timeout": timeout}
        return cls(dist.new_group(backend="gloo", **kwargs))

    def agree(self, failed: bool, next_chunk: int) -> tuple[bool, int]:
        """(did any worker fail, the largest next chunk id any worker reached). After a
        fallback every worker continues from that id, which is newer than anything the
        abandoned call left in the switch."""
        flags = torch.tensor([int(failed), next_chunk], dtype=torch.int64)
        dist.all_reduce(flags, op=dist.ReduceOp.MAX, group=self.group)
        return bool(flags[0]), int(flags[1]) & 0xFFFFFFFF

    def allreduce(self, values: np.ndarray, divisor: float = 1.0, contribute: bool = True
                  ) -> np.ndarray:
        """The sum over all workers (a worker that sits out adds zeros), divided by
        ``divisor``."""
        tensor = torch.from_numpy(values.copy() if contribute else np.zeros_like(values))
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM, group=self.group)
        if divisor != 1.0:
            tensor /= divisor
        return tensor.numpy()

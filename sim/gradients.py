"""What the simulated aggregates are: what a policy's ``observe`` sees and what accuracy the
model reaches.

* :class:`DigitsTraining` — the testbed's own training, in-process: the digits MLP, the
  global-batch sampler, SGD with momentum (experiments/train.py), updated with exactly the samples
  each iteration's plan sums (contributors' shares, k-of-n's first k, Partial-Reduce's stale,
  discounted gradients on the model they were started on). Used to replay testbed runs; it has
  no quantization, which changes a sum by less than the quantizer's bound.
* :class:`SignFlips` — synthetic aggregates for jobs whose gradients the simulator does not
  compute: each iteration flips the signs of a fixed fraction of coordinates, the statistic
  k-of-n's ``observe`` reads.
"""

from __future__ import annotations

import numpy as np
import torch

from experiments import digits
from host_lib.scheduling.sampling import GlobalBatchSampler, split

LEARNING_RATE = 0.1  # experiments/train.py's defaults
MOMENTUM = 0.9


class DigitsTraining:
    def __init__(self, global_batch: int, seed: int = 0):
        torch.set_num_threads(1)
        self.xtr, self.ytr, self.xte, self.yte = digits.load(seed)
        self.net = digits.model(seed)
        self.opt = torch.optim.SGD(self.net.parameters(), lr=LEARNING_RATE, momentum=MOMENTUM)
        self.sampler = GlobalBatchSampler(len(self.xtr), global_batch, seed)

    def gradient(self, iteration: int, shares, worker: int) -> np.ndarray:
        """Sum of per-sample gradients over ``worker``'s share of the iteration's batch, on
        the current model."""
        batch = self.sampler.batch(iteration)[:sum(shares)]
        mine = split(batch, list(shares))[worker]
        self.net.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(self.net(self.xtr[mine]), self.ytr[mine],
                                                 reduction="sum")
        loss.backward()
        return torch.cat([p.grad.reshape(-1) for p in self.net.parameters()]).numpy().copy()

    def apply(self, gradients: list[np.ndarray], weights: list[float]) -> np.ndarray:
        """One SGD step with the sum of ``gradients`` over the sum of ``weights``; returns the
        aggregate (what every worker observes)."""
        total = (np.sum(gradients, axis=0) / max(sum(weights), 1e-12)).astype(np.float32)
        offset = 0
        for p in self.net.parameters():
            p.grad = torch.from_numpy(total[offset:offset + p.numel()]).view_as(p).clone()
            offset += p.numel()
        self.opt.step()
        return total

    def accuracy(self) -> float:
        return digits.accuracy(self.net, self.xte, self.yte)


class SignFlips:
    """Aggregates of ``size`` coordinates, a ``rate`` of whose signs flip every iteration."""

    def __init__(self, rate: float, size: int = 1024, seed: int = 0):
        self.rate = rate
        self.rng = np.random.default_rng(seed)
        self.current = self.rng.standard_normal(size)

    def next(self) -> np.ndarray:
        flip = self.rng.random(len(self.current)) < self.rate
        self.current = np.where(flip, -self.current, self.current)
        return self.current.copy()

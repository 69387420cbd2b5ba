"""The small real workload of the examples: scikit-learn's bundled digits data set (1797 8x8
images of handwritten digits, shipped with the package: nothing is downloaded) and a small MLP
(2410 parameters, 38 packets per gradient, so that the pure-Python switch keeps up)."""

from __future__ import annotations

import numpy as np
import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split


def load(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(train inputs, train labels, test inputs, test labels); pixels scaled to [0, 1]."""
    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.int64)
    xtr, xte, ytr, yte = train_test_split(x, y, test_size=0.2, random_state=seed, stratify=y)
    return (torch.from_numpy(xtr), torch.from_numpy(ytr), torch.from_numpy(xte),
            torch.from_numpy(yte))


def model(seed: int = 0, padding: int = 0) -> torch.nn.Module:
    """The MLP; with ``padding``, wrapped so that its gradient carries that many more
    elements (:class:`PaddedGradient`)."""
    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10))
    return PaddedGradient(net, padding) if padding else net


class PaddedGradient(torch.nn.Module):
    """A model whose gradient has ``padding`` more elements, all zero: they are communicated
    with the real gradient, so the job communicates as much as a larger model while its
    compute stays the small one's (the policy harness's communication-heavy scenarios). The
    output touches them with weight zero, so they get a (zero) gradient and DDP sums them."""

    def __init__(self, net: torch.nn.Module, padding: int):
        super().__init__()
        self.net = net
        self.padding = torch.nn.Parameter(torch.zeros(padding))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x) + 0.0 * self.padding[:1].sum()


@torch.no_grad()
def accuracy(net: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    return float((net(x).argmax(dim=1) == y).float().mean())

"""Policies by name, for command lines and the evaluation harness."""

from __future__ import annotations

from host_lib.policies.base import Policy, Synchronous
from host_lib.policies.sa_atp import SaAtp

POLICIES = {
    "synchronous": lambda n, b: Synchronous(n, b),
    "sa-atp-takeover": lambda n, b: SaAtp(n, b, takeover=True, compute_help=False),
    "sa-atp": lambda n, b: SaAtp(n, b, takeover=True, compute_help=True),
}


def make_policy(name: str, n_workers: int, global_batch: int) -> Policy:
    try:
        factory = POLICIES[name]
    except KeyError:
        raise ValueError(f"unknown policy {name!r}; choose from {sorted(POLICIES)}") from None
    return factory(n_workers, global_batch)

"""Policies by name, for command lines and the evaluation harness."""

from __future__ import annotations

from host_lib.scheduling.policies.base import Policy, Synchronous
from host_lib.scheduling.policies.boa import Boa
from host_lib.scheduling.policies.dpar import Dpar
from host_lib.scheduling.policies.k_of_n import KOfN
from host_lib.scheduling.policies.partial_reduce import PartialReduce
from host_lib.scheduling.policies.sa_atp import SaAtp

POLICIES = {
    "synchronous": lambda n, b: Synchronous(n, b),
    "sa-atp-takeover": lambda n, b: SaAtp(n, b, takeover=True, compute_help=False),
    "sa-atp-resplit": lambda n, b: SaAtp(n, b, takeover=True, compute_help=True,
                                         work_stealing=False),
    "sa-atp": lambda n, b: SaAtp(n, b, takeover=True, compute_help=True),
    "sa-atp-no-takeover": lambda n, b: SaAtp(n, b, takeover=False, compute_help=True),
    "dpar": lambda n, b: Dpar(n, b),
    "boa": lambda n, b: Boa(n, b),
    "partial-reduce": lambda n, b: PartialReduce(n, b),
    "k-of-n": lambda n, b: KOfN(n, b),
}


def make_policy(name: str, n_workers: int, global_batch: int) -> Policy:
    try:
        factory = POLICIES[name]
    except KeyError:
        raise ValueError(f"unknown policy {name!r}; choose from {sorted(POLICIES)}") from None
    return factory(n_workers, global_batch)

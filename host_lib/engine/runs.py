"""A job run's identity (docs/protocol.md §4.5).

A job id outlives the processes that use it: torchrun restarts its workers, a crashed worker
rejoins, a user starts the same job spec again. Every run therefore carries a 32-bit identity in
every frame, and the switch treats the state of an older run as empty and refuses the packets of
an older run than its slot's. Identities are the start time in units of 10 ms (mod 2^32), so a
later run is newer in serial-number arithmetic for about 248 days; the controller clears a job's
aggregators whenever it admits the job, so no state lives that long. The workers of one run agree
on one identity: rank 0 picks it and publishes it in the torch.distributed store.
"""

from __future__ import annotations

import time

_KEY = "sa-atp/run/{job}"


def new_run_id() -> int:
    """An identity newer than every earlier run's (never 0, which a cleared slot holds)."""
    return (time.time_ns() // 10_000_000) & 0xFFFFFFFF or 1


def agree_run_id(store, rank: int, job: int) -> int:
    """The run identity every rank of this launch uses: rank 0 picks it, the others read it
    from the store (waiting for it if need be). The store is new with each launch, so every
    launch of the job is a new run."""
    key = _KEY.format(job=job)
    if rank == 0:
        store.set(key, str(new_run_id()))
    return int(store.get(key))

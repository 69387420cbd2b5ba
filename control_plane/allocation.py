"""The allocation of switch resources to admitted jobs: slot ranges, job indices, the shared pool.

A job spec (``protocol/jobspec.py``) is validated and its resources allocated here before the
controller writes anything to a switch, so a spec that cannot be admitted leaves the switch
untouched.

Slot ranges are allocated per pipe: on Tofino every pipe has its own registers and a job's
aggregators are its workers' pipe's, so jobs of different pipes may hold the same slots, and
every pipe's registers serve jobs (a v1model switch is one pipe). Job indices (counters,
multicast groups) are switch-wide; the pool is the same top slots in every pipe, each pipe's
its own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from protocol import constants as P
from protocol.jobspec import JobSpec, SpecError, check_int


def one_pipe(spec: JobSpec) -> int:
    """The pipe of every job on a switch of one pipe."""
    return 0


@dataclass(frozen=True)
class AdmittedJob:
    """A job spec with the switch resources allocated to it."""

    spec: JobSpec
    job_index: int  # 1..MAX_JOBS-1: counter index and multicast group
    slot_base: int
    pool_base: int = 0  # the shared pool's first slot, where borrowed slots sum

    @property
    def group(self) -> int:
        """Multicast group of the job's workers (above the flood group)."""
        return 0x100 + self.job_index

    def aggregator_range(self) -> range:
        """The job's aggregators: the state of every slot of its window (a borrowed slot's
        lanes are the pool's)."""
        return range(2 * self.slot_base, 2 * (self.slot_base + self.spec.window))

    def to_dict(self) -> dict:
        return {"spec": self.spec.to_dict(), "job_index": self.job_index,
                "slot_base": self.slot_base, "pool_base": self.pool_base}

    @classmethod
    def from_dict(cls, d: dict) -> AdmittedJob:
        return cls(JobSpec.from_dict(d["spec"]), d["job_index"], d["slot_base"],
                   d.get("pool_base", 0))


@dataclass
class Allocator:
    """First-fit allocation of slot ranges (per pipe) and job indices (switch-wide) over the
    switch's slots; the top ``pool_slots`` of them are the shared pool that jobs borrow from
    (docs/protocol.md §4.6), never part of a job's range."""

    num_slots: int = P.NUM_SLOTS
    max_jobs: int = P.MAX_JOBS
    jobs: dict[int, AdmittedJob] = field(default_factory=dict)
    pool_slots: int = 0

    def __post_init__(self) -> None:
        check_int("pool_slots", self.pool_slots, 0, self.num_slots)

    @property
    def pool_base(self) -> int:
        return self.num_slots - self.pool_slots

    def pool_range(self) -> range:
        """The pool's aggregators."""
        return range(2 * self.pool_base, 2 * self.num_slots)

    def resize_pool(self, pool_slots: int) -> None:
        """Give the pool ``pool_slots`` slots: only while no admitted job borrows (their
        entries name the pool's place) and no job's range reaches into the new pool."""
        check_int("pool_slots", pool_slots, 0, self.num_slots)
        borrowing = sorted(j.spec.id for j in self.jobs.values() if j.spec.borrow)
        if borrowing and pool_slots != self.pool_slots:
            raise SpecError(f"jobs {borrowing} borrow from the pool: remove them before "
                            f"resizing it")
        top = max((j.slot_base + j.spec.window for j in self.jobs.values()), default=0)
        if top > self.num_slots - pool_slots:
            raise SpecError(f"a pool of {pool_slots} slots would start at slot "
                            f"{self.num_slots - pool_slots}, inside admitted jobs' ranges "
                            f"(they reach slot {top - 1})")
        self.pool_slots = pool_slots

    def allocate(self, spec: JobSpec, pipe_of: Callable[[JobSpec], int] = one_pipe
                 ) -> AdmittedJob:
        """Place a job; ``pipe_of`` tells the pipe of a job's aggregators (one pipe if not
        given)."""
        if spec.id in self.jobs:
            raise SpecError(f"job {spec.id} is already admitted")
        used_index = {j.job_index for j in self.jobs.values()}
        free_index = next((i for i in range(1, self.max_jobs) if i not in used_index), None)
        if free_index is None:
            raise SpecError(f"no job index left: {self.max_jobs - 1} jobs are admitted")
        if spec.borrow > self.pool_slots:
            raise SpecError(f"job {spec.id} borrows {spec.borrow} slots but the switch's shared "
                            f"pool has {self.pool_slots} (the controller's pool_slots)")
        pipe = pipe_of(spec)
        beside = [j for j in self.jobs.values() if pipe_of(j.spec) == pipe]
        base = self._first_fit(spec.window, beside)
        if base is None:
            free = self.pool_base - sum(j.spec.window for j in beside)
            raise SpecError(f"job {spec.id} asks for {spec.window} slots but no free range of "
                            f"that size is left in pipe {pipe} ({free} of {self.pool_base} "
                            f"slots free)")
        return AdmittedJob(spec, free_index, base, self.pool_base if spec.borrow else 0)

    def _first_fit(self, size: int, jobs: list[AdmittedJob]) -> int | None:
        start = 0
        for job in sorted(jobs, key=lambda j: j.slot_base):
            if job.slot_base - start >= size:
                return start
            start = job.slot_base + job.spec.window
        return start if self.pool_base - start >= size else None

    def add(self, job: AdmittedJob) -> None:
        self.jobs[job.spec.id] = job

    def remove(self, job_id: int) -> AdmittedJob:
        try:
            return self.jobs.pop(job_id)
        except KeyError:
            raise SpecError(f"job {job_id} is not admitted") from None

"""Slot takeover, the helper's side (docs/protocol.md §4.3, §7.2).

When the chunks of leading workers wait only for a straggler, a leading worker — the chunk's
*helper* — asks the switch for the slot's partial aggregate, which frees the slot for the next
chunks. The helper then collects the missing contributions on the host (the straggler sends them
to it directly) and sends the completed sum through the switch, which multicasts it.

:class:`HelperDuty` is one chunk's collection at its helper. It keeps the switch's partial and
the contributions that came directly apart until it can tell which contributions the partial
already holds, so no contribution is ever counted twice, whichever arrives first and however
often. Two helpers of the same chunk (one replaced after a timeout) compute the same exact sum.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from protocol import constants as P


@dataclass(frozen=True)
class RoundPlan:
    """How this worker takes part in a call, decided per iteration by the straggler policy.

    ``helpers`` are the leading workers in duty order: chunk c's helper is
    ``helpers[c % len(helpers)]``, the same for every worker; the next one in order steps in if
    the first is slow (or a straggler itself), and the switch then names it. A worker that
    missed who took a chunk over sends to the first, which forwards. No helpers means no
    takeover. A helper takes a chunk over once it has waited ``takeover_after`` seconds (at
    least two RTOs) and, where ``stragglers`` are known, only stragglers are missing. ``expected`` is the bitmap of workers whose contributions
    complete a chunk (0: every worker of the job).
    """

    contribute: bool = True  # False: sit the call out, recover results with probes (DPAR)
    fanin: int = 0  # in-band fan-in for the switch (0: the job's)
    helpers: tuple[int, ...] = ()
    stragglers: frozenset[int] = frozenset()
    expected: int = 0
    takeover_after: float = 0.0

    def helper(self, chunk: int) -> int | None:
        if not self.helpers:
            return None
        return self.helpers[chunk % len(self.helpers)]


@dataclass
class HelperDuty:
    """One taken-over chunk at its helper."""

    chunk: int
    slot: int
    flags: int  # the shadow-set bit
    expected: int  # bitmap that completes the chunk
    scale: int | None = None
    partial: np.ndarray | None = None  # the switch's partial sum, once received
    partial_bitmap: int = 0
    exp: int = 0
    direct: dict[int, np.ndarray] = field(default_factory=dict)  # worker -> lanes sent to us
    result: np.ndarray | None = None
    result_bitmap: int = 0
    result_count: int = 0
    created_at: float = field(default_factory=time.monotonic)
    completed_at: float | None = None

    def add_partial(self, lanes, bitmap: int, exp: int, scale: int) -> None:
        if self.partial is not None or self.result is not None:
            return
        self._check_scale(scale)
        self.partial = np.array(lanes, np.int32)
        self.partial_bitmap = bitmap
        self.exp = max(self.exp, exp)

    def add_direct(self, worker: int, lanes, exp: int, scale: int) -> None:
        if worker in self.direct or self.result is not None:
            return
        self._check_scale(scale)
        self.direct[worker] = np.array(lanes, np.int32)
        self.exp = max(self.exp, exp)

    def _check_scale(self, scale: int) -> None:
        if self.scale is None:
            self.scale = scale
        elif scale != self.scale:
            raise ValueError(f"chunk {self.chunk}: contribution with scale {scale:#x}, the "
                             f"chunk's is {self.scale:#x}")

    def try_complete(self, now: float) -> bool:
        """Sum the partial and the direct contributions it does not hold, once together they
        cover every expected worker."""
        if self.result is not None:
            return False
        direct_bits = sum(1 << w for w in self.direct)
        have = self.partial_bitmap | direct_bits
        if have & self.expected != self.expected:
            return False
        total = np.zeros(P.LANES, np.int32) if self.partial is None else self.partial.copy()
        for worker, lanes in self.direct.items():
            if not self.partial_bitmap >> worker & 1:
                total += lanes  # int32 arithmetic wraps exactly like the switch's registers
        self.result = total
        self.result_bitmap = have
        self.result_count = bin(have).count("1")
        self.completed_at = now
        return True

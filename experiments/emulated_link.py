"""Emulated host links for experiments: communication that takes as long as it would on a
cluster's network, for every method alike.

On the development machine every host and the switch share one kernel, so a gloo allreduce
moves its bytes through loopback memory copies, while the embedded switch's path runs through
a software pipeline: the two baselines would otherwise be compared on networks of different
speeds. An :class:`EmulatedLink` gives each worker a link on which its gradient takes
``wire_s`` seconds to send (the scaled-down equivalent of a real model's gradient at a real
link rate, as the emulated compute is a real model's step time) and holds each iteration's
communication to what the links allow. Neither path can finish before the last worker it
needs has started sending (the *anchor*: the latest start among the plan's contributors, or
the fan-in-th earliest where the switch completes with fewer), and then:

* **In-network aggregation** (the switch): each worker's gradient crosses its link once up and
  its sum once down, the two directions at once, so the aggregate is complete ``wire_s`` after
  the anchor.
* **Ring allreduce** (gloo): each worker sends and receives ``2 (n - 1) / n`` gradients (a
  reduce-scatter and an all-gather), ``2 (n - 1) / n * wire_s`` after the anchor.

That factor is the traffic in-network aggregation saves (ATP, SwitchML). The time each path
really takes on this machine still counts: the link is a floor, not a replacement.

The workers of a job run on one machine here, so they tell each other when they started
through a small shared file (``starts``), not the network.
"""

from __future__ import annotations

import mmap
import os
import time
from pathlib import Path

import numpy as np

from experiments.stragglers import StepTimeProfile, pad_to

LINK_GBPS = 100.0  # the links' default rate in the harness and the main job
_ROWS = 64  # iterations the board remembers; workers are never that far apart


def wire_ms(profiles: Path, network_model: str, compute_model: str, share: int,
            gbps: float) -> float:
    """How long a worker's gradient takes to cross its link at ``gbps`` (0: no emulation):
    the same multiple of an even share's emulated compute (``compute_model``'s step) as
    ``network_model``'s gradient at that rate is of that model's own step."""
    if not gbps:
        return 0.0
    net = StepTimeProfile.load(profiles, network_model)
    ratio = net.grad_bytes * 8 / (gbps * 1e9) / net.time(share)
    return 1e3 * ratio * StepTimeProfile.load(profiles, compute_model).time(share)


class EmulatedLink:
    """One worker's link; ``wire_s`` 0 emulates nothing (communication at this machine's
    speed). ``starts`` is the job's board of start times, a file every worker of the job
    opens (:meth:`create_board` makes it, once, before the others open it)."""

    def __init__(self, wire_s: float, world: int, rank: int, ring: bool, starts: Path | None):
        if wire_s < 0:
            raise ValueError(f"wire time must be >= 0, got {wire_s}")
        if wire_s and starts is None:
            raise ValueError("an emulated link needs the job's board of start times")
        self.rank, self.world = rank, world
        self.floor_s = (2 * (world - 1) / world if ring else 1.0) * wire_s
        self._board = None
        if wire_s:
            with open(starts, "r+b") as f:
                self._map = mmap.mmap(f.fileno(), 0)
            self._board = np.ndarray((_ROWS, world, 2), np.float64, self._map)

    @staticmethod
    def create_board(path: Path, world: int) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as f:
            f.truncate(_ROWS * world * 2 * 8)
            os.fsync(f.fileno())

    def start(self, iteration: int, contributes: bool = True) -> float:
        """This worker starts communicating for ``iteration``: now (perf_counter, the same clock
        in every process of the machine). A worker that sits the iteration out sends nothing
        the aggregate needs, so its start is not on the board."""
        now = time.perf_counter()
        if self._board is not None and contributes:
            row = self._board[iteration % _ROWS, self.rank]
            row[0] = now
            row[1] = iteration + 1  # written last: the start is valid once its tag is
        return now

    def finish(self, iteration: int, started: float, contributors: int, fanin: int) -> float:
        """Called when this worker's real communication for ``iteration`` has ended: waits
        until the links would have carried it; the time waited."""
        if self._board is None:
            return 0.0
        return pad_to(self.floor_s, self.anchor(iteration, started, contributors, fanin))

    def anchor(self, iteration: int, started: float, contributors: int, fanin: int) -> float:
        """When the last contribution the aggregate needs began to be sent; our own start if
        the board does not know (we sit the iteration out and the contributors are late)."""
        rows = self._board[iteration % _ROWS]
        starts = sorted(float(rows[w, 0]) for w in range(self.world)
                        if contributors >> w & 1 and rows[w, 1] == iteration + 1)
        needed = fanin or bin(contributors).count("1")
        return starts[needed - 1] if 0 < needed <= len(starts) else started

"""A call's big arrays (its DATA frames, its results, its per-chunk state), reused from call to
call.

A call of 2 M values has 10 MB of frames, 8 MB of sums and 2 MB of timers and flags. Fresh memory
costs a page fault per 4 KB the first time it is written: about 3 ms per 10 MB on the
development machine, a quarter of such a call's time at full speed. So the arrays of a call
whose rounds are gone are handed to the next call of about the same size. A round keeps its
call's buffers alive (the takeover keeps a worker's last few rounds, to answer peers), so
buffers go back to the pool only when no round holds them any more.

:meth:`CallBuffers.arrays` gives the arrays of one shard's round: every ``step``-th chunk of
the call from ``first`` on, as views, so each shard's results land in the call's arrays.
"""

from __future__ import annotations

import threading
import weakref

import numpy as np

from host_lib.engine.rounds import CHUNK_RESULT, CHUNK_STATE
from protocol.codec import FRAME_DTYPE

_KEPT = 8  # free buffers the pool keeps at most


class CallBuffers:
    """Frames, results and per-chunk state for up to ``capacity`` chunks."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.frames = np.empty(capacity, FRAME_DTYPE)
        self.named = {name: np.empty(capacity, dtype) for name, (dtype, _) in CHUNK_STATE.items()}
        self.named.update({name: np.zeros((capacity, *shape), dtype)
                           for name, (dtype, shape) in CHUNK_RESULT.items()})

    def arrays(self, n: int, first: int = 0, step: int = 1
               ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """The frames and named arrays of chunks ``first, first + step, ...`` of a call of
        ``n`` chunks (views)."""
        part = slice(first, n, step)
        return self.frames[part], {name: a[part] for name, a in self.named.items()}


class BufferPool:
    """Buffers of finished calls, for the next ones (see the module doc). Thread-safe."""

    def __init__(self):
        self._free: list[CallBuffers] = []
        self._lock = threading.Lock()

    def take(self, n: int) -> _Handle:
        """Buffers for ``n`` chunks: a free one that holds between n and 2n, or new ones. They
        return to the pool when the last reference to them goes."""
        with self._lock:
            fits = [b for b in self._free if n <= b.capacity <= 2 * n]
            buffers = min(fits, key=lambda b: b.capacity) if fits else None
            if buffers is not None:
                self._free.remove(buffers)
        if buffers is None:
            buffers = CallBuffers(n)
        handle = _Handle(buffers)
        weakref.finalize(handle, self._give_back, buffers)
        return handle

    def _give_back(self, buffers: CallBuffers) -> None:
        with self._lock:
            self._free.append(buffers)
            del self._free[:-_KEPT]


class _Handle:
    """What rounds hold of their call's buffers: when the last one goes, the buffers are free."""

    def __init__(self, buffers: CallBuffers):
        self.capacity = buffers.capacity
        self.arrays = buffers.arrays

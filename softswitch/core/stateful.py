"""Register and counter arrays as the control plane sees them.

The packet path works on the plain lists held here (generated code indexes them directly), so every
control operation mutates those lists in place under the switch lock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from .errors import StateError


class RegisterArray:
    """``register<bit<W>>(size)``: cells hold unsigned ``W``-bit values, as in bmv2."""

    def __init__(self, name: str, size: int, bitwidth: int, lock: threading.RLock):
        self.name = name
        self.size = size
        self.bitwidth = bitwidth
        self.values = [0] * size
        self._lock = lock

    def _check(self, index: int) -> None:
        if not isinstance(index, int) or not 0 <= index < self.size:
            raise StateError(f"index {index!r} is out of range for register {self.name!r} "
                             f"(size {self.size})")

    def read(self, index: int) -> int:
        with self._lock:
            self._check(index)
            return self.values[index]

    def read_range(self, start: int = 0, stop: int | None = None) -> list[int]:
        """Cells ``start .. stop-1`` in one consistent snapshot."""
        with self._lock:
            stop = self.size if stop is None else stop
            if not 0 <= start <= stop <= self.size:
                raise StateError(f"range [{start}, {stop}) is out of range for register "
                                 f"{self.name!r} (size {self.size})")
            return self.values[start:stop]

    def write(self, index: int, value: int) -> None:
        """Store ``value`` truncated to the register width (bmv2 semantics, negatives wrap)."""
        with self._lock:
            self._check(index)
            self.values[index] = value & ((1 << self.bitwidth) - 1)

    def reset(self) -> None:
        with self._lock:
            self.values[:] = [0] * self.size


class CounterArray:
    """An indirect ``counter``: (packets, bytes) per index; bytes count the packet's ingress
    length, as bmv2 does."""

    def __init__(self, name: str, size: int, lock: threading.RLock):
        self.name = name
        self.size = size
        self.is_direct = False
        self.packets = [0] * size
        self.bytes = [0] * size
        self._lock = lock

    def _check(self, index: int) -> None:
        if not isinstance(index, int) or not 0 <= index < self.size:
            raise StateError(f"index {index!r} is out of range for counter {self.name!r} "
                             f"(size {self.size})")

    def read(self, index: int) -> tuple[int, int]:
        with self._lock:
            self._check(index)
            return self.packets[index], self.bytes[index]

    def write(self, index: int, packets: int, nbytes: int) -> None:
        with self._lock:
            self._check(index)
            self.packets[index], self.bytes[index] = packets, nbytes

    def reset(self) -> None:
        with self._lock:
            self.packets[:] = [0] * self.size
            self.bytes[:] = [0] * self.size


class DirectCounter:
    """A ``direct_counter``: one (packets, bytes) pair per entry of its table, addressed by entry
    handle (``None`` addresses the default entry, which bmv2 never counts)."""

    def __init__(self, name: str, table_name: str,
                 read: Callable[[int | None], tuple[int, int]],
                 write: Callable[[int | None, int, int], None], reset: Callable[[], None]):
        self.name = name
        self.table = table_name
        self.is_direct = True
        self._read, self._write, self._reset = read, write, reset

    def read(self, handle: int | None) -> tuple[int, int]:
        return self._read(handle)

    def write(self, handle: int | None, packets: int, nbytes: int) -> None:
        self._write(handle, packets, nbytes)

    def reset(self) -> None:
        self._reset()

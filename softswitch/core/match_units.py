"""The entries of one table indexed for the per-packet lookup, one index per match kind, as bmv2's
match units: an exact table looks its key up in a dict; an LPM table tries its prefix lengths
from the longest; ternary and range tables scan their entries by priority, the highest first,
ties going to the smallest handle.

Entries are the table's (tables.py): the index reads their ``mask``, ``value``, ``ranges``,
``priority`` and ``handle``.  ``identity`` is what makes two entries the same entry of a table
of that kind (bmv2 refuses a second one with DUPLICATE_ENTRY).
"""

from __future__ import annotations

import bisect


class ExactUnit:
    def __init__(self) -> None:
        self._entries: dict[int, object] = {}
        #: key -> matching entry or None; generated code calls it
        self.lookup = self._entries.get

    @staticmethod
    def identity(mask: int, value: int, ranges: tuple, priority: int) -> tuple:
        return (value,)

    def add(self, e) -> None:
        self._entries[e.value] = e

    def remove(self, e) -> None:
        del self._entries[e.value]


class LpmUnit:
    def __init__(self) -> None:
        self._prefixes: list[tuple[int, dict[int, object]]] = []  # (mask, value -> entry)
        self.lookup = self._lookup

    def _lookup(self, k):
        for mask, entries in self._prefixes:
            e = entries.get(k & mask)
            if e is not None:
                return e
        return None

    @staticmethod
    def identity(mask: int, value: int, ranges: tuple, priority: int) -> tuple:
        return (mask, value)

    def add(self, e) -> None:
        for m, entries in self._prefixes:
            if m == e.mask:
                entries[e.value] = e
                return
        self._prefixes.append((e.mask, {e.value: e}))
        # Longer prefixes first; within an LPM table only the LPM element's mask varies.
        self._prefixes.sort(key=lambda item: -bin(item[0]).count("1"))

    def remove(self, e) -> None:
        for i, (m, entries) in enumerate(self._prefixes):
            if m == e.mask:
                del entries[e.value]
                if not entries:
                    del self._prefixes[i]
                return


class TernaryUnit:
    def __init__(self) -> None:
        self._sorted: list[tuple] = []  # (-priority, handle, entry)
        self._scan: list[tuple] = []  # (mask, value, entry) in match order
        self.lookup = self._lookup

    def _lookup(self, k):
        for mask, value, e in self._scan:
            if k & mask == value:
                return e
        return None

    @staticmethod
    def identity(mask: int, value: int, ranges: tuple, priority: int) -> tuple:
        return (mask, value, ranges, priority)

    def add(self, e) -> None:
        bisect.insort(self._sorted, (-e.priority, e.handle, e))
        self._rescan()

    def remove(self, e) -> None:
        self._sorted.remove((-e.priority, e.handle, e))
        self._rescan()

    def _rescan(self) -> None:
        self._scan[:] = [(e.mask, e.value, e) for _, _, e in self._sorted]


class RangeUnit(TernaryUnit):
    """A ternary index whose entries also bound some key elements: ``ranges`` holds
    ``(shift, width mask, low, high)`` per bounded element."""

    def _lookup(self, k):
        for mask, value, e in self._scan:
            if k & mask == value:
                for shift, wmask, lo, hi in e.ranges:
                    if not lo <= (k >> shift) & wmask <= hi:
                        break
                else:
                    return e
        return None


MATCH_UNITS = {"exact": ExactUnit, "lpm": LpmUnit, "ternary": TernaryUnit, "range": RangeUnit}

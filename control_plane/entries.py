"""Table entries and multicast groups described by names, whatever the switch's API.

The controller computes the entries it wants as plain values (hashable, comparable), so that
reconciliation is a set difference between what it wants and what it reads back. Their P4Runtime
form is ``p4runtime_entries.py``; their BF Runtime form is ``tofino/names.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

MatchValue = int | tuple[int, int]  # exact / optional: value; lpm: (value, prefix); ternary:
#                                     (value, mask); range: (low, high)


@dataclass(frozen=True)
class TableEntry:
    table: str
    match: tuple[tuple[str, MatchValue], ...]  # sorted by field name
    action: str
    params: tuple[tuple[str, int], ...] = ()  # sorted by parameter name
    priority: int = 0
    is_default: bool = False

    @classmethod
    def make(cls, table: str, match: dict[str, MatchValue], action: str,
             params: dict[str, int] | None = None, priority: int = 0) -> TableEntry:
        return cls(table, tuple(sorted(match.items())), action,
                   tuple(sorted((params or {}).items())), priority)

    @classmethod
    def default(cls, table: str, action: str, params: dict[str, int] | None = None
                ) -> TableEntry:
        return cls(table, (), action, tuple(sorted((params or {}).items())), 0, True)

    @property
    def key(self) -> tuple:
        """What identifies the entry in its table."""
        return (self.table, self.match, self.priority, self.is_default)


@dataclass(frozen=True)
class MulticastGroup:
    """A packet replication engine group: replicas as sorted (port, replica id) pairs."""

    group_id: int
    replicas: tuple[tuple[int, int], ...]

    @classmethod
    def make(cls, group_id: int, replicas) -> MulticastGroup:
        return cls(group_id, tuple(sorted(replicas)))

"""control SourceGuard (p4src/source_guard.p4): table ``switch_sources``, the switch's own
addresses (every aggregated job's switch MAC), from which no frame may arrive."""

from __future__ import annotations

from control_plane.entries import TableEntry
from protocol.codec import mac_bytes


class SourceGuard:
    def __init__(self, path: str = "SaAtpIngress.source_guard"):
        self.table = f"{path}.switch_sources"
        self.spoofed = f"{path}.spoofed"

    @property
    def tables(self) -> tuple[str, ...]:
        return (self.table,)

    def entries(self, switch_macs) -> list[TableEntry]:
        return [TableEntry.make(self.table,
                                {"hdr.ethernet.src_addr": int.from_bytes(mac_bytes(mac), "big")},
                                self.spoofed)
                for mac in sorted(set(switch_macs))]

"""control L2Forwarding (p4src/forwarding.p4): table ``dmac``; unknown destinations are
flooded through the flood multicast group."""

from __future__ import annotations

from control_plane.entries import MulticastGroup, TableEntry
from protocol import constants as P
from protocol.codec import mac_bytes


class L2Forwarding:
    def __init__(self, path: str = "SaAtpIngress.l2"):
        self.table = f"{path}.dmac"
        self.forward = f"{path}.forward"

    @property
    def tables(self) -> tuple[str, ...]:
        return (self.table,)

    def entries(self, hosts: dict[str, int]) -> list[TableEntry]:
        """One entry per host MAC -> switch port."""
        return [TableEntry.make(self.table,
                                {"hdr.ethernet.dst_addr": int.from_bytes(mac_bytes(mac), "big")},
                                self.forward, {"port": port})
                for mac, port in sorted(hosts.items())]

    @staticmethod
    def flood_group(ports) -> MulticastGroup:
        return MulticastGroup.make(P.FLOOD_GROUP, ((port, 0) for port in ports))

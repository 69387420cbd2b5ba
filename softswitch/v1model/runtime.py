"""What simple_switch keeps per packet beyond the core's packet instance, and the values it gives
``standard_metadata.instance_type`` and clone session ids."""

from __future__ import annotations

from ..core.runtime import Packet

# standard_metadata.instance_type values, as simple_switch sets them.
PKT_INSTANCE_TYPE_NORMAL = 0
PKT_INSTANCE_TYPE_INGRESS_CLONE = 1
PKT_INSTANCE_TYPE_EGRESS_CLONE = 2
PKT_INSTANCE_TYPE_RECIRC = 4
PKT_INSTANCE_TYPE_REPLICATION = 5
PKT_INSTANCE_TYPE_RESUBMIT = 6

# simple_switch keeps the clone session id with bit 15 set so that session 0 can be cloned to.
MIRROR_SESSION_VALID = 1 << 15
MIRROR_SESSION_ID_MASK = 0x7FFF
NO_TRUNCATION = 1 << 62


class V1Packet(Packet):
    """A packet instance with the per-packet registers simple_switch keeps outside of the PHV:
    the clone, resubmit and recirculate requests of its actions (a field list id, 0 for none)
    and the length ``truncate`` asked for."""

    __slots__ = ("clone_session", "clone_field_list", "resubmit", "recirculate",
                 "truncated_length")

    def __init__(self, F: list, V: list, frame: bytes, ingress_port: int, ingress_length: int):
        Packet.__init__(self, F, V, frame, ingress_port, ingress_length)  # cheaper than super()
        self.clone_session = 0
        self.clone_field_list = 0
        self.resubmit = 0
        self.recirculate = 0
        self.truncated_length = NO_TRUNCATION

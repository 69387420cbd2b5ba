"""control Aggregator (p4src/aggregator.p4): the aggregators' registers, read and cleared in band
through the CPU port (docs/protocol.md §10), and the ``evictions`` and ``management`` counters
(``contracts.AggregatorControl``)."""

from __future__ import annotations

from p4.v1 import p4runtime_pb2

from control_plane.connection import SwitchConnection, SwitchError
from control_plane.contracts import AggregatorState, aggregator_indices
from protocol import constants as P
from protocol.codec import Endpoint, Frame, Header, encode_frame, frame_lanes

# Any well-formed SA-ATP frame serves as the carrier of a management request. Its lanes are
# zeros: a clear on the TNA program stores the request's lanes (docs/tofino.md, 'Management').
_CARRIER = encode_frame(Frame(Endpoint("02:00:00:00:00:00", "0.0.0.0"),
                              Endpoint("02:00:00:00:00:00", "0.0.0.0"),
                              Header(op=P.Op.DATA, job=0)))


class Aggregator:
    def __init__(self, path: str = "SaAtpIngress.aggregator"):
        self.evictions_counter = f"{path}.evictions"
        self.management_counter = f"{path}.management"

    def read(self, conn: SwitchConnection, indices, pipe: int = 0) -> list[AggregatorState]:
        return self._request(conn, P.MGMT_READ_AGGREGATOR, _checked(indices, pipe))

    def clear(self, conn: SwitchConnection, indices, pipe: int = 0) -> None:
        states = self._request(conn, P.MGMT_CLEAR_AGGREGATOR, _checked(indices, pipe))
        dirty = [s.index for s in states
                 if s.state != P.SlotState.EMPTY or any(s.lanes) or s.holder]
        if dirty:
            raise SwitchError(f"aggregators {dirty[:8]} did not clear")

    def evictions(self, conn: SwitchConnection, job_index: int) -> int:
        return _packets(conn, self.evictions_counter, job_index)

    def management(self, conn: SwitchConnection) -> dict[str, int]:
        """Management requests the switch handled, per kind."""
        return {"READ_AGGREGATOR": _packets(conn, self.management_counter,
                                            P.MGMT_READ_AGGREGATOR),
                "CLEAR_AGGREGATOR": _packets(conn, self.management_counter,
                                             P.MGMT_CLEAR_AGGREGATOR)}

    @staticmethod
    def _request(conn: SwitchConnection, opcode: int, indices: list[int],
                 window: int = 64) -> list[AggregatorState]:
        """Send one management packet per aggregator, at most ``window`` unanswered at a time,
        and collect the switch's reports, in the order of ``indices``."""
        replies: dict[int, AggregatorState] = {}
        sent = 0
        while len(replies) < len(indices):
            while sent < len(indices) and sent - len(replies) < window:
                conn.packet_out(_CARRIER, opcode=opcode, aggregator=indices[sent])
                sent += 1
            try:
                packet = conn.packet_in()
            except TimeoutError:
                missing = [i for i in indices if i not in replies]
                raise SwitchError(f"no management reply for aggregators {missing[:8]} "
                                  f"({len(missing)} missing); is the CPU port configured?"
                                  ) from None
            if packet.metadata.get("opcode") != opcode:
                continue
            replies[packet.metadata["aggregator"]] = _decode(packet.metadata["aggregator"],
                                                             packet.payload)
        return [replies[i] for i in indices]


def _checked(indices, pipe: int) -> list[int]:
    if pipe != 0:
        raise ValueError(f"a v1model switch has one pipe, 0, not {pipe}")
    return aggregator_indices(indices)


def _packets(conn: SwitchConnection, counter: str, index: int) -> int:
    entity = p4runtime_pb2.Entity()
    entity.counter_entry.counter_id = conn.p4info.counter(counter).preamble.id
    entity.counter_entry.index.index = index
    return sum(e.counter_entry.data.packet_count for e in conn.read(entity))


def _decode(index: int, payload: bytes) -> AggregatorState:
    h = Header.unpack(payload, P.ETH_LEN + P.IPV4_LEN + P.UDP_LEN)
    lanes = frame_lanes(payload)
    return AggregatorState(index=index, state=P.SlotState(h.reason), chunk=h.chunk,
                           bitmap=h.bitmap, count=h.count, scale=h.scale, exp=h.exp,
                           helper=h.worker, run=h.run, lanes=tuple(int(v) for v in lanes),
                           holder=h.slot)

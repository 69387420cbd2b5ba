"""What a worker sends to the switch besides a round's prebuilt DATA frames: control frames
(TAKEOVER, HELPER_RESULT), frames as they are (a probe, a retransmission, a contribution to a
helper), and a peer's contribution forwarded to its helper. The transport and the takeover
share one :class:`Sender`, so neither reaches into the other to send."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from host_lib.engine.config import CommunicatorConfig
from host_lib.engine.links import as_frame_link
from protocol import constants as P
from protocol.codec import Frame, Header, encode_frame, frame_lanes

_HEADER_OFFSET = P.ETH_LEN + P.IPV4_LEN + P.UDP_LEN


class Sender:
    def __init__(self, link, config: CommunicatorConfig):
        self.link = link
        self._batches = as_frame_link(link)
        self.config = config

    def send(self, frame) -> None:
        self.link.send(frame)

    def send_batch(self, frames: np.ndarray) -> None:
        """Frames as they are, in one batch (a structured array of FRAME_DTYPE)."""
        self._batches.send_batch(frames)

    def control(self, op: int, chunk: int, lanes=None, **fields) -> None:
        """A frame of this worker about ``chunk`` (its slot and set from the window)."""
        c = self.config
        header = Header(op=op, job=c.job, slot=chunk % c.window, worker=c.worker, chunk=chunk,
                        flags=(chunk // c.window) % 2, run=c.run, **fields)
        lanes = np.zeros(P.LANES, np.int32) if lanes is None else lanes
        self.link.send(encode_frame(Frame(c.local, c.switch, header, lanes)))

    def forward(self, frame: memoryview, helper: int) -> None:
        """Pass a peer's contribution on to the helper the switch named, through the switch:
        sent as ours (the switch checks who sends), marked COPY, with the contributor in
        ``fanin``."""
        h = Header.unpack(frame, _HEADER_OFFSET)
        header = replace(h, worker=self.config.worker, flags=h.flags | P.Flag.COPY,
                         reason=helper, fanin=h.worker)
        self.link.send(encode_frame(Frame(self.config.local, self.config.switch, header,
                                          frame_lanes(frame))))

"""``V1Switch``: the v1model architecture of bmv2's simple_switch, run synchronously.

``process(port, frame)`` takes one packet through parser, checksum verification, ingress, the
packet replication engine, egress, checksum update and deparser, including every copy the packet
spawns (clones, multicast replicas, resubmits, recirculations), and returns the frames that leave.
The steps and their order are simple_switch's ``ingress_thread`` / ``egress_thread``; where
simple_switch runs threads concurrently, copies are handled here in a fixed order: all pending
ingress work first, then egress work in enqueue order.
"""

from __future__ import annotations

import logging
import random
from collections import deque

from ..core.errors import PacketDropped
from ..core.program import Program
from ..core.switch import Switch
from .runtime import (
    MIRROR_SESSION_ID_MASK,
    MIRROR_SESSION_VALID,
    PKT_INSTANCE_TYPE_EGRESS_CLONE,
    PKT_INSTANCE_TYPE_INGRESS_CLONE,
    PKT_INSTANCE_TYPE_NORMAL,
    PKT_INSTANCE_TYPE_RECIRC,
    PKT_INSTANCE_TYPE_REPLICATION,
    PKT_INSTANCE_TYPE_RESUBMIT,
    V1Packet,
)

log = logging.getLogger("softswitch")

DEFAULT_DROP_PORT = 511
# A packet that keeps resubmitting / recirculating would spin bmv2 forever; here one call to
# process() stops after this many pipeline passes.
MAX_PASSES_PER_PACKET = 1000


class _StdField:
    """A target-level metadata field (after aliasing) with its normalisation."""

    __slots__ = ("index", "mask")

    def __init__(self, index: int, width: int):
        self.index = index
        self.mask = (1 << width) - 1


class V1Switch(Switch):
    """One simple_switch instance running ``program`` (loaded by
    :func:`softswitch.v1model.load_program`)."""

    def __init__(self, program: Program, *, drop_port: int = DEFAULT_DROP_PORT,
                 seed: int | None = None):
        self.drop_port = drop_port
        self._rng = random.Random(seed)
        super().__init__(program, {"_DROP_PORT": drop_port,
                                   "_MIRROR_SESSION_VALID": MIRROR_SESSION_VALID,
                                   "_randint": self._rng.randint})
        ns = self.namespace
        layout = program.layout
        self._parse = ns[program.parsers["parser"]]
        self._deparse = ns[program.deparsers["deparser"]]
        self._verify = ns["_VERIFY"]
        start = {pipe: None if fname is None else ns[fname]
                 for pipe, fname in program.pipelines.items()}
        self._ingress_start = start["ingress"]
        self._egress_start = start["egress"]
        self._F0, self._V0 = layout.templates()
        self._metadata_slices = [(h.fields[0].index, h.fields[-1].index + 1,
                                  (0,) * len(h.fields))
                                 for h in layout.headers if h.metadata and h.fields]
        self._field_lists = program.field_lists
        std = {name: (None if f is None else _StdField(f.index, f.width))
               for name, f in program.arch_fields.items()}
        self._f_ingress_port = std["standard_metadata.ingress_port"]
        self._f_packet_length = std["standard_metadata.packet_length"]
        self._f_instance_type = std["standard_metadata.instance_type"]
        self._f_egress_spec = std["standard_metadata.egress_spec"]
        self._f_egress_port = std["standard_metadata.egress_port"]
        self._f_parser_error = std["standard_metadata.parser_error"]
        self._f_checksum_error = std["standard_metadata.checksum_error"]
        self._f_ingress_ts = std["intrinsic_metadata.ingress_global_timestamp"]
        self._f_egress_ts = std["intrinsic_metadata.egress_global_timestamp"]
        self._f_mcast_grp = std["intrinsic_metadata.mcast_grp"]
        self._f_egress_rid = std["intrinsic_metadata.egress_rid"]
        self._f_priority = std["intrinsic_metadata.priority"]
        queueing = [std[f"queueing_metadata.{n}"] for n in
                    ("enq_timestamp", "enq_qdepth", "deq_timedelta", "deq_qdepth")]
        self._queueing = queueing if all(queueing) else None
        self._f_qid = std["queueing_metadata.qid"]

    # -- helpers --------------------------------------------------------------------------------

    @staticmethod
    def _set(F: list, f: _StdField | None, value: int) -> None:
        if f is not None:
            F[f.index] = value & f.mask

    def _reset_metadata(self, F: list) -> None:
        for start, stop, zeros in self._metadata_slices:
            F[start:stop] = zeros

    def _copy_field_list(self, dst: list, src: list, field_list: int) -> None:
        for i in self._field_lists.get(field_list, ()):
            dst[i] = src[i]

    def _fresh(self, frame: bytes, ingress_port: int, ingress_length: int) -> V1Packet:
        return V1Packet(self._F0[:], self._V0[:], frame, ingress_port, ingress_length)

    # -- the packet path ------------------------------------------------------------------------

    def process(self, ingress_port: int, frame: bytes) -> list[tuple[int, bytes]]:
        """Run one received frame through the switch; returns the (egress_port, frame) pairs
        that leave it, in the order they are produced."""
        frame = bytes(frame)
        with self.lock:
            p = self._fresh(frame, ingress_port, len(frame))
            F = p.F
            f = self._f_ingress_port
            F[f.index] = ingress_port & f.mask
            f = self._f_packet_length
            F[f.index] = len(frame) & f.mask
            F[self._f_instance_type.index] = PKT_INSTANCE_TYPE_NORMAL
            self._set(F, self._f_ingress_ts, self.now_us())
            out: list[tuple[int, bytes]] = []
            ingress_q: deque[V1Packet] = deque([p])
            egress_q: deque[V1Packet] = deque()
            passes = 0
            while ingress_q or egress_q:
                passes += 1
                if passes > MAX_PASSES_PER_PACKET:
                    log.error("packet from port %d still in the pipeline after %d passes "
                              "(resubmit/recirculate loop?); dropping it", ingress_port, passes)
                    break
                try:
                    if ingress_q:
                        self._ingress(ingress_q.popleft(), ingress_q, egress_q)
                    else:
                        self._egress(egress_q.popleft(), ingress_q, egress_q, out)
                except PacketDropped as exc:
                    log.error("packet dropped: %s", exc)
            return out

    def _ingress(self, p: V1Packet, ingress_q: deque, egress_q: deque) -> None:
        F, V = p.F, p.V
        ingress_size = p.length
        self._parse(F, V, p, p.frame)
        self._set(F, self._f_parser_error, p.parser_error)
        checksum_bad = self._verify(F, V, p)
        self._set(F, self._f_checksum_error, 1 if checksum_bad else 0)
        self.run(self._ingress_start, F, V, p)
        p.exit = False
        egress_spec = F[self._f_egress_spec.index]
        mgid = F[self._f_mcast_grp.index] if self._f_mcast_grp else 0

        if p.clone_session:
            session = p.clone_session & MIRROR_SESSION_ID_MASK
            field_list = p.clone_field_list
            p.clone_session = p.clone_field_list = 0
            config = self.pre.clone_session(session)
            if config is not None:
                # The clone is the packet as it entered ingress, parsed again.
                copy = self._fresh(p.frame, p.ingress_port, p.ingress_length)
                copy.length = ingress_size
                self._set(copy.F, self._f_ingress_port, p.ingress_port)
                self._parse(copy.F, copy.V, copy, copy.frame)
                self._reset_metadata(copy.F)
                self._copy_field_list(copy.F, F, field_list)
                self._set(copy.F, self._f_instance_type, PKT_INSTANCE_TYPE_INGRESS_CLONE)
                self._send_clone(copy, config, egress_q)

        if p.resubmit:
            copy = self._fresh(p.frame, p.ingress_port, p.ingress_length)
            self._copy_field_list(copy.F, F, p.resubmit)
            self._set(copy.F, self._f_instance_type, PKT_INSTANCE_TYPE_RESUBMIT)
            copy.length = ingress_size
            self._set(copy.F, self._f_packet_length, ingress_size)
            ingress_q.append(copy)
            return

        if mgid != 0:
            self._set(F, self._f_instance_type, PKT_INSTANCE_TYPE_REPLICATION)
            self._multicast(p, mgid, egress_q)
            return
        if egress_spec == self.drop_port:
            return
        F[self._f_instance_type.index] = PKT_INSTANCE_TYPE_NORMAL
        self._enqueue(p, egress_spec, egress_q)

    def _send_clone(self, copy: V1Packet, config, egress_q: deque) -> None:
        if config.mgid is not None:
            self._multicast(copy, config.mgid, egress_q)
        if config.egress_port is not None:
            self._enqueue(copy, config.egress_port, egress_q)

    def _multicast(self, p: V1Packet, mgid: int, egress_q: deque) -> None:
        for port, rid in self.pre.replicate(mgid):
            self._set(p.F, self._f_egress_rid, rid)
            copy = V1Packet(p.F[:], p.V[:], p.frame, p.ingress_port, p.ingress_length)
            copy.payload = p.payload
            copy.length = p.length
            self._enqueue(copy, port, egress_q)

    def _enqueue(self, p: V1Packet, port: int, egress_q: deque) -> None:
        p.egress_port = port
        F = p.F
        if self._f_priority is not None and F[self._f_priority.index] >= 1:
            # simple_switch runs one queue per port unless --priority-queues is given.
            log.error("Priority out of range, dropping packet")
            return
        if self._queueing is not None:
            self._set(F, self._queueing[0], self.now_us())
            self._set(F, self._queueing[1], 0)
        egress_q.append(p)

    def _egress(self, p: V1Packet, ingress_q: deque, egress_q: deque, out: list) -> None:
        F, V = p.F, p.V
        now = self.now_us()
        self._set(F, self._f_egress_ts, now)
        if self._queueing is not None:
            enq_ts = F[self._queueing[0].index]
            self._set(F, self._queueing[2], now - enq_ts)
            self._set(F, self._queueing[3], 0)
            self._set(F, self._f_qid, 0)
        f = self._f_egress_port
        F[f.index] = p.egress_port & f.mask
        # simple_switch initialises egress_spec to drop_port + 1, truncated to the field width.
        f = self._f_egress_spec
        F[f.index] = (self.drop_port + 1) & f.mask
        f = self._f_packet_length
        F[f.index] = p.length & f.mask
        self.run(self._egress_start, F, V, p)

        if p.clone_session:
            session = p.clone_session & MIRROR_SESSION_ID_MASK
            field_list = p.clone_field_list
            p.clone_session = p.clone_field_list = 0
            config = self.pre.clone_session(session)
            if config is not None:
                # The clone carries the headers as egress left them, metadata reset.
                copy = V1Packet(F[:], V[:], p.frame, p.ingress_port, p.ingress_length)
                copy.payload = p.payload
                self._reset_metadata(copy.F)
                self._copy_field_list(copy.F, F, field_list)
                self._set(copy.F, self._f_instance_type, PKT_INSTANCE_TYPE_EGRESS_CLONE)
                copy.length = p.length
                self._send_clone(copy, config, egress_q)

        if F[self._f_egress_spec.index] == self.drop_port:
            return
        data = self._deparse(F, V, p)

        if p.recirculate:
            copy = self._fresh(data, p.ingress_port, len(data))
            self._copy_field_list(copy.F, F, p.recirculate)
            self._set(copy.F, self._f_instance_type, PKT_INSTANCE_TYPE_RECIRC)
            self._set(copy.F, self._f_packet_length, len(data))
            ingress_q.append(copy)
            return
        out.append((p.egress_port, data[:p.truncated_length]))

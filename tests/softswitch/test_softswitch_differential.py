"""Differential tests against bmv2: the same pipeline, entries and packet trace through
simple_switch_grpc and through the software switch give the same packets on every port and the
same counter state.  Skipped where simple_switch_grpc is not installed.

Traces stay under 64 frames per output port: bmv2 reads its input files as fast as it can and
drops what does not fit in a port's 64-packet egress queue."""

from __future__ import annotations

import random
import struct

import numpy as np
import pytest
from p4.v1 import p4runtime_pb2 as pb
from scapy.layers.l2 import Ether

from softswitch.p4runtime_server import write_request
from tests.softswitch.differential import requires_bmv2, run_bmv2, run_softswitch
from tests.softswitch.frames import ETH_ADDRS, key_frame, probe, replication_frame, udp_packet
from tests.softswitch.p4info import P4Info
from tests.softswitch.programs import p4info_text, program_json

pytestmark = [pytest.mark.bmv2, requires_bmv2]


class Builder:
    """P4Runtime updates by name."""

    def __init__(self, name: str):
        self.info = P4Info(name)

    def entry(self, table: str, match: dict, action: str, params: dict | None = None,
              priority: int = 0, default: bool = False) -> pb.Update:
        t = self.info.table(table)
        widths = {f.name: (f.id, f.bitwidth) for f in t.match_fields}
        u = pb.Update(type=pb.Update.MODIFY if default else pb.Update.INSERT)
        te = u.entity.table_entry
        te.table_id, te.priority, te.is_default_action = t.preamble.id, priority, default
        for fname, (kind, *values) in match.items():
            fid, width = widths[fname]
            nbytes = (width + 7) // 8
            m = te.match.add(field_id=fid)
            enc = [v.to_bytes(nbytes, "big") for v in values]
            if kind == "exact":
                m.exact.value = enc[0]
            elif kind == "lpm":
                m.lpm.value, m.lpm.prefix_len = enc[0], values[1]
            elif kind == "ternary":
                m.ternary.value, m.ternary.mask = enc
            elif kind == "range":
                m.range.low, m.range.high = enc
            else:
                m.optional.value = enc[0]
        a = self.info.action(action)
        te.action.action.action_id = a.preamble.id
        for p in a.params:
            te.action.action.params.add(param_id=p.id, value=(params or {})[p.name].to_bytes(
                (p.bitwidth + 7) // 8, "big"))
        return u

    @staticmethod
    def group(gid: int, replicas: list[tuple[int, int]]) -> pb.Update:
        u = pb.Update(type=pb.Update.INSERT)
        g = u.entity.packet_replication_engine_entry.multicast_group_entry
        g.multicast_group_id = gid
        for port, rid in replicas:
            g.replicas.add(egress_port=port, instance=rid)
        return u

    @staticmethod
    def session(sid: int, replicas: list[tuple[int, int]]) -> pb.Update:
        u = pb.Update(type=pb.Update.INSERT)
        s = u.entity.packet_replication_engine_entry.clone_session_entry
        s.session_id = sid
        for port, rid in replicas:
            s.replicas.add(egress_port=port, instance=rid)
        return u


def compare(name: str, updates, trace, ports, reads=(), mask=None, ordered=True):
    writes = [write_request(updates)] if updates else []
    soft, soft_reads = run_softswitch(program_json(name), p4info_text(name), writes, trace,
                                      ports, reads)
    hard, hard_reads = run_bmv2(program_json(name), p4info_text(name), writes, trace, ports,
                                reads, expected=sum(len(v) for v in soft.values()))
    if mask is not None:
        soft = {p: [mask(f) for f in frames] for p, frames in soft.items()}
        hard = {p: [mask(f) for f in frames] for p, frames in hard.items()}
    assert sum(len(v) for v in hard.values()) > 0, "bmv2 produced no packets at all"
    for port in ports:
        if ordered:
            assert soft[port] == hard[port], f"port {port} differs"
        else:
            assert sorted(soft[port]) == sorted(hard[port]), f"port {port} differs"
    assert soft_reads == hard_reads
    return soft


def test_parsing_trace():
    bad = Ether(**ETH_ADDRS) / udp_packet()
    bad = bytearray(bytes(bad))
    bad[24] ^= 0x55  # IPv4 checksum byte
    trace = [
        bytes(Ether(**ETH_ADDRS) / udp_packet()), bytes(bad), b"\x01" * 9,
        bytes(Ether(**ETH_ADDRS, type=0x0800)) + b"\x45" * 10,
        bytes(Ether(**ETH_ADDRS, type=0x88B5)) + probe(0, 21, 0xFFF, 3, -127, 0x123456, 2**48 - 1),
        bytes(Ether(**ETH_ADDRS, type=0x88B0)) + probe(1, 0, 0x123, 0, 5, 1, 10) +
        bytes(udp_packet()),
        bytes(Ether(**ETH_ADDRS, type=0x88BF)) + probe(2, 1, 0x0AB, 0, 0, 2, 0) + b"SKIP" +
        bytes(udp_packet()),
        bytes(Ether(**ETH_ADDRS, type=0x88B1)) + probe(3, 0, 0x800, 0, 0, 3, 0) + b"\x60rest",
        bytes(Ether(**ETH_ADDRS, type=0x88B2)) + probe(1, 0, 0, 0, 0, 0xBADBAD, 0) + b"more",
        bytes(Ether(**ETH_ADDRS, type=0x88B3)) + b"\x00" * 12,
    ]
    compare("parsing", [], [(1, f) for f in trace], ports=[1, 2])


def test_arith_trace():
    rng = random.Random(11)
    trace = []
    for _ in range(60):
        inp = struct.pack("!BBbbHIIB", rng.randrange(256), rng.randrange(256),
                          rng.randrange(-128, 128), rng.randrange(-128, 128),
                          rng.randrange(1 << 16), rng.randrange(1 << 32), rng.randrange(1 << 32),
                          rng.randrange(256))
        trace.append((5, b"\x02" * 12 + b"\x88\xb8" + inp))
    compare("arith", [], trace, ports=[5, 1])


def test_tables_trace():
    b = Builder("tables")
    T = "IngressImpl."
    writes = [
        b.entry(T + "t_exact", {"hdr.key.addr": ("exact", 0x0A000001), "hdr.key.port":
                                ("exact", 80)}, T + "set_exact", {"v": 7, "port": 3}),
        b.entry(T + "t_lpm", {"hdr.key.proto": ("exact", 6), "hdr.key.addr": ("lpm", 0x0A000000,
                                                                            8)},
                T + "set_lpm", {"v": 1}),
        b.entry(T + "t_lpm", {"hdr.key.proto": ("exact", 6), "hdr.key.addr": ("lpm", 0x0A010000,
                                                                            16)},
                T + "set_lpm", {"v": 2}),
        b.entry(T + "t_ternary", {"hdr.key.flags": ("ternary", 1, 1)}, T + "set_tern",
                {"v": 3}, priority=10),
        b.entry(T + "t_ternary", {"hdr.key.addr": ("ternary", 0x0A000000, 0xFF000000)},
                T + "set_tern", {"v": 4}, priority=5),
        b.entry(T + "t_range", {"hdr.key.port": ("range", 1000, 2000), "hdr.key.proto":
                                ("exact", 6)}, T + "set_range", {"v": 5}, priority=1),
        b.entry(T + "t_optional", {"hdr.key.proto": ("optional", 17)}, T + "set_opt", {"v": 6},
                priority=1),
        b.entry(T + "t_hitmiss", {"hdr.key.tag": ("exact", 42)}, T + "set_hm", {"v": 5}),
        b.entry(T + "t_switch", {"hdr.key.proto": ("exact", 6)}, T + "a2", {"p": 0x1234}),
        b.entry(T + "t_switch", {"hdr.key.proto": ("exact", 17)}, T + "a1"),
        b.entry(T + "t_if", {}, T + "with_if", {"threshold": 0x30}, default=True),
    ]
    rng = random.Random(5)
    trace = []
    for _ in range(60):
        addr = rng.choice([0x0A000001, 0x0A010203, 0x0A7F0000, 0x0B000001])
        trace.append((1, key_frame(addr, rng.choice([80, 1500, 2500]), rng.choice([6, 17, 1]),
                                   rng.randrange(256), rng.choice([42, 55, 1500, 7]))))
    trace.append((1, bytes(14) + b"not a key frame"))
    table_id = b.info.table(T + "t_exact").preamble.id
    reads = [pb.Entity(direct_counter_entry=pb.DirectCounterEntry(
        table_entry=pb.TableEntry(table_id=table_id)))]
    compare("tables", writes, trace, ports=[1, 0, 3], reads=reads)


def test_stateful_trace():
    rng = random.Random(3)
    trace = []
    for _ in range(40):
        slot, op = rng.randrange(18), rng.choice([0, 0, 0, 1, 2, 3])
        values = [rng.randint(-2**31, 2**31 - 1) for _ in range(64)]
        agg = struct.pack("!HBB64i", slot, op, rng.randrange(256), *values)
        trace.append((0, bytes.fromhex("020000000009") + bytes([2, 0, 0, 0, 0, rng.randrange(
            256)]) + b"\x88\xb7" + agg + bytes(28)))
    for slot in range(18):
        trace.append((0, bytes(12) + b"\x88\xb7" + struct.pack("!HBB", slot, 2, 0) +
                      bytes(256 + 28)))
    counter_id = P4Info("stateful").msg.counters[0].preamble.id
    reads = [pb.Entity(counter_entry=pb.CounterEntry(counter_id=counter_id))]

    def mask_random(frame: bytes) -> bytes:
        # info.rnd (random in [10, 20]) cannot agree between two switches; blank it.
        off = 14 + 4 + 256 + 22
        return frame[:off] + b"\x00" + frame[off + 1:] if len(frame) > off else frame

    compare("stateful", [], trace, ports=[0, 1], reads=reads, mask=mask_random)


def test_replication_trace():
    b = Builder("replication")
    writes = [b.group(5, [(1, 10), (2, 10), (3, 20)]), b.session(7, [(9, 1), (10, 2)]),
              b.session(8, [(10, 3)])]
    trace = [(2, replication_frame(mode)) for mode in (0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 0)]
    trace.append((3, replication_frame(9, b"\xde\xad\xbe\xef")))
    # bmv2 generates an egress clone while the next packet is already in ingress, so copies made
    # at different points (here the clones of modes 7 and 8 on port 10) interleave arbitrarily.
    compare("replication", writes, trace, ports=[1, 2, 3, 4, 9, 10], ordered=False)


def test_sa_atp_program_with_tagged_frames_evictions_and_counter_bytes():
    """The project's own program as the controller programs it: a 3-worker job, its rounds, an
    eviction, 802.1Q/802.1ad-tagged frames (ordinary traffic for the program: flooded with their
    tags) and every counter, packets and bytes, the packets-only evictions counter included."""
    from control_plane import p4runtime_entries
    from control_plane.controller import Controller, Pipeline
    from control_plane.controls.forwarding import L2Forwarding
    from protocol import constants as P
    from protocol.codec import Endpoint, FrameBatch, frames_to_bytes
    from topologies.local import local_job

    spec = local_job(5, 3, slots=2)
    ports = [w.port for w in spec.workers]
    pipeline = Pipeline()
    p4info_txt = pipeline.p4info_path.read_text()
    controller = Controller("offline", ports=ports, pipeline=pipeline)
    _, updates = controller.admission_updates(spec)
    flood = pb.Update(type=pb.Update.INSERT)
    flood.entity.packet_replication_engine_entry.CopyFrom(
        p4runtime_entries.group_entry(L2Forwarding.flood_group(ports)))
    switch = Endpoint(spec.switch_mac, spec.switch_ip, P.UDP_PORT)

    def data(w: int, chunks) -> list[tuple[int, bytes]]:
        ws = spec.worker(w)
        chunk = np.array(chunks, np.uint32)
        frames = FrameBatch(Endpoint(ws.mac, ws.ip, ws.udp_port), switch).encode(
            op=P.Op.DATA, job=spec.id, worker=w, slot=chunk % spec.slots,
            chunk=chunk, flags=(chunk // spec.slots) % 2, scale=0x8000,
            lanes=np.full((len(chunk), P.LANES), w + 1, np.int32))
        return [(ws.port, raw) for raw in frames_to_bytes(frames)]

    tagged = bytes.fromhex("020000000a01020000000a008100006408004500002000004000401126b90a00000a"
                           "0a00000b03e807d0000c0000766c616e")
    qinq = tagged[:12] + b"\x88\xa8\x00\x07" + tagged[12:]
    trace = (data(0, [0, 1]) + data(1, [0, 1]) + data(2, [0, 1])  # two complete chunks
             + data(0, [2]) + data(0, [6])  # chunk 2 unfinished, evicted by chunk 6
             + [(1, tagged), (2, qinq)] + [(3, data(0, [0])[0][1])])  # and a spoof
    info, _, _ = pipeline.load()
    reads = [pb.Entity(counter_entry=pb.CounterEntry(counter_id=info.counter(name).preamble.id))
             for name in ("SaAtpIngress.aggregator.evictions", "SaAtpIngress.stats.packets",
                          "SaAtpIngress.stats.drops", "SaAtpEgress.stats.packets")]
    json_text = pipeline.json_path.read_text()
    writes = [write_request([flood, *updates])]
    soft, soft_reads = run_softswitch(json_text, p4info_txt, writes, trace, ports, reads)
    hard, hard_reads = run_bmv2(json_text, p4info_txt, writes, trace, ports, reads,
                                expected=sum(len(v) for v in soft.values()))
    for port in ports:
        assert soft[port] == hard[port], f"port {port} differs"
    assert tagged in soft[2] and tagged in soft[3] and qinq in soft[1]  # flooded, tag kept
    nonzero = [(e.counter_entry.counter_id, e.counter_entry.index.index,
                e.counter_entry.data.packet_count, e.counter_entry.data.byte_count)
               for e in soft_reads if e.counter_entry.data.packet_count]
    evictions = info.counter("SaAtpIngress.aggregator.evictions").preamble.id
    assert [(p, b) for c, _, p, b in nonzero if c == evictions] == [(1, P.FRAME_LEN)]
    assert soft_reads == hard_reads

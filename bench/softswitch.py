"""Packets per second of the SA-ATP program on the embedded target, and on bmv2 in the same run
where ``simple_switch_grpc`` is installed (softswitch.packet_rate does the measuring).

Both targets get the entries the controller writes when it admits a 4-worker job, and two
traffic mixes: *aggregating* DATA (three of four workers contribute to each chunk, so every
packet starts or adds to a slot and nothing leaves), and the *complete* allreduce stream (all four
contribute; every fourth packet completes its slot and is multicast to the four workers).
"""

from __future__ import annotations

import numpy as np
from p4.v1 import p4runtime_pb2 as pb

from control_plane.controller import Controller, Pipeline
from protocol import constants as P
from protocol.codec import Endpoint, FrameBatch, frames_to_bytes
from softswitch.packet_rate import compare
from topologies.local import local_job

WORKERS = 4


def admission_writes(spec) -> list[pb.WriteRequest]:
    """What the controller writes to admit ``spec`` on a fresh pipeline (whose aggregators are
    already clear)."""
    _, updates = Controller("offline", ports=[w.port for w in spec.workers]).admission_updates(
        spec)
    return [pb.WriteRequest(device_id=0, updates=updates)]


def traffic(spec, chunks: int, contributors: int) -> list[tuple[int, bytes]]:
    """Chunk by chunk, the DATA frames of the first ``contributors`` workers. Traffic that
    completes nothing is framed by two PROBEs (answered with bounces): bmv2's rate is timed
    from its first to its last output frame."""
    switch = Endpoint(spec.switch_mac, spec.switch_ip, P.UDP_PORT)
    lanes = np.random.default_rng(0).integers(-1000, 1000, (chunks, P.LANES), dtype=np.int32)
    chunk = np.arange(chunks, dtype=np.uint32)
    per_worker = []
    for w in spec.workers[:contributors]:
        batch = FrameBatch(Endpoint(w.mac, w.ip, w.udp_port), switch)
        frames = batch.encode(op=P.Op.DATA, job=spec.id, worker=w.id, slot=chunk % spec.slots,
                              chunk=chunk, flags=(chunk // spec.slots) % 2, lanes=lanes)
        per_worker.append([(w.port, raw) for raw in frames_to_bytes(frames)])
    frames = [frame for group in zip(*per_worker, strict=True) for frame in group]
    if contributors == len(spec.workers):
        return frames
    w = spec.workers[0]
    probes = FrameBatch(Endpoint(w.mac, w.ip, w.udp_port), switch).encode(
        op=P.Op.DATA, job=spec.id, worker=w.id, slot=chunk[[0, -1]] % spec.slots,
        chunk=chunk[[0, -1]], flags=P.Flag.PROBE | (chunk[[0, -1]] // spec.slots) % 2)
    first, last = frames_to_bytes(probes)
    return [(w.port, first)] + frames + [(w.port, last)]


def run(chunks: int = 2048) -> dict:
    spec = local_job(1, WORKERS, slots=64)
    pipeline = Pipeline()
    json_text, p4info_text = pipeline.json_path.read_text(), pipeline.p4info_path.read_text()
    writes = admission_writes(spec)
    out_ports = [w.port for w in spec.workers]
    out = {"chunks": chunks, "workers": WORKERS}
    for name, contributors in (("aggregating", WORKERS - 1), ("complete", WORKERS)):
        r = compare(json_text, p4info_text, traffic(spec, chunks, contributors), writes,
                    out_ports=out_ports)
        out[name] = {"softswitch_pps": r["softswitch"].pps,
                     "bmv2_pps": r["bmv2"].pps if r["bmv2"] is not None else None,
                     "ratio_to_bmv2": r["ratio"]}
    return out


def summary(r: dict) -> list[str]:
    lines = []
    for name in ("aggregating", "complete"):
        m = r[name]
        line = f"{name} DATA: embedded target {m['softswitch_pps'] / 1e3:.1f} k packets/s"
        if m["ratio_to_bmv2"] is not None:
            line += (f", bmv2 {m['bmv2_pps'] / 1e3:.1f} k packets/s: ratio "
                     f"{m['ratio_to_bmv2']:.1f} (goal >= 0.5)")
        else:
            line += " (bmv2 not installed: no ratio)"
        lines.append(line)
    return lines

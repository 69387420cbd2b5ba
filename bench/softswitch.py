"""Packets per second of the SA-ATP program on the embedded target, and on bmv2 in the same run
where ``simple_switch_grpc`` is installed (softswitch.packet_rate does the measuring).

Both targets get the entries the controller writes when it admits a 4-worker job, and two
traffic mixes: *aggregating* DATA (three of four workers contribute to each chunk, so every
packet starts or adds to a slot and nothing leaves), and the *complete* allreduce stream (all four
contribute; every fourth packet completes its slot and is multicast to the four workers).

*Through ports* is the same complete stream sent to a running switch process over its UDP tunnel
ports, a window of chunks at a time from each worker's socket, and its results collected: the
rate the pipeline reaches once the ports' own costs (system calls, polling) are added.

*Harness calls* are the harness's padded allreduce (the digits MLP's gradient and the 32,000
zeros of its communication-heavy scenarios) from four workers' host libraries through a switch
process, at each slot budget the harness gives that job: how long one call takes when the
workers, their round loops and the switch share this machine's cores, as they do in the
harness. The simulator's testbed replay takes its switch's rate and its hosts' turnaround per
round trip from these (docs/simulation.md §4).
"""

from __future__ import annotations

import select
import tempfile
import time

import numpy as np
from p4.v1 import p4runtime_pb2 as pb

from control_plane.controller import Controller, Pipeline
from experiments import digits
from experiments.harness import SCENARIOS
from host_lib.engine.links import UdpTunnelLink
from host_lib.engine.quantize import num_blocks
from protocol import constants as P
from protocol.codec import Endpoint, FrameBatch, frames_to_bytes
from softswitch.packet_rate import compare
from topologies.local import LocalCluster, local_job

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


def through_ports(chunks: int = 2048, window: int = 64) -> float:
    """Input packets per second of the complete stream through a switch process's tunnel
    ports: each worker sends a window of chunks, then all results are collected. The first
    window is not timed: the links' compiled calls load (or compile) on first use, which took
    longer than the rest of the stream (0.5 s against 0.3 s on the 2-core machine)."""
    spec = local_job(1, WORKERS, slots=window)
    switch = Endpoint(spec.switch_mac, spec.switch_ip, P.UDP_PORT)
    chunk = np.arange(chunks, dtype=np.uint32)
    lanes = np.random.default_rng(0).integers(-1000, 1000, (chunks, P.LANES), dtype=np.int32)
    frames = [FrameBatch(Endpoint(w.mac, w.ip, w.udp_port), switch).encode(
        op=P.Op.DATA, job=spec.id, worker=w.id, slot=chunk % window, chunk=chunk,
        flags=(chunk // window) % 2, lanes=lanes) for w in spec.workers]
    rows = np.zeros((256, P.FRAME_LEN + 1), np.uint8)
    with tempfile.TemporaryDirectory() as run_dir, LocalCluster([spec], run_dir) as cluster:
        links = [UdpTunnelLink(cluster.switch.udp_ports[w.port]) for w in spec.workers]
        started = None
        for base in range(0, chunks, window):
            if base == window:
                started = time.perf_counter()
            for link, mine in zip(links, frames, strict=True):
                link.send_batch(mine[base:base + window])
            waiting = {link.fileno(): [link, min(window, chunks - base)] for link in links}
            while waiting:
                ready, _, _ = select.select(list(waiting), [], [], 5.0)
                if not ready:
                    raise TimeoutError(f"results of chunks from {base} did not come back")
                for fd in ready:
                    waiting[fd][1] -= len(waiting[fd][0].recv_batch(rows))
                    if waiting[fd][1] <= 0:
                        del waiting[fd]
        elapsed = time.perf_counter() - started
        for link in links:
            link.close()
    return WORKERS * (chunks - window) / elapsed


def _timed_calls(comm, arg: tuple[int, int, float]) -> list[float]:
    """A worker of :func:`harness_calls`: ``calls`` timed allreduces of ``elements`` after two
    untimed ones (the round loop's first call loads its compiled code), ``gap_s`` apart as the
    harness's compute keeps them."""
    elements, calls, gap_s = arg
    x = np.random.default_rng(comm.config.worker).standard_normal(elements).astype(np.float32)
    times = []
    for i in range(calls + 2):
        started = time.perf_counter()
        comm.allreduce(x)
        if i >= 2:
            times.append(time.perf_counter() - started)
        time.sleep(gap_s)
    return times


def harness_calls(scenario: str = "slot-budget", calls: int = 30, gap_s: float = 0.02) -> dict:
    """Median time of one allreduce of ``scenario``'s padded gradient from four workers through
    a switch process, at the default 64 slots and at the scenario's own budget (each worker's
    median, then the median of the workers)."""
    pad = SCENARIOS[scenario].pad_gradient
    elements = sum(p.numel() for p in digits.model().parameters()) + pad
    out = {"scenario": scenario, "elements": elements,
           "chunks": num_blocks(elements), "workers": WORKERS, "call_s": {}}
    for slots in sorted({64, SCENARIOS[scenario].slots}, reverse=True):
        spec = local_job(1, WORKERS, slots=slots)
        with tempfile.TemporaryDirectory() as run_dir, LocalCluster([spec], run_dir) as cluster:
            times = cluster.run_workers(_timed_calls, {1: [(elements, calls, gap_s)] * WORKERS},
                                        timeout=300.0)
        out["call_s"][str(slots)] = float(np.median([np.median(t) for t in times.values()]))
    return out


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
    out["through_ports_pps"] = through_ports(chunks)
    out["harness_calls"] = harness_calls()
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
    lines.append(f"complete DATA through the UDP tunnel ports of a switch process: "
                 f"{r['through_ports_pps'] / 1e3:.1f} k packets/s = "
                 f"{r['through_ports_pps'] / r['complete']['softswitch_pps']:.2f} of the pipeline "
                 f"alone")
    h = r["harness_calls"]
    calls = ", ".join(f"{float(t) * 1e3:.1f} ms at {slots} slots"
                      for slots, t in h["call_s"].items())
    lines.append(f"the harness's {h['scenario']} allreduce ({h['chunks']} chunks, "
                 f"{h['workers']} workers) through a switch process: {calls}")
    return lines

"""Packet-rate measurement of the software switch, and of bmv2 on the same traffic when
``simple_switch_grpc`` is installed.

    from softswitch.packet_rate import compare
    result = compare(json_text, p4info_text, frames, writes=[write_request, ...])
    result["softswitch"].pps, result["bmv2"] (None without bmv2), result["ratio"]

``frames`` is a list of (ingress_port, frame); ``writes`` are P4Runtime WriteRequests that program
both targets identically before traffic starts.  Rates count input packets.  bmv2 runs with
``--use-files`` (bmv2_files.py): its ports read the whole input from pcap files as fast as it can
process them; its processing time is the span between the first and the last frame it writes out.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from p4.v1 import p4runtime_pb2 as pb

from .bmv2_files import Bmv2Files, bmv2_binary
from .dataplane import Dataplane
from .p4runtime_server import programmed_device

Frames = Sequence[tuple[int, bytes]]


@dataclass
class BenchResult:
    target: str
    packets: int
    seconds: float

    @property
    def pps(self) -> float:
        return self.packets / self.seconds if self.seconds > 0 else 0.0


def bench_softswitch(json_text: str, p4info_text: str, frames: Frames,
                     writes: Sequence[pb.WriteRequest] = (), repeat: int = 3) -> BenchResult:
    """Packets per second of ``V1Switch.process`` over one pass of ``frames``, on a freshly
    programmed switch each time; the best of ``repeat`` passes (the state a pass leaves behind
    would change what the next one measures)."""
    best = None
    for _ in range(repeat):
        process = programmed_device(Dataplane(), json_text, p4info_text, writes).switch.process
        start = time.perf_counter()
        for port, frame in frames:
            process(port, frame)
        result = BenchResult("softswitch", len(frames), time.perf_counter() - start)
        if best is None or result.pps > best.pps:
            best = result
    return best


def bench_bmv2(json_text: str, p4info_text: str, frames: Frames,
               writes: Sequence[pb.WriteRequest] = (),
               out_ports: Sequence[int] = tuple(range(16)), wait_seconds: int = 4,
               timeout: float = 120.0) -> BenchResult | None:
    """bmv2's packet rate on the same traffic, or None when simple_switch_grpc is absent.
    ``out_ports`` must include every port the traffic leaves on."""
    if bmv2_binary() is None:
        return None
    with Bmv2Files(json_text, p4info_text, frames, out_ports, writes, wait_seconds) as bmv2:
        bmv2.wait_for_output(settle=2.0, timeout=timeout)
    stamps = sorted(t for records in bmv2.outputs.values() for t, _ in records)
    if len(stamps) < 2:
        return BenchResult("bmv2", 0, 0.0)
    return BenchResult("bmv2", len(frames), stamps[-1] - stamps[0])


def compare(json_text: str, p4info_text: str, frames: Frames,
            writes: Sequence[pb.WriteRequest] = (), out_ports: Sequence[int] = tuple(range(16))
            ) -> dict:
    """Both rates on one pass over ``frames`` and their ratio (softswitch / bmv2; None without
    bmv2)."""
    soft = bench_softswitch(json_text, p4info_text, frames, writes)
    bmv2 = bench_bmv2(json_text, p4info_text, frames, writes, out_ports=out_ports)
    ratio = soft.pps / bmv2.pps if bmv2 is not None and bmv2.pps > 0 else None
    return {"softswitch": soft, "bmv2": bmv2, "ratio": ratio}

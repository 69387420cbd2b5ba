"""Allreduce goodput and the sender's packet rate, against a raw send loop of the same frames on
the same socket type, measured in the same run.

What is measured is the host library, so the far end must never be the bottleneck: a reflector
process answers each DATA frame at once with the RESULT a one-worker job would get from the switch
(every chunk completes with its only contribution). The embedded switch's own packet rate is
measured by the ``softswitch`` section.
"""

from __future__ import annotations

import multiprocessing
import socket
import time

import numpy as np

from bench.timing import interleaved_best
from host_lib.communicator import CommunicatorConfig, SwitchCommunicator
from host_lib.links import UdpTunnelLink
from protocol import constants as P
from protocol.codec import Endpoint, FrameBatch, field_offset, frames_to_bytes
from topologies.local import local_job

_HEADER = P.ETH_LEN + P.IPV4_LEN + P.UDP_LEN
_STOP = b"x"
# (destination, source, size) of the addresses a reply swaps: MAC, IPv4, UDP port.
_SWAPPED = [(field_offset(d), field_offset(s), n) for d, s, n in
            (("eth_dst", "eth_src", 6), ("ip_dst", "ip_src", 4), ("udp_dport", "udp_sport", 2))]


def _reflect(ready) -> None:
    """Turn every DATA frame into its one-worker RESULT (bitmap 1, count 1) and send it back,
    from the address it was sent to, as the switch does."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 24)
    sock.bind(("127.0.0.1", 0))
    ready.put(sock.getsockname())
    buf = bytearray(2048)
    view = memoryview(buf)
    result = (P.VERSION << 4) | P.Op.RESULT
    one = (1).to_bytes(4, "big")
    while True:
        n, peer = sock.recvfrom_into(buf)
        if n == len(_STOP):
            return
        if buf[_HEADER + 1] & P.Flag.PROBE:
            continue
        for a, b, size in _SWAPPED:
            buf[a:a + size], buf[b:b + size] = buf[b:b + size], buf[a:a + size]
        buf[_HEADER] = result
        buf[_HEADER + 1] &= P.Flag.SET
        buf[_HEADER + 12:_HEADER + 16] = one
        buf[_HEADER + 16] = 1
        sock.sendto(view[:n], peer)


def run(elements: int = 1 << 21) -> dict:
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Queue()
    reflector = ctx.Process(target=_reflect, args=(ready,), daemon=True)
    reflector.start()
    address = ready.get(timeout=30)
    try:
        spec = local_job(1, 1, slots=256)
        link = UdpTunnelLink(address)
        comm = SwitchCommunicator(CommunicatorConfig.from_spec(spec, 0, run=1), link)
        values = np.random.default_rng(0).standard_normal(elements).astype(np.float32)
        comm.allreduce(values)  # warm-up: compiles the quantizer, fills the predictor
        calls = []
        for _ in range(3):
            started = time.perf_counter()
            total = comm.allreduce(values)
            calls.append((time.perf_counter() - started, comm.last_stats))
        np.testing.assert_allclose(total, values, atol=float(np.abs(values).max()) * 1e-6)
        wall, stats = min(calls, key=lambda c: c[0])
        comm.close()

        # The raw loop: the same number of DATA frames, prebuilt, sent on the same socket type.
        w = spec.workers[0]
        chunk = np.arange(stats.packets_sent, dtype=np.uint32)
        frames = frames_to_bytes(FrameBatch(
            Endpoint(w.mac, w.ip, w.udp_port),
            Endpoint(spec.switch_mac, spec.switch_ip, P.UDP_PORT)).encode(
            op=P.Op.DATA, job=1, worker=0, slot=chunk % spec.slots, chunk=chunk,
            flags=P.Flag.PROBE))  # probes: the reflector drops them without answering
        raw_link = UdpTunnelLink(address)

        def raw_loop():
            for frame in frames:
                raw_link.send(frame)

        raw = interleaved_best({"raw": raw_loop}, repeat=3)["raw"]
        raw_link.close()
    finally:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.sendto(_STOP, address)
        reflector.join(timeout=10)
    sender_pps = stats.packets_sent / wall
    raw_pps = len(frames) / raw
    return {"elements": elements, "packets": stats.packets_sent,
            "retransmissions": stats.retransmissions, "allreduce_s": wall,
            "goodput_elements_per_s": elements / wall, "sender_pps": sender_pps,
            "raw_send_pps": raw_pps, "ratio_to_raw": sender_pps / raw_pps}


def summary(r: dict) -> list[str]:
    return [f"allreduce of {r['elements'] / 1e6:.1f} M float32: "
            f"{r['goodput_elements_per_s'] / 1e6:.1f} M elements/s, sender "
            f"{r['sender_pps'] / 1e3:.0f} k packets/s = {r['ratio_to_raw']:.2f} of a raw send "
            f"loop's {r['raw_send_pps'] / 1e3:.0f} k packets/s (goal >= 0.8)"]

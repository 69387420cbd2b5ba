"""The host data path, all measured in one run: allreduce goodput on the plain-call link (one
``send`` and one ``recv`` per frame, the old path) and on the best link the kernel offers,
against a reflector and through the embedded switch; the transport sender's packet rate as a
ratio to a *ceiling* (the fastest send primitive pushing prebuilt frames in a tight loop while the
reflector drains them) and to a plain Python send loop.

What is measured is the host library, so the far end must not be the bottleneck: a reflector
process answers each DATA frame at once with the RESULT a one-worker job would get from the switch
(every chunk completes with its only contribution), receiving and sending in batches with the best
mode. The embedded switch's own packet rate is measured by the ``softswitch`` section; the
allreduce through it here is capped by it.
"""

from __future__ import annotations

import multiprocessing
import select
import socket
import tempfile
import time

import numpy as np

from bench.timing import interleaved_best
from host_lib.communicator import CommunicatorConfig, SwitchCommunicator
from host_lib.links import UdpTunnelLink
from pktio.udp import UdpBatch
from protocol import constants as P
from protocol.codec import FRAME_DTYPE, Endpoint, FrameBatch
from topologies.local import LocalCluster, local_job

_STOP = b"x"
_SET, _PROBE = int(P.Flag.SET), int(P.Flag.PROBE)
_RESULT = (P.VERSION << 4) | P.Op.RESULT


def _reflect(ready) -> None:
    """Turn every DATA frame into its one-worker RESULT (bitmap 1, count 1) and send it back to
    where it came from; probes are drained without an answer. A 1-byte datagram stops it."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 24)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 24)
    sock.bind(("127.0.0.1", 0))
    sock.setblocking(False)
    io = UdpBatch(sock)
    ready.put(sock.getsockname())
    rows = np.zeros((256, P.FRAME_LEN), np.uint8)
    frames = rows.view(FRAME_DTYPE).reshape(len(rows))
    while True:
        select.select([sock], [], [])
        while n := io.recv(rows):
            lengths, names = io.lengths[:n], io.names[:n]
            if (lengths == len(_STOP)).any():
                return
            keep = (lengths == P.FRAME_LEN) & (frames["flags"][:n] & _PROBE == 0)
            batch = frames[:n][keep]
            batch["ver_op"] = _RESULT
            batch["flags"] &= _SET
            batch["bitmap"] = 1
            batch["count"] = 1
            if len(batch):
                peers = names[keep]
                same = (peers == peers[0]).all()
                for name in ([peers[0]] if same else np.unique(peers, axis=0)):
                    mine = batch if same else batch[(peers == name).all(axis=1)]
                    io.send(mine.view(np.uint8).reshape(len(mine), P.FRAME_LEN),
                            _address(name))


def _address(name: np.ndarray) -> tuple[str, int]:
    from pktio.udp import address
    return address(name)


def _allreduce(link, spec, values: np.ndarray, repeat: int = 3) -> tuple[float, object]:
    """Best wall time of ``repeat`` allreduce calls of ``values`` on ``link`` (after a warm-up
    that compiles the quantizer and fills the scale predictor), and that call's statistics."""
    comm = SwitchCommunicator(CommunicatorConfig.from_spec(spec, 0), link)
    try:
        comm.allreduce(values)
        calls = []
        for _ in range(repeat):
            started = time.perf_counter()
            total = comm.allreduce(values)
            calls.append((time.perf_counter() - started, comm.last_stats))
        np.testing.assert_allclose(total, values, atol=float(np.abs(values).max()) * 1e-6)
    finally:
        comm.close()
    return min(calls, key=lambda c: c[0])


def _send_rates(address, spec, packets: int) -> dict[str, float]:
    """Packets per second of prebuilt DATA probes (the reflector drains them): a plain Python
    loop of one ``send`` per frame, and the ceiling, the fastest mode's batches of 64."""
    w = spec.workers[0]
    chunk = np.arange(packets, dtype=np.uint32)
    frames = FrameBatch(Endpoint(w.mac, w.ip, w.udp_port),
                        Endpoint(spec.switch_mac, spec.switch_ip, P.UDP_PORT)).encode(
        op=P.Op.DATA, job=1, worker=0, slot=chunk % spec.slots, chunk=chunk, flags=_PROBE)
    rows = frames.view(np.uint8).reshape(packets, P.FRAME_LEN)
    plain, best = UdpTunnelLink(address, mode="plain"), UdpTunnelLink(address)
    views = [memoryview(row) for row in rows]

    def plain_loop():
        for frame in views:
            plain.send(frame)

    def ceiling():
        for start in range(0, packets, 64):
            best.io.send(rows[start:start + 64])

    times = interleaved_best({"plain_loop": plain_loop, "ceiling": ceiling}, repeat=3)
    plain.close()
    best.close()
    return {name: packets / t for name, t in times.items()} | {"ceiling_mode": best.io.mode}


def _through_switch(values: np.ndarray, mode: str | None) -> float:
    """Goodput of a one-worker allreduce through the embedded switch on loopback tunnels."""
    spec = local_job(1, 1, slots=256)
    with tempfile.TemporaryDirectory() as run_dir, LocalCluster([spec], run_dir) as cluster:
        link = UdpTunnelLink(cluster.contexts(1)[0].switch_udp, mode=mode)
        wall, _ = _allreduce(link, spec, values, repeat=2)
    return values.size / wall


def run(elements: int = 1 << 21) -> dict:
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Queue()
    reflector = ctx.Process(target=_reflect, args=(ready,), daemon=True)
    reflector.start()
    address = ready.get(timeout=30)
    spec = local_job(1, 1, slots=256)
    values = np.random.default_rng(0).standard_normal(elements).astype(np.float32)
    out: dict = {"elements": elements}
    try:
        for name, mode in (("old", "plain"), ("new", None)):
            link = UdpTunnelLink(address, mode=mode)
            wall, stats = _allreduce(link, spec, values)
            out[name] = {"mode": link.io.mode, "allreduce_s": wall, "packets": stats.packets_sent,
                         "retransmissions": stats.retransmissions,
                         "goodput_elements_per_s": elements / wall,
                         "sender_pps": stats.packets_sent / wall}
        out.update(_send_rates(address, spec, out["new"]["packets"]))
    finally:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.sendto(_STOP, address)
        reflector.join(timeout=10)
    switch_values = values[:elements // 8]
    out["switch"] = {"elements": switch_values.size,
                     "old_goodput_elements_per_s": _through_switch(switch_values, "plain"),
                     "new_goodput_elements_per_s": _through_switch(switch_values, None)}
    new = out["new"]
    out["goodput_ratio_new_to_old"] = (new["goodput_elements_per_s"]
                                       / out["old"]["goodput_elements_per_s"])
    out["sender_to_ceiling"] = new["sender_pps"] / out["ceiling"]
    out["sender_to_plain_loop"] = new["sender_pps"] / out["plain_loop"]
    return out


def summary(r: dict) -> list[str]:
    old, new, sw = r["old"], r["new"], r["switch"]
    return [
        f"allreduce of {r['elements'] / 1e6:.1f} M float32 against the reflector: "
        f"{new['goodput_elements_per_s'] / 1e6:.1f} M elements/s ({new['mode']}) vs "
        f"{old['goodput_elements_per_s'] / 1e6:.1f} M ({old['mode']} calls): "
        f"{r['goodput_ratio_new_to_old']:.1f}x (goal >= 5x)",
        f"sender {new['sender_pps'] / 1e3:.0f} k packets/s = {r['sender_to_ceiling']:.2f} of the "
        f"ceiling's {r['ceiling'] / 1e3:.0f} k/s ({r['ceiling_mode']}, goal >= 0.5), "
        f"{r['sender_to_plain_loop']:.1f}x a plain send loop's {r['plain_loop'] / 1e3:.0f} k/s",
        f"through the embedded switch ({sw['elements'] / 1e6:.2f} M float32): "
        f"{sw['new_goodput_elements_per_s'] / 1e6:.2f} M elements/s vs "
        f"{sw['old_goodput_elements_per_s'] / 1e6:.2f} M with plain calls"]

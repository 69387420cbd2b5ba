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

Against the reflector, both links run at two windows (the job's slots): the default 256, and
1024, which covers the round trip of this loopback path at the new link's rate (at 256 the
sender idles between windows waiting for the far end to be scheduled).
"""

from __future__ import annotations

import multiprocessing
import os
import select
import socket
import struct
import tempfile
import time

import numpy as np

from host_lib.communicator import CommunicatorConfig, SwitchCommunicator
from host_lib.engine.links import UdpTunnelLink
from pktio.udp import UdpBatch, address
from protocol import constants as P
from protocol.codec import FRAME_DTYPE, Endpoint, FrameBatch, field_offset
from topologies import lifetime
from topologies.local import LocalCluster, local_job

_STOP, _ASK = b"x", b"?"
_DRAINED = struct.Struct("<qd")
_SET, _PROBE = int(P.Flag.SET), int(P.Flag.PROBE)
_RESULT = (P.VERSION << 4) | P.Op.RESULT
_VER_OP, _FLAGS = field_offset("ver_op"), field_offset("flags")
_L2_L4 = _VER_OP  # the Ethernet, IPv4 and UDP headers end where the SA-ATP header starts
_BITMAP, _COUNT = field_offset("bitmap"), field_offset("count")
_ONE_WORKER = np.frombuffer((1).to_bytes(4, "big"), np.uint8)


def _swapped_l2_l4(header: np.ndarray) -> np.ndarray:
    """A frame's Ethernet, IPv4 and UDP headers with sources and destinations swapped (the
    IPv4 checksum does not change: the sum of its words does not)."""
    out = header.copy()
    for dst, src in (("eth_dst", "eth_src"), ("ip_dst", "ip_src"), ("udp_dport", "udp_sport")):
        d, s = field_offset(dst), field_offset(src)
        size = FRAME_DTYPE.fields[dst][0].itemsize
        out[d:d + size], out[s:s + size] = header[s:s + size], header[d:d + size]
    return out


def _reflect(ready, parent: int) -> None:
    """Turn every DATA frame into its one-worker RESULT (bitmap 1, count 1) and send it back to
    where it came from, from the address it was sent to (as the switch does). Probes are drained
    without an answer and counted: ``?`` asks for that count and the monotonic time of the last
    one; any other 1-byte datagram stops it.

    A worker's frames all carry the same Ethernet, IPv4 and UDP headers (protocol.codec's
    FrameBatch), so a batch's answers are written as byte columns of the receive buffer: the
    first frame's headers swapped, then the header bytes a RESULT changes. The far end is
    cheap, so that the benchmark measures the worker."""
    lifetime.die_with_parent(parent)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 24)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 24)
    sock.bind(("127.0.0.1", 0))
    sock.setblocking(False)
    io = UdpBatch(sock)
    ready.put(sock.getsockname())
    rows = np.zeros((256, P.FRAME_LEN), np.uint8)
    flags = rows[:, _FLAGS]
    drained, last = 0, 0.0
    while True:
        select.select([sock], [], [])
        while n := io.recv(rows):
            lengths, names = io.lengths[:n], io.names[:n]
            for i in np.flatnonzero(lengths == 1).tolist():
                if rows[i, 0] != ord(_ASK):
                    return
                sock.sendto(_DRAINED.pack(drained, last), address(names[i]))
            whole = lengths == P.FRAME_LEN
            probes = whole & (flags[:n] & _PROBE != 0)
            if probes.any():
                drained, last = drained + int(probes.sum()), time.monotonic()
            keep = whole & ~probes
            if not keep.any():
                continue
            peers = names[keep]
            same = (peers == peers[0]).all()
            for name in ([peers[0]] if same else np.unique(peers, axis=0)):
                mine = keep if same else keep & (names == name).all(axis=1)
                batch = rows[:n] if mine.all() else rows[:n][mine]
                batch[:, :_L2_L4] = _swapped_l2_l4(batch[0, :_L2_L4])
                batch[:, _VER_OP] = _RESULT
                batch[:, _FLAGS] &= _SET
                batch[:, _BITMAP:_BITMAP + 4] = _ONE_WORKER
                batch[:, _COUNT] = 1
                io.send(batch, address(name))


def _drained(address) -> tuple[int, float]:
    """The reflector's count of drained probes and when it drained the last one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(10)
        s.sendto(_ASK, address)
        return _DRAINED.unpack(s.recv(64))


def _allreduce(links: dict, spec, values: np.ndarray, repeat: int = 5) -> dict:
    """Per link: the best wall time of ``repeat`` allreduce calls of ``values`` and that call's
    statistics, the links taking turns (after a warm-up that compiles the quantizer and fills
    the scale predictor) so that background load hits each about equally."""
    comms = {name: SwitchCommunicator(CommunicatorConfig.from_spec(spec, 0, run=1), link)
             for name, link in links.items()}
    best: dict = {}
    try:
        for comm in comms.values():
            comm.allreduce(values)
        for _ in range(repeat):
            for name, comm in comms.items():
                started = time.perf_counter()
                total = comm.allreduce(values)
                wall = time.perf_counter() - started
                np.testing.assert_allclose(total, values,
                                           atol=float(np.abs(values).max()) * 1e-6)
                if name not in best or wall < best[name][0]:
                    best[name] = (wall, comm.last_stats)
    finally:
        for comm in comms.values():
            comm.close()
    return best


def _send_rates(address, spec, packets: int, repeat: int = 3) -> dict[str, float]:
    """Packets per second that prebuilt DATA probes reach the reflector (which drains them), from
    when the sender starts until the reflector has drained the last one: a plain Python loop of
    one ``send`` per frame, and the ceiling, the fastest mode's batches of 64."""
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

    rates = {"plain_loop": 0.0, "ceiling": 0.0}
    for _ in range(repeat):
        for name, loop in (("plain_loop", plain_loop), ("ceiling", ceiling)):
            before, _ = _drained(address)
            started = time.monotonic()
            loop()
            time.sleep(0.2)  # let the reflector drain what is queued
            after, last = _drained(address)
            rates[name] = max(rates[name], (after - before) / (last - started))
    plain.close()
    best.close()
    return rates | {"ceiling_mode": best.io.mode}


def _through_switch(values: np.ndarray) -> dict[str, float]:
    """Goodput of a one-worker allreduce through the embedded switch on loopback tunnels, on
    plain calls (old) and the best mode (new); a switch of its own for each (the same worker's
    chunk ids on one switch would meet the other link's results)."""
    spec = local_job(1, 1, slots=256)
    out = {}
    for name, mode in (("old", "plain"), ("new", None)):
        with tempfile.TemporaryDirectory() as run_dir, LocalCluster([spec], run_dir) as cluster:
            link = UdpTunnelLink(cluster.contexts(1)[0].switch_udp, mode=mode)
            wall, _ = _allreduce({name: link}, spec, values, repeat=2)[name]
        out[f"{name}_goodput_elements_per_s"] = values.size / wall
    return out


WINDOWS = (256, 1024)  # the default job window; one that covers this loopback's round trip


def run(elements: int = 1 << 21) -> dict:
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Queue()
    reflector = ctx.Process(target=_reflect, args=(ready, os.getpid()), daemon=True)
    reflector.start()
    address = ready.get(timeout=30)
    values = np.random.default_rng(0).standard_normal(elements).astype(np.float32)
    out: dict = {"elements": elements, "windows": {}}
    try:
        for window in WINDOWS:
            spec = local_job(1, 1, slots=window)
            links = {"old": UdpTunnelLink(address, mode="plain"), "new": UdpTunnelLink(address)}
            modes = {name: link.io.mode for name, link in links.items()}
            row = {}
            for name, (wall, stats) in _allreduce(links, spec, values).items():
                row[name] = {"mode": modes[name], "allreduce_s": wall,
                             "packets": stats.packets_sent,
                             "retransmissions": stats.retransmissions,
                             "goodput_elements_per_s": elements / wall,
                             "sender_pps": stats.packets_sent / wall}
            row["goodput_ratio_new_to_old"] = (row["new"]["goodput_elements_per_s"]
                                               / row["old"]["goodput_elements_per_s"])
            out["windows"][str(window)] = row
        out.update(_send_rates(address, local_job(1, 1, slots=WINDOWS[0]),
                               out["windows"][str(WINDOWS[0])]["new"]["packets"]))
    finally:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.sendto(_STOP, address)
        reflector.join(timeout=10)
    for row in out["windows"].values():
        row["sender_to_ceiling"] = row["new"]["sender_pps"] / out["ceiling"]
        row["sender_to_plain_loop"] = row["new"]["sender_pps"] / out["plain_loop"]
    switch_values = values[:elements // 8]
    out["switch"] = {"elements": switch_values.size} | _through_switch(switch_values)
    return out


def summary(r: dict) -> list[str]:
    lines = [f"ceiling {r['ceiling'] / 1e3:.0f} k packets/s ({r['ceiling_mode']}), "
             f"plain send loop {r['plain_loop'] / 1e3:.0f} k/s"]
    for window, row in r["windows"].items():
        old, new = row["old"], row["new"]
        lines.append(
            f"window {window}: allreduce of {r['elements'] / 1e6:.1f} M float32 against the "
            f"reflector {new['goodput_elements_per_s'] / 1e6:.1f} M elements/s ({new['mode']}) "
            f"vs {old['goodput_elements_per_s'] / 1e6:.1f} M ({old['mode']} calls): "
            f"{row['goodput_ratio_new_to_old']:.1f}x (goal >= 5x); sender "
            f"{new['sender_pps'] / 1e3:.0f} k packets/s = {row['sender_to_ceiling']:.2f} of the "
            f"ceiling (goal >= 0.5), {row['sender_to_plain_loop']:.1f}x the plain loop")
    sw = r["switch"]
    lines.append(f"through the embedded switch ({sw['elements'] / 1e6:.2f} M float32): "
                 f"{sw['new_goodput_elements_per_s'] / 1e6:.2f} M elements/s vs "
                 f"{sw['old_goodput_elements_per_s'] / 1e6:.2f} M with plain calls")
    return lines

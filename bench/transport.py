"""The host data path, all measured in one run (issue 38): one worker's allreduce goodput against
a reflector at 1, 2, 4, 8, ... shards; the single-shard path of the commit before the compiled
round loop and the shards (``BASELINE``), on the same reflector, interleaved call by call; each
link mode on one shard; the send ceiling; and the allreduce through the embedded switch.

What is measured is the host library, so the far end must not be the limit: the reflector
(:mod:`bench.reflector`) answers each DATA frame at once with the RESULT a one-worker job would
get from the switch, compiled, in as many processes as the worker has shards (the kernel hands
each frame to the process of its slot). The reflector and the worker run on cores of their own
(:func:`split_cores`); on a machine with fewer cores than shards plus reflectors, the shards
share the worker's: goodput then stops growing with shards (the 2-core development machine,
where the worker has one core), and the ratio to linear scaling says so.

The baseline runs in a process of its own from the commit's tree (``git archive``), so that the
same run compares the same machine under the same load; where git or the commit is missing (a
source tarball) it is skipped.
"""

from __future__ import annotations

import os
import resource
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.reflector import Reflector
from host_lib.communicator import CommunicatorConfig, SwitchCommunicator
from host_lib.engine.links import UdpTunnelLink
from pktio.native import NativeSocket
from protocol import constants as P
from protocol.codec import Endpoint, FrameBatch
from topologies import lifetime
from topologies.local import LocalCluster, local_job

BASELINE = "a0ba3a9"  # main before issue 38: one shard, the round loop in Python
WINDOW = 1024  # slots: covers this loopback path's round trip
REPEAT = 9  # calls per measurement (the best is taken)
_ROOT = Path(__file__).resolve().parent.parent
_BASELINE_WORKER = r'''
import sys, time
import numpy as np
from host_lib.communicator import CommunicatorConfig, SwitchCommunicator
from host_lib.engine.links import UdpTunnelLink
from topologies.local import local_job
import resource
host, port, elements, window = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
values = np.random.default_rng(0).standard_normal(elements).astype(np.float32)
comm = SwitchCommunicator(CommunicatorConfig.from_spec(local_job(1, 1, slots=window), 0, run=1),
                          UdpTunnelLink((host, port)))
comm.allreduce(values)
print("ready", flush=True)
for _ in sys.stdin:
    cpu, started = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    comm.allreduce(values)
    wall, after = time.perf_counter() - started, resource.getrusage(resource.RUSAGE_SELF)
    cpu = after.ru_utime + after.ru_stime - cpu.ru_utime - cpu.ru_stime
    print(wall, cpu, comm.last_stats.packets_sent, flush=True)
comm.close()
'''


def shard_counts() -> tuple[int, ...]:
    """1, 2, 4, 8, ... up to at least 8 and the cores of this machine."""
    counts, k = [], 1
    while k <= max(8, len(os.sched_getaffinity(0))):
        counts.append(k)
        k *= 2
    return tuple(counts)


class _Baseline:
    """The worker of commit ``BASELINE`` in a process of its own, one call per request."""

    def __init__(self, address, elements: int, tree: Path):
        self.proc = lifetime.popen(
            [sys.executable, "-c", _BASELINE_WORKER, address[0], str(address[1]), str(elements),
             str(WINDOW)], cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)},
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        if self.proc.stdout.readline().strip() != "ready":
            raise RuntimeError("the baseline worker did not start")

    def call(self) -> tuple[float, float, int]:
        self.proc.stdin.write("x\n")
        self.proc.stdin.flush()
        wall, cpu, packets = self.proc.stdout.readline().split()
        return float(wall), float(cpu), int(packets)

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def _baseline_tree(where: Path) -> Path | None:
    """The tree of commit ``BASELINE`` under ``where``, or None without git or the commit."""
    archive = where / "baseline.tar"
    try:
        subprocess.run(["git", "-C", str(_ROOT), "archive", "-o", str(archive), BASELINE],
                       check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    tree = where / "baseline"
    with tarfile.open(archive) as tar:
        tar.extractall(tree, filter="data")
    return tree


def _communicator(address, shards: int, mode: str | None = None) -> SwitchCommunicator:
    config = CommunicatorConfig.from_spec(local_job(1, 1, slots=WINDOW), 0, run=1,
                                          shards=shards)
    link = UdpTunnelLink(address, mode=mode, reply_to_sender=True)
    return SwitchCommunicator(config, link)


def _measure(calls: dict, repeat: int = REPEAT) -> dict[str, dict]:
    """Each of ``calls`` (name -> a function doing one call, returning its wall time, the CPU
    time of the worker's process and the packets sent) ``repeat`` times, in turns so that
    background load hits each about equally; the best call of each, and the least CPU time of a
    call (which background load changes less than the wall time)."""
    walls: dict[str, float] = {}
    cpus: dict[str, float] = {}
    packets: dict[str, int] = {}
    for _ in range(repeat):
        for name, call in calls.items():
            wall, cpu, sent = call()
            if wall < walls.get(name, np.inf):
                walls[name], packets[name] = wall, sent
            cpus[name] = min(cpu, cpus.get(name, np.inf))
    return {name: {"allreduce_s": walls[name], "cpu_s": cpus[name], "packets": packets[name]}
            for name in calls}


def _timed(comm: SwitchCommunicator, values: np.ndarray, out: np.ndarray):
    def call() -> tuple[float, float, int]:
        cpu, started = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        comm.allreduce(values, out=out)
        wall, after = time.perf_counter() - started, resource.getrusage(resource.RUSAGE_SELF)
        cpu = after.ru_utime + after.ru_stime - cpu.ru_utime - cpu.ru_stime
        return wall, cpu, comm.last_stats.packets_sent
    return call


def split_cores(shards: int, cores: set[int]) -> tuple[set[int], set[int]]:
    """The cores of the worker (with the baseline) and of a reflector of ``shards`` processes:
    the reflector the last ``shards`` of them, at most half; the worker the rest. Apart, the
    scheduler cannot put both ends on one core for part of a call: unpinned, four runs on the
    2-core machine measured the single-shard ratio to the baseline at 1.25x to 1.66x (in the
    worst, the worker waited 4.6 ms of a 15.5 ms call with its core idle); pinned, four runs
    measured 1.70x to 1.79x. Where there is one core, nothing is pinned."""
    ordered = sorted(cores)
    far = ordered[len(ordered) - max(1, min(shards, len(ordered) // 2)):]
    if len(far) == len(ordered):
        return set(ordered), set(ordered)
    return set(ordered) - set(far), set(far)


def _sweep(values: np.ndarray, tree: Path | None) -> tuple[dict, dict, dict | None]:
    """Goodput at each shard count; on one shard, every other link mode's and the baseline's
    (None without it)."""
    out = np.empty_like(values)
    reference = values.copy()
    rows: dict = {}
    modes, baseline_row = {}, None
    cores = os.sched_getaffinity(0)
    try:
        for shards in shard_counts():
            near, far = split_cores(shards, cores)
            os.sched_setaffinity(0, near)  # the baseline's process inherits it
            rows[str(shards)], one = _rows_at(shards, values, out, reference, tree, frozenset(far))
            if one is not None:
                modes, baseline_row = one
    finally:
        os.sched_setaffinity(0, cores)
    return rows, modes, baseline_row


def _rows_at(shards: int, values, out, reference, tree: Path | None, far: frozenset[int]):
    """One shard count's row; with one shard, also the other link modes' rows and the
    baseline's."""
    with Reflector(shards, cpus=far) as reflector:
        comms = {"new": _communicator(reflector.address, shards)}
        if shards == 1:
            comms |= {f"mode_{m}": _communicator(reflector.address, 1, m)
                      for m in ("mmsg", "plain")}
        baseline = _Baseline(reflector.address, values.size, tree) if (
            shards == 1 and tree is not None) else None
        try:
            for comm in comms.values():
                result = comm.allreduce(values, out=out)
                np.testing.assert_allclose(result, reference,
                                           atol=float(np.abs(values).max()) * 1e-6)
            calls = {name: _timed(comm, values, out) for name, comm in comms.items()}
            if baseline is not None:
                calls["baseline"] = baseline.call
            measured = _measure(calls)
        finally:
            for comm in comms.values():
                comm.close()
            if baseline is not None:
                baseline.close()
    for row in measured.values():
        row["goodput_elements_per_s"] = values.size / row["allreduce_s"]
        row["sender_pps"] = row["packets"] / row["allreduce_s"]
    row = measured.pop("new")
    if shards != 1:
        return row, None
    modes = {name.removeprefix("mode_"): r for name, r in measured.items()
             if name.startswith("mode_")}
    return row, (modes, measured.get("baseline"))


def _send_rates(packets: int, repeat: int = 3) -> dict[str, float]:
    """Packets per second that prebuilt DATA probes reach the reflector (which drains them), from
    when the sender starts until the reflector has drained the last one: a plain Python loop of
    one ``send`` per frame, and the ceiling, all the frames in one compiled call
    (:mod:`pktio.native`, segmentation offload trains where the kernel has them)."""
    spec = local_job(1, 1, slots=WINDOW)
    w = spec.workers[0]
    chunk = np.arange(packets, dtype=np.uint32)
    frames = FrameBatch(Endpoint(w.mac, w.ip, w.udp_port),
                        Endpoint(spec.switch_mac, spec.switch_ip, P.UDP_PORT)).encode(
        op=P.Op.DATA, job=1, worker=0, slot=chunk % WINDOW, chunk=chunk, flags=P.Flag.PROBE)
    rows = frames.view(np.uint8).reshape(packets, P.FRAME_LEN)
    with Reflector(1) as reflector:
        plain = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        plain.connect(reflector.address)
        best = UdpTunnelLink(reflector.address)
        views = [memoryview(row) for row in rows]

        def plain_loop():
            for frame in views:
                try:
                    plain.send(frame)
                except BlockingIOError:
                    pass

        def ceiling():
            best.native.send(rows)

        rates = {"plain_loop": 0.0, "ceiling": 0.0}
        for _ in range(repeat):
            for name, loop in (("plain_loop", plain_loop), ("ceiling", ceiling)):
                before, _ = reflector.drained()
                started = time.monotonic()
                loop()
                time.sleep(0.2)  # let the reflector drain what is queued
                after, last = reflector.drained()
                rates[name] = max(rates[name], (after - before) / (last - started))
        mode = best.native.mode if isinstance(best.native, NativeSocket) else best.mode
        plain.close()
        best.close()
    return rates | {"ceiling_mode": mode}


def _through_switch(values: np.ndarray) -> dict[str, float]:
    """Goodput of a one-worker allreduce through the embedded switch on loopback tunnels, on
    plain calls (old) and the best mode (new); a switch of its own for each (the same worker's
    chunk ids on one switch would meet the other link's results)."""
    spec = local_job(1, 1, slots=256)
    out = {}
    for name, mode in (("old", "plain"), ("new", None)):
        with tempfile.TemporaryDirectory() as run_dir, LocalCluster([spec], run_dir) as cluster:
            link = UdpTunnelLink(cluster.contexts(1)[0].switch_udp, mode=mode)
            comm = SwitchCommunicator(CommunicatorConfig.from_spec(spec, 0, run=1), link)
            try:
                comm.allreduce(values)
                wall = min(_timed(comm, values, np.empty_like(values))()[0] for _ in range(2))
            finally:
                comm.close()
        out[f"{name}_goodput_elements_per_s"] = values.size / wall
    return out


def _cpu_model() -> str:
    """The machine's CPU as the kernel names it (the result files say where they were run)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def run(elements: int = 1 << 21) -> dict:
    values = np.random.default_rng(0).standard_normal(elements).astype(np.float32)
    with tempfile.TemporaryDirectory() as where:
        tree = _baseline_tree(Path(where))
        shards, modes, baseline = _sweep(values, tree)
    out: dict = {"elements": elements, "window": WINDOW, "cores": len(os.sched_getaffinity(0)),
                 "cpu": _cpu_model(), "shards": shards, "modes": modes, "baseline": baseline}
    one = shards["1"]
    if baseline is not None:
        baseline["commit"] = BASELINE
        out["single_shard_to_baseline"] = (one["goodput_elements_per_s"]
                                           / baseline["goodput_elements_per_s"])
        out["single_shard_cpu_to_baseline"] = one["cpu_s"] / baseline["cpu_s"]
    for k, row in shards.items():
        row["scaling_to_linear"] = (row["goodput_elements_per_s"]
                                    / (int(k) * one["goodput_elements_per_s"]))
    out["scaling_to_linear_8"] = shards["8"]["scaling_to_linear"]
    out.update(_send_rates(one["packets"]))
    one["sender_to_ceiling"] = one["sender_pps"] / out["ceiling"]
    one["sender_to_plain_loop"] = one["sender_pps"] / out["plain_loop"]
    switch_values = values[:elements // 8]
    out["switch"] = {"elements": switch_values.size} | _through_switch(switch_values)
    return out


def summary(r: dict) -> list[str]:
    one, shards, base = r["shards"]["1"], r["shards"], r["baseline"]
    lines = [f"allreduce of {r['elements'] / 1e6:.1f} M float32 against the reflector, window "
             f"{r['window']}, {r['cores']} cores ({r['cpu']}): one shard "
             f"{one['goodput_elements_per_s'] / 1e6:.0f} M elements/s"]
    if base is not None:
        lines.append(f"  vs {base['commit']} (before the compiled loop) "
                     f"{base['goodput_elements_per_s'] / 1e6:.0f} M in the same run: "
                     f"{r['single_shard_to_baseline']:.2f}x (goal >= 1.5x); CPU time per "
                     f"call {one['cpu_s'] * 1e3:.1f} vs {base['cpu_s'] * 1e3:.1f} ms "
                     f"({r['single_shard_cpu_to_baseline']:.2f}x)")
    modes = ", ".join(f"{m} {row['goodput_elements_per_s'] / 1e6:.0f} M"
                      for m, row in r["modes"].items())
    lines.append(f"  other link modes on one shard: {modes}")
    lines.append("  per shard count: " + ", ".join(
        f"{k}: {row['goodput_elements_per_s'] / 1e6:.0f} M ({row['scaling_to_linear']:.2f} of "
        f"linear)" for k, row in shards.items()))
    lines.append(f"  ceiling {r['ceiling'] / 1e3:.0f} k packets/s ({r['ceiling_mode']}), plain "
                 f"send loop {r['plain_loop'] / 1e3:.0f} k/s; one shard's sender "
                 f"{one['sender_pps'] / 1e3:.0f} k/s = {one['sender_to_ceiling']:.2f} of the "
                 f"ceiling")
    sw = r["switch"]
    lines.append(f"through the embedded switch ({sw['elements'] / 1e6:.2f} M float32): "
                 f"{sw['new_goodput_elements_per_s'] / 1e6:.2f} M elements/s vs "
                 f"{sw['old_goodput_elements_per_s'] / 1e6:.2f} M with plain calls")
    return lines

"""One SA-ATP job on a Mininet network, end to end: the topology's switches run bmv2 or the
embedded target, the controller programs each of them over P4Runtime (the aggregating switch
admits the job; leaves mark it transit and forward it), and a worker process in every host sums
arrays through the switch over the host's interface.

    with MininetCluster(StarTopo(4), "runs/mininet", target="embedded") as cluster:
        cluster.set_loss(0.01)
        run = cluster.run_allreduces({w: [x0_w, x1_w] for w in range(4)})
        run.results[w][call], run.stats[w][call]

Needs root and Mininet. ``stop()`` (or leaving the ``with``) ends the workers, the switch
programs, the hosts' namespaces and every link; it never runs ``mn -c``.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
from mininet.net import Mininet

from control_plane.controller import Controller
from host_lib.engine.runs import new_run_id
from protocol.jobspec import JobSpec
from topologies.local import WorkerFailed
from topologies.mininet_nodes import Ipv4OnlyHost, P4RuntimeSwitch
from topologies.mininet_topos import SaAtpTopo, WorkerPlace

Progress = Callable[[str], None]


@dataclass
class AllreduceRun:
    """What the workers returned (per worker, one result and one stats record per call), and
    the aggregating switch's counters of the job over the run (docs/protocol.md §8)."""

    results: dict[int, list[np.ndarray]]
    stats: dict[int, list[dict]]
    counters: dict


class MininetCluster:
    def __init__(self, topo: SaAtpTopo, run_dir: str | Path, target: str | None = None,
                 job_id: int = 7, slots: int = 64, log_level: str = "warn",
                 progress: Progress | None = None):
        self.topo = topo
        self.run_dir = Path(run_dir).resolve()
        self.target = target
        self.spec: JobSpec = topo.job_spec(job_id, slots)
        self.log_level = log_level
        self.progress = progress or (lambda message: None)
        self.net: Mininet | None = None
        self.controllers: dict[str, Controller] = {}
        self._workers: list[subprocess.Popen] = []

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> MininetCluster:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        switch = partial(P4RuntimeSwitch, target=self.target, run_dir=self.run_dir,
                         grpc_port=0, log_level=self.log_level)
        self.net = Mininet(topo=self.topo, switch=switch, host=Ipv4OnlyHost, controller=None,
                           autoStaticArp=True, build=False)
        try:
            self.net.build()
            for host in self.net.hosts:  # no ARP at all: the switch's address is static too
                host.setARP(self.spec.switch_ip, self.spec.switch_mac)
            self.net.start()
            for sw in self.net.switches:
                self.progress(f"{sw.name}: {sw.process.name} ({len(sw.data_ports())} ports), "
                              f"P4Runtime on {sw.grpc_address}, log in {sw.run_dir}")
            self._program_switches()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """End the workers, close the controllers, stop the switch programs while their
        interfaces still exist, then let Mininet remove links, hosts and switches."""
        self._end_workers()
        for ctl in self.controllers.values():
            ctl.close()
        self.controllers.clear()
        if self.net is not None:
            for sw in self.net.switches:
                sw.stop(deleteIntfs=False)
            self.net.stop()
            self.net = None

    def __enter__(self) -> MininetCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _program_switches(self) -> None:
        for sw in self.net.switches:
            ctl = Controller(sw.grpc_address, sw.data_ports()).connect()
            self.controllers[sw.name] = ctl
            ctl.reconcile()
            self.progress(f"{sw.name}: pipeline loaded")
        for name, role in self.topo.leaves.items():
            ctl = self.controllers[name]
            ctl.add_transit(self.spec.id)
            for mac, port in role.routes().items():
                ctl.add_host(mac, port)
            self.progress(f"{name}: forwards job {self.spec.id} (transit), uplink port "
                          f"{role.uplink}")

    # -- the job --------------------------------------------------------------------------------

    @property
    def aggregating_switch(self) -> Controller:
        """The controller of the switch that aggregates the job."""
        return self.controllers[self.topo.aggregating_switch]

    def set_loss(self, probability: float) -> None:
        """Drop SA-ATP packets with this probability at ingress and at egress of the
        aggregating switch (the drop simulator: these kernels have no netem)."""
        for direction in ("ingress", "egress"):
            self.aggregating_switch.set_loss(probability, direction=direction)
        self.progress(f"{self.topo.aggregating_switch}: drop simulator at {probability:g} on "
                      f"ingress and egress")

    def run_allreduces(self, calls: dict[int, list[np.ndarray]], timeout: float = 300.0,
                       silence_timeout: float = 20.0,
                       on_call: Callable[[int, dict], None] | None = None) -> AllreduceRun:
        """Run worker w's calls ``calls[w]`` (float32: quantized allreduce; int32: exact) in
        a process in its host, all workers at once, and return what they got. The job is
        admitted for the run and removed after it, so each run starts from chunk 0 on cleared
        aggregators. ``on_call(worker, stats)`` is called as each worker finishes a call."""
        if sorted(calls) != sorted(p.worker for p in self.topo.workers):
            raise ValueError(f"need the calls of workers {[p.worker for p in self.topo.workers]}")
        job = self.aggregating_switch.admit(self.spec)
        counters_before = self.aggregating_switch.counters(self.spec.id)
        self.progress(f"{self.topo.aggregating_switch}: job {self.spec.id} admitted "
                      f"({len(self.spec.workers)} workers, slots {job.slot_base}.."
                      f"{job.slot_base + self.spec.slots - 1})")
        try:
            spec_path = self.run_dir / "job.toml"
            spec_path.write_text(self.spec.to_toml())
            run = new_run_id()
            started = {place: self._start_worker(place, calls[place.worker], spec_path, run,
                                                 silence_timeout)
                       for place in self.topo.workers}
            self.progress(f"{len(started)} workers started")
            stats = self._wait(started, timeout, on_call or (lambda worker, record: None))
            results = {}
            for place in self.topo.workers:
                with np.load(self._path(place.host, "results.npz")) as f:
                    results[place.worker] = [f[f"call{i}"] for i in range(len(f.files))]
            counters = _difference(self.aggregating_switch.counters(self.spec.id), counters_before)
            return AllreduceRun(results, stats, counters)
        finally:
            self._end_workers()
            self.aggregating_switch.remove(self.spec.id)

    def _path(self, host: str, what: str) -> Path:
        return self.run_dir / f"{host}.{what}"

    def _start_worker(self, place: WorkerPlace, arrays: list[np.ndarray], spec_path: Path,
                      run: int, silence_timeout: float) -> subprocess.Popen:
        calls_path = self._path(place.host, "calls.npz")
        np.savez(calls_path, **{f"call{i}": a for i, a in enumerate(arrays)})
        self._path(place.host, "results.npz").unlink(missing_ok=True)
        host = self.net.get(place.host)
        with open(self._path(place.host, "worker.log"), "wb") as log:
            proc = host.popen(
                [sys.executable, "-m", "topologies.mininet_worker", "--spec", str(spec_path),
                 "--worker", str(place.worker), "--interface", host.defaultIntf().name,
                 "--calls", str(calls_path), "--results", str(self._path(place.host,
                                                                          "results.npz")),
                 "--run", str(run), "--silence-timeout", str(silence_timeout)],
                stdout=subprocess.PIPE, stderr=log, env={**os.environ, "OMP_NUM_THREADS": "1"})
        self._workers.append(proc)
        return proc

    def _wait(self, procs: dict[WorkerPlace, subprocess.Popen], timeout: float,
              on_call: Callable[[int, dict], None]) -> dict[int, list[dict]]:
        """Each worker's per-call records, read from its stdout until it exits; the first
        worker that fails (or the deadline) ends the wait."""
        deadline = time.monotonic() + timeout
        stats: dict[int, list[dict]] = {place.worker: [] for place in procs}
        open_pipes = {proc.stdout.fileno(): (place, proc) for place, proc in procs.items()}
        while open_pipes:
            left = deadline - time.monotonic()
            if left <= 0:
                raise WorkerFailed(f"workers {sorted(p.worker for p, _ in open_pipes.values())} "
                                   f"did not finish within {timeout} s")
            ready, _, _ = select.select(list(open_pipes), [], [], min(left, 1.0))
            for fd in ready:
                place, proc = open_pipes[fd]
                line = proc.stdout.readline()
                if line:
                    stats[place.worker].append(json.loads(line))
                    on_call(place.worker, stats[place.worker][-1])
                    continue
                del open_pipes[fd]
                if proc.wait() != 0:
                    log = self._path(place.host, "worker.log").read_text()[-2000:]
                    raise WorkerFailed(f"worker {place.worker} ({place.host}) exited with "
                                       f"{proc.returncode}:\n{log}")
        return stats

    def _end_workers(self) -> None:
        for proc in self._workers:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):  # mnexec -d: a session leader
                    os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            proc.stdout.close()
        self._workers.clear()


def _difference(after: dict, before: dict) -> dict:
    """after - before for nested dicts of counts (a missing count is 0); zeros left out."""
    if not isinstance(after, dict):
        return after - (before or 0)
    out = {k: _difference(v, before.get(k, {} if isinstance(v, dict) else 0))
           for k, v in after.items()}
    return {k: v for k, v in out.items() if v != 0 and v != {}}

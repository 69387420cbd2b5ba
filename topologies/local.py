"""The no-root topology: one switch process whose ports are UDP tunnels on loopback, and the
workers of one or more jobs as local processes, each with a :class:`SwitchCommunicator` on its own
port. This is what the README's main job, the transport tests and the benchmarks run on.

    with LocalCluster([local_job(1, n_workers=4)], run_dir="runs/demo") as cluster:
        results = cluster.run_workers(my_fn, {1: [args0, args1, args2, args3]})

``my_fn(comm, args)`` runs in worker process (job, worker) and returns a picklable value.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from control_plane.controller import Controller
from host_lib.engine.runs import new_run_id
from protocol.jobspec import JobSpec, WorkerSpec
from topologies import lifetime
from topologies.switch_process import EMBEDDED, SwitchProcess, free_tcp_port, udp_ports

SWITCH_MAC = "02:00:00:00:00:fe"
SWITCH_IP = "10.0.0.254"


def local_job(job_id: int, n_workers: int, first_port: int = 1, slots: int = 64,
              **kwargs) -> JobSpec:
    """A job whose worker w sits on switch port first_port + w."""
    workers = tuple(WorkerSpec(w, first_port + w, f"02:00:00:{job_id & 0xFF:02x}:00:{w + 1:02x}",
                               f"10.{job_id & 0xFF}.0.{w + 1}") for w in range(n_workers))
    return JobSpec(job_id, slots, workers, switch_mac=SWITCH_MAC, switch_ip=SWITCH_IP, **kwargs)


@dataclass(frozen=True)
class WorkerContext:
    """What a worker process needs to reach the switch and its peers."""

    spec: JobSpec
    worker: int
    run: int  # the run's identity, the same for every worker of one start_workers call
    switch_udp: tuple[str, int]
    dist_port: int | None  # torch.distributed rendezvous port of the job, if any
    comm_options: dict
    impairment: dict | None = None  # ImpairedLink options (drop, duplicate, reorder), if any
    link_mode: str | None = None  # UdpTunnelLink's pktio mode (None: the best the kernel has)


class LocalCluster:
    def __init__(self, jobs: list[JobSpec], run_dir: str | Path, binary: str = EMBEDDED,
                 log_level: str = "warn", pool_slots: int = 0):
        self.jobs = {spec.id: spec for spec in jobs}
        ports = sorted({w.port for spec in jobs for w in spec.workers})
        self.switch = SwitchProcess(udp_ports(ports), run_dir, binary=binary,
                                    log_level=log_level)
        self.controller = Controller(self.switch.grpc_address, ports)
        self.controller.resize_pool(pool_slots)
        self.run_dir = Path(run_dir)
        self._last_run = 0
        self._groups: list[WorkerGroup] = []

    def start(self) -> LocalCluster:
        self.switch.start()
        self.controller.connect()
        self.controller.reconcile()
        for spec in self.jobs.values():
            self.controller.admit(spec)
        return self

    def stop(self) -> None:
        """Stop the workers still running, then the controller and the switch."""
        for group in self._groups:
            group.kill()
        self.controller.close()
        self.switch.stop()

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def contexts(self, job_id: int, distributed: bool = False, impairment: dict | None = None,
                 link_mode: str | None = None, run: int | None = None,
                 **comm_options) -> list[WorkerContext]:
        """What each worker of a job needs: every call is a new run of the job (as each
        torchrun launch is), unless ``run`` names one."""
        spec = self.jobs[job_id]
        dist_port = free_tcp_port() if distributed else None
        if run is None:
            run = self._last_run = max(new_run_id(), self._last_run + 1)
        return [WorkerContext(spec, w.id, run, self.switch.udp_ports[w.port], dist_port,
                              comm_options, _impairment_of(impairment, w.id), link_mode)
                for w in spec.workers]

    def start_workers(self, fn, args: dict[int, list], distributed: bool = False,
                      impairment: dict | None = None, link_mode: str | None = None,
                      **comm_options) -> WorkerGroup:
        """Start one process per worker of each job in ``args`` (job id -> one argument per
        worker); ``distributed`` gives each job a gloo process group and a fallback;
        ``impairment`` drops, duplicates or reorders frames on the workers' links: options for
        every worker, or ``{worker id: options}``; ``link_mode`` forces one of
        :data:`pktio.udp.MODES` on the links."""
        ctx = multiprocessing.get_context("spawn")
        results = ctx.Queue()
        procs = []
        for job_id, per_worker in args.items():
            contexts = self.contexts(job_id, distributed, impairment, link_mode, **comm_options)
            if len(per_worker) != len(contexts):
                raise ValueError(f"job {job_id} has {len(contexts)} workers, got "
                                 f"{len(per_worker)} arguments")
            for wctx, arg in zip(contexts, per_worker, strict=True):
                p = ctx.Process(target=_worker_main,
                                args=(fn, wctx, arg, results, os.getpid()),
                                name=f"job{job_id}-w{wctx.worker}", daemon=True)
                p.start()
                procs.append(((job_id, wctx.worker), p))
        self._groups.append(WorkerGroup(procs, results, args))
        return self._groups[-1]

    def run_workers(self, fn, args: dict[int, list], timeout: float = 600.0,
                    distributed: bool = False, impairment: dict | None = None,
                    link_mode: str | None = None, **comm_options) -> dict:
        """Run workers to completion; {(job, worker): return value}."""
        return self.start_workers(fn, args, distributed, impairment, link_mode,
                                  **comm_options).join(timeout)


class WorkerFailed(RuntimeError):
    pass


class WorkerGroup:
    """Worker processes started by :meth:`LocalCluster.start_workers`."""

    def __init__(self, procs, results, args):
        self.procs = procs
        self.results = results
        # A spawned worker unpickles its arguments after it starts: an Event or a Barrier
        # among them must outlive the caller's references (its semaphore goes with the last).
        self.args = args

    def join(self, timeout: float) -> dict:
        """Every worker's return value; raises WorkerFailed with the tracebacks of failed
        workers, or if one dies without a word or the time runs out."""
        deadline = time.monotonic() + timeout
        out, errors = {}, []
        pending = {key for key, _ in self.procs}
        while pending:
            try:
                key, ok, value = self.results.get(
                    timeout=min(1.0, max(0.01, deadline - time.monotonic())))
            except queue.Empty:
                if time.monotonic() > deadline:
                    self.kill()
                    raise WorkerFailed("\n".join(errors + [
                        f"workers {sorted(pending)} did not finish within {timeout} s"])
                    ) from None
                crashed = [(k, p.exitcode) for k, p in self.procs
                           if k in pending and p.exitcode not in (None, 0)]
                if crashed:
                    self.kill()
                    raise WorkerFailed(f"workers died without reporting: {crashed}") from None
                continue
            pending.discard(key)
            if ok:
                out[key] = value
            else:
                errors.append(f"worker {key}:\n{value}")
                # the others likely wait for the one that failed: give them a moment, no more
                deadline = min(deadline, time.monotonic() + 10)
        for _, p in self.procs:
            p.join(timeout=10)
        if errors:
            raise WorkerFailed("\n".join(errors))
        return out

    def kill(self) -> None:
        for _, p in self.procs:
            if p.is_alive():
                p.kill()
        for _, p in self.procs:
            p.join()


def _impairment_of(impairment: dict | None, worker: int) -> dict | None:
    """ImpairedLink options for one worker: the same for all, or looked up by worker id."""
    if not impairment or not all(isinstance(k, int) for k in impairment):
        return impairment
    return impairment.get(worker)


def _worker_main(fn, ctx: WorkerContext, arg, results, parent: int) -> None:
    lifetime.die_with_parent(parent)
    key = (ctx.spec.id, ctx.worker)
    try:
        results.put((key, True, fn(_communicator(ctx), arg)))
    except BaseException:  # noqa: BLE001 - reported to the parent with its traceback
        results.put((key, False, traceback.format_exc()))


def _communicator(ctx: WorkerContext):
    from host_lib.communicator import CommunicatorConfig, SwitchCommunicator
    from host_lib.engine.links import ImpairedLink, UdpTunnelLink

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    fallback = None
    if ctx.dist_port is not None:
        import torch.distributed as dist

        from host_lib.pytorch.fallback import FallbackGroup
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{ctx.dist_port}",
                                rank=ctx.worker, world_size=len(ctx.spec.workers))
        fallback = FallbackGroup(dist.group.WORLD)
    config = CommunicatorConfig.from_spec(ctx.spec, ctx.worker, ctx.run, **ctx.comm_options)
    link = UdpTunnelLink(ctx.switch_udp, mode=ctx.link_mode)
    if ctx.impairment:
        link = ImpairedLink(link, **{"seed": ctx.worker, **ctx.impairment})
    return SwitchCommunicator(config, link, fallback)


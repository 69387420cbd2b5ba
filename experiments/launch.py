"""The training methods, and starting one training run of experiments/train.py under torchrun: with
gloo alone, or against a fresh embedded switch with the job admitted (shared by the main job and
the policy harness)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from topologies import lifetime
from topologies.local import LocalCluster, local_job

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Method:
    """One way to train the job: how gradients are summed and under which straggler policy."""

    comm: str  # 'gloo' or 'switch'
    policy: str  # a name in host_lib.scheduling.policies.registry.POLICIES
    description: str


METHODS = {
    "gloo": Method("gloo", "synchronous", "gloo allreduce (torch.distributed), the baseline"),
    "switch": Method("switch", "synchronous",
                     "in-network aggregation through the switch, no straggler handling"),
    "sa-atp-takeover": Method("switch", "sa-atp-takeover", "SA-ATP slot takeover only: "
                              "leading workers take stragglers' slots over"),
    "sa-atp-resplit": Method("switch", "sa-atp-resplit", "SA-ATP without work stealing: slot "
                             "takeover and the batch re-split from step-time history"),
    "sa-atp": Method("switch", "sa-atp", "SA-ATP: slot takeover, work stealing within the "
                     "iteration and the batch re-split from step-time history, each where "
                     "its cost model says it pays"),
    "sa-atp-no-takeover": Method("switch", "sa-atp-no-takeover", "SA-ATP without slot "
                                 "takeover (the ablation): stealing and the re-split only"),
    "dpar": Method("switch", "dpar", "DPAR: exclude a detected straggler, readmit it later"),
    "boa": Method("switch", "boa", "BOA: per-worker batch sizes from fitted step-time models"),
    "partial-reduce": Method("switch", "partial-reduce",
                             "Partial-Reduce: ready workers aggregate among themselves"),
    "k-of-n": Method("switch", "k-of-n", "k-of-n (SAINA): a chunk completes after k "
                     "contributions"),
}


def pick(text: str, known=METHODS) -> list[str]:
    """Names from a comma-separated list (methods by default); exits naming the choices when
    one is unknown."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown:
        sys.exit(f"unknown {unknown}; choose from {', '.join(known)}")
    return names


def run_training(log_dir: Path, workers: int, comm: str, train_args: list[str], *,
                 slots: int = 64, borrow: int = 0, inband_fanin: bool = False,
                 output: Path | None = None, timeout: float | None = None,
                 neighbour_args: list[str] | None = None) -> None:
    """Train with ``workers`` processes; rank logs go to ``log_dir``. ``comm`` is 'gloo' or
    'switch' (a job of ``slots`` aggregators, and ``borrow`` more from the switch's shared
    pool of as many, docs/protocol.md §4.6); ``train_args`` are experiments/train.py's other
    options. torchrun's output goes to the console, or to the file ``output``.

    With ``neighbour_args``, a second job of as many workers, its own ``slots`` aggregators
    and as many borrowed from the same pool trains through the embedded switch at the same
    time (the first job's switch, or one of its own beside a gloo job) with those options; its
    logs and torchrun's output go to ``log_dir/neighbour``."""
    log_dir.mkdir(parents=True, exist_ok=True)
    # (job spec or None for gloo, log directory, train.py's options, torchrun's output)
    runs = [(None if comm == "gloo" else local_job(1, workers, slots=slots, borrow=borrow,
                                                   inband_fanin=inband_fanin),
             log_dir, ["--comm", comm, "--log-dir", str(log_dir), *train_args], output)]
    if neighbour_args is not None:
        other = log_dir / "neighbour"
        other.mkdir(exist_ok=True)
        runs.append((local_job(2, workers, first_port=workers + 1, slots=slots, borrow=borrow,
                               inband_fanin=inband_fanin), other,
                     ["--comm", "switch", "--log-dir", str(other), *neighbour_args],
                     other / "torchrun.log"))
    specs = [spec for spec, *_ in runs if spec is not None]
    if not specs:
        _wait([_torchrun(workers, runs[0][2], output)], timeout)
        return
    with LocalCluster(specs, log_dir / "switch", pool_slots=borrow) as cluster:
        ports = log_dir / "udp_ports.json"
        ports.write_text(json.dumps({str(p): list(a)
                                     for p, a in cluster.switch.udp_ports.items()}))
        procs = []
        for spec, where, job_args, out in runs:
            if spec is not None:
                (where / "job.toml").write_text(spec.to_toml())
                job_args = job_args + ["--job-spec", str(where / "job.toml"),
                                       "--udp-ports", str(ports)]
            procs.append(_torchrun(workers, job_args, out))
        _wait(procs, timeout)


def compile_kernels(workers: int) -> None:
    """Train two iterations through the switch and throw them away, so that the host
    library's compiled kernels (numba, cached on disk beside their sources) exist before the
    runs that are timed: in a fresh checkout the first run through the switch would otherwise
    spend ~3 s of its first iteration compiling them, all of it counted in its time to
    accuracy."""
    with tempfile.TemporaryDirectory(prefix="sa-atp-compile-") as tmp:
        run_training(Path(tmp), workers, "switch", [
            "--policy", "sa-atp", "--iterations", "2", "--eval-every", "1000",
            "--no-progress"], output=Path(tmp) / "torchrun.log", timeout=600)


def _torchrun(workers: int, args: list[str], output: Path | None) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           f"--nproc-per-node={workers}", "-m", "experiments.train", *args]
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    if output is None:
        return lifetime.popen(cmd, cwd=ROOT, env=env)
    with open(output, "w") as out:
        return lifetime.popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)


def _wait(procs: list[subprocess.Popen], timeout: float | None) -> None:
    """Wait for every run; if one fails or the time is up, stop the others and raise."""
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        for proc in procs:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if proc.wait(timeout=left):
                raise subprocess.CalledProcessError(proc.returncode, proc.args)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()

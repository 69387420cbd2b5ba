"""Starting one training run of examples/train.py under torchrun: with gloo alone, or against a
fresh embedded switch with the job admitted (shared by the main job and the policy harness)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from topologies.local import LocalCluster, local_job

ROOT = Path(__file__).resolve().parent.parent


def run_training(log_dir: Path, workers: int, comm: str, train_args: list[str], *,
                 inband_fanin: bool = False, output: Path | None = None,
                 timeout: float | None = None) -> None:
    """Train with ``workers`` processes; rank logs go to ``log_dir``. ``comm`` is 'gloo' or
    'switch'; ``train_args`` are examples/train.py's other options. torchrun's output goes to
    the console, or to the file ``output``."""
    log_dir.mkdir(parents=True, exist_ok=True)
    args = ["--comm", comm, "--log-dir", str(log_dir), *train_args]
    if comm == "gloo":
        _torchrun(workers, args, output, timeout)
        return
    spec = local_job(1, workers, slots=64, inband_fanin=inband_fanin)
    with LocalCluster([spec], log_dir / "switch") as cluster:
        (log_dir / "job.toml").write_text(spec.to_toml())
        ports = log_dir / "udp_ports.json"
        ports.write_text(json.dumps({str(p): list(a)
                                     for p, a in cluster.switch.udp_ports.items()}))
        _torchrun(workers, args + ["--job-spec", str(log_dir / "job.toml"),
                                   "--udp-ports", str(ports)], output, timeout)


def _torchrun(workers: int, args: list[str], output: Path | None,
              timeout: float | None) -> None:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           f"--nproc-per-node={workers}", "-m", "examples.train", *args]
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    if output is None:
        subprocess.run(cmd, check=True, cwd=ROOT, env=env, timeout=timeout)
        return
    with open(output, "w") as out:
        subprocess.run(cmd, check=True, cwd=ROOT, env=env, stdout=out,
                       stderr=subprocess.STDOUT, timeout=timeout)

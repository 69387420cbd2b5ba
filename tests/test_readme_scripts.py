"""The README's scripts (the DDP hook, the torch.distributed backend), exactly as printed, under
torchrun against ``softswitch-grpc`` set up with the README's ``sa-atp-ctl`` commands."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

from control_plane import cli
from protocol import constants as P
from topologies.switch_process import EMBEDDED, SwitchProcess, udp_ports

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "examples" / "jobs" / "four_workers.toml"
STEPS = 60  # the script's training steps
FIT = re.compile(r"rank (\d): weights (\[.*?\]) bias (\S+) last call")
SUMS = re.compile(r"rank (\d): (\[.*?\]) (\d+)")


def readme_block(first_line: str) -> str:
    """The README's python code block that starts with ``first_line``."""
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    matches = [b for b in blocks if b.startswith(first_line)]
    assert len(matches) == 1, f"the README has {len(matches)} blocks starting {first_line!r}"
    return matches[0]


def sa_atp_ctl(capsys, switch: SwitchProcess, state: Path, *args: str):
    """One ``sa-atp-ctl`` command, its JSON output parsed."""
    capsys.readouterr()
    assert cli.main(["--switch", switch.grpc_address, "--state", str(state), *args]) == 0
    out = capsys.readouterr().out
    return json.loads(out) if out.strip() else None


def run_readme_script(first_line: str, tmp_path: Path, capsys) -> tuple[str, dict]:
    """Run the README block as a script on a fresh switch with job 7 admitted: its standard
    output, and the job's counters after it."""
    script = tmp_path / "script.py"
    script.write_text(readme_block(first_line))
    state = tmp_path / "controller.json"
    with SwitchProcess(udp_ports(range(1, 5)), tmp_path, binary=EMBEDDED) as switch:
        sa_atp_ctl(capsys, switch, state, "--ports", "1-4", "pipeline")
        sa_atp_ctl(capsys, switch, state, "job", "add", str(SPEC))
        run = subprocess.run(
            [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
             "4", str(script), str(SPEC), str(tmp_path / "udp_ports.json")],
            capture_output=True, text=True, timeout=300, cwd=tmp_path)
        assert run.returncode == 0, run.stderr[-3000:]
        return run.stdout, sa_atp_ctl(capsys, switch, state, "counters", "--job", "7")


def test_readme_ddp_script_trains_through_the_switch(tmp_path, capsys):
    stdout, counters = run_readme_script("# fit.py", tmp_path, capsys)
    fits = {int(m[1]): (ast.literal_eval(m[2]), float(m[3])) for m in FIT.finditer(stdout)}
    assert sorted(fits) == [0, 1, 2, 3], stdout
    # Every rank applied the same sums, so the replicas are equal to the bit ...
    assert len({json.dumps(f) for f in fits.values()}) == 1
    # ... and the regression found the weights the data were made with.
    weights, bias = fits[0]
    np.testing.assert_allclose(weights, np.arange(8.0), atol=1e-4)
    assert abs(bias - 1.0) < 1e-4
    # One bucket of 9 gradients is one chunk per step: each step, every worker sent its DATA
    # (more on retransmission) and the switch multicast the sum to all four.
    assert counters["ingress"]["packets"]["DATA"] >= 4 * STEPS
    assert counters["egress"]["packets"]["RESULT"] >= 4 * STEPS


def test_readme_backend_script_sums_floats_in_the_switch(tmp_path, capsys):
    stdout, counters = run_readme_script("# backend.py", tmp_path, capsys)
    printed = {int(m[1]): (ast.literal_eval(m[2]), int(m[3])) for m in SUMS.finditer(stdout)}
    # 1 + 2 + 3 + 4 in every element (exact: small integers survive quantization), 0+1+2+3
    assert printed == {r: ([10.0], 6) for r in range(4)}, stdout
    chunks = -(-1000 // P.LANES)  # of the float32 call
    assert counters["ingress"]["packets"]["DATA"] >= 4 * chunks
    assert counters["egress"]["packets"]["RESULT"] >= 4 * chunks

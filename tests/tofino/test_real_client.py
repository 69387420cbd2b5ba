"""The controller's whole command line through Intel's own BF Runtime client (open-p4studio's
``bfrt_grpc``, unmodified, from ``$SDE_INSTALL``) against the BF Runtime test server
(bfrt_server.py) on the committed bfrt.json, whose registers and counters are what the
reference model's packets left. Skips where no SDE is installed (docs/tofino.md says how)."""

import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from control_plane import cli
from control_plane.tofino.bfrt import BfrtError
from control_plane.tofino.config import parse_config
from control_plane.tofino.controller import TofinoController
from protocol import constants as P
from tests.p4.packets import Job, job_spec, random_lanes, wrapping_sum
from tests.tofino.bfrt_rules import BfrtDevice
from tests.tofino.bfrt_schema import FIXED_TABLES, Schema
from tests.tofino.bfrt_server import BfrtServer
from tests.tofino.fake_switch import FakeSwitch
from tests.tofino.model.pipeline import TnaModel
from tests.tofino.sde import sde_or_skip

ROOT = Path(__file__).resolve().parents[2]
CONFIG = """
[switch]
cpu_port = 64

[[ports]]
port = 1

[[ports]]
port = 2

[[ports]]
port = 3
speed = "25G"
fec = "fc"

[[ports]]
port = 4
fec = "none"

[[loop_ports]]
port = 68
"""
UPLINK = {"$SPEED": "BF_SPEED_100G", "$FEC": "BF_FEC_TYP_RS", "$PORT_ENABLE": True}


@pytest.fixture
def sde():
    return sde_or_skip()


@pytest.fixture
def server(sde):
    """A 2-pipe switch (a 32-port Tofino 1) on which bf_switchd added an uplink, port 60."""
    device = BfrtDevice(FakeSwitch(pipes=2, boot_ports={60: UPLINK}), Schema.load(sde.fixed_dir))
    server = BfrtServer(device, sde)
    yield server
    server.stop()


@pytest.fixture
def ctl(server, tmp_path, capsys):
    (tmp_path / "switch.toml").write_text(CONFIG)
    base = ["--target", "tofino", "--switch", server.address, "--switch-config",
            str(tmp_path / "switch.toml"), "--state", str(tmp_path / "state.json")]

    def run(*args, code=0):
        capsys.readouterr()
        assert cli.main(base + list(args)) == code, capsys.readouterr().err
        out, err = capsys.readouterr()
        return err if code else (json.loads(out) if out.strip() else None)

    run.base = base
    return run


def test_the_whole_cli_flow_through_intels_client(server, ctl, tmp_path):
    device, fake = server.device, server.device.switch
    counts = ctl("pipeline")
    # four ports; the CPU port and the loop port in their value sets, a loop port for each
    # of the five; the flood group
    assert (counts["ports"], counts["loop_ports"], counts["groups"]) == (4, 7, 1)
    assert fake.value_set("pipe.SaAtpIngressParser.loop_ports").members == [(68, 0x1FF)]
    spec = job_spec(5, 3)
    (tmp_path / "job.toml").write_text(spec.to_toml())
    assert ctl("job", "add", str(tmp_path / "job.toml"))["window"] == [0, 3]
    assert ctl("host", "02:00:00:00:00:99", "4") is None
    assert ctl("drop-sim", "0.5", "--port", "4", "--egress")["egress"]["ports"] == {"4": 0.5}
    assert ctl("job", "membership", "5", "--expected", "0x7")["expected"] == "0x7"

    # Packets through the model, on the state the controller wrote over BF Runtime.
    rows = random_lanes(np.random.default_rng(37), 3)
    job = Job(spec, SimpleNamespace(send=TnaModel(fake).process))
    outs = [job.data(w, 0, rows[w]) for w in range(3)]
    assert [len(o) for o in outs] == [0, 0, 3]
    a, _ = ctl("slot", "5", "0")
    assert (a["state"], a["bitmap"], a["count"], a["chunk"]) == (P.SlotState.COMPLETE, 0b111, 3, 0)
    np.testing.assert_array_equal(a["lanes"], wrapping_sum(rows))
    counts = ctl("counters", "--job", "5")
    assert counts["ingress"]["packets"] == {"DATA": 3}
    assert counts["egress"]["packets"] == {"RESULT": 3}
    assert ctl("job", "list")["5"]["expected"] == 0b111
    assert ctl("status")["pipes"] == {"5": 0}
    assert 'op="DATA"} 3.0' in scrape_metrics(ctl.base)

    # One writer at a time: while another client holds the program, writes are refused in
    # words, and reads go on beside it.
    holder = TofinoController(server.address, parse_config(CONFIG), client_id=7).connect()
    try:
        assert "one writer at a time" in ctl("job", "remove", "5", code=1)
        assert ctl("counters", "--job", "5")["ingress"]["packets"] == {"DATA": 3}
    finally:
        holder.close()
    assert ctl("job", "remove", "5") is None
    assert ctl("job", "list") == {}

    # A restarted switch is restored; a second reconcile writes nothing; no port flapped and
    # bf_switchd's own uplink is still there.
    fake.restart()
    assert ctl("reconcile")["entries"] > 0
    requests = device.requests
    assert ctl("reconcile") == {"ports": 0, "loop_ports": 0, "pipeline": 0, "groups": 0,
                                "entries": 0}
    assert device.requests == requests
    assert device.port_flaps == {}
    assert fake.entries["$PORT"][(("$DEV_PORT", 60),)][1] == UPLINK
    assert fake.entries["$PORT"][(("$DEV_PORT", 3),)][1]["$FEC"] == "BF_FEC_TYP_FC"


def scrape_metrics(base: list[str]) -> str:
    """``sa-atp-ctl metrics`` in its own process: one scrape, then SIGINT."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "control_plane.cli", *base, "metrics",
                             "--listen", "127.0.0.1:0"], stdout=subprocess.PIPE, text=True,
                            env=env, cwd=ROOT)
    try:
        url = proc.stdout.readline().split()[-1]
        with urllib.request.urlopen(url, timeout=60) as page:
            return page.read().decode()
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)


def test_a_second_writer_under_the_same_client_id_is_refused_in_words(server):
    config = parse_config(CONFIG)
    first = TofinoController(server.address, config, client_id=7).connect()
    try:
        with pytest.raises(BfrtError, match="no other client connected under this id"):
            TofinoController(server.address, config, client_id=7).connect()
    finally:
        first.close()


def test_the_fakes_fixed_tables_are_the_sdes(sde):
    """What FIXED_TABLES (the fake's description of the SDE's fixed tables) says of each field
    is what the SDE's own JSON says."""
    real = Schema.load(sde.fixed_dir).tables
    ours = Schema({"tables": []}, [FIXED_TABLES]).tables
    for name, table in ours.items():
        for kind in ("keys", "data"):
            for field, spec in getattr(table, kind).items():
                theirs = getattr(real[name], kind)[field]
                assert (spec.kind, spec.bits, spec.repeated, spec.mandatory, spec.match_type) == (
                    theirs.kind, theirs.bits, theirs.repeated, theirs.mandatory,
                    theirs.match_type), (name, field)
                assert set(spec.choices) <= set(theirs.choices), (name, field)

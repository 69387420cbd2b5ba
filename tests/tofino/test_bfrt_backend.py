"""The BF Runtime backend (control_plane/tofino/) against the fake client: what it writes, in
what order, what it reads back, reconciliation, the ports file, the SDE import, the CLI; and
that one job spec gives the same switch state on both backends."""

import json
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from control_plane import cli
from control_plane.controller import Controller
from control_plane.tofino import bfrt, names
from control_plane.tofino.config import load_config, parse_config
from control_plane.tofino.controller import TofinoController
from control_plane.tofino.ports import port_entries
from protocol import constants as P
from protocol.jobspec import JobSpec, SpecError, WorkerSpec
from tests.p4.packets import SWITCH, Job, assert_result_to_all, job_spec, random_lanes
from tests.targets import EmbeddedTarget
from tests.tofino.fake_bfrt import FakeClient
from tests.tofino.fake_switch import FakeSwitch
from tests.tofino.targets import REQUIRES_V2, ModelTarget, compiled_is_v2, switch_config

PORTS = tuple(range(1, 9))
CONFIG = """
[switch]
cpu_port = 64

[[ports]]
port = 1
speed = "100G"
fec = "rs"

[[ports]]
port = 2
speed = "25G"
fec = "none"
autoneg = "off"

[[ports]]
port = 130

[[loop_ports]]
port = 68

[[loop_ports]]
port = 140
mac_loopback = true
"""


@pytest.fixture
def fake():
    return FakeSwitch()


@pytest.fixture
def tofino(fake):
    ctl = TofinoController("tofino:50052", switch_config(PORTS),
                           client=FakeClient({"tofino:50052": fake})).connect()
    ctl.reconcile()
    return ctl


def every_change(ctl) -> None:
    ctl.admit(job_spec(1, 3, slots=4))
    ctl.admit(job_spec(2, 2, slots=8, inband_fanin=True))
    ctl.add_transit(7)
    ctl.add_host("02:00:00:00:00:99", 8)
    ctl.set_loss(0.25)
    ctl.set_loss(0.5, 3, "egress")
    ctl.set_membership(1, fan_in=2, expected=0b011)


def state(ctl) -> dict:
    """A switch's tables, jobs and groups as the controller reads them back."""
    return {"tables": {t: sorted(map(repr, ctl.read_entries(t)))
                       for t in ctl.plan.tables()},
            "defaults": {t: [repr(e) for e in ctl._read_table(t) if e.is_default]
                         for t in ctl.plan.tables()},
            "jobs": ctl.read_jobs(), "groups": ctl.read_groups()}


@pytest.mark.skipif(not compiled_is_v2(), reason=REQUIRES_V2)
def test_one_job_spec_gives_the_same_switch_state_on_both_backends(tofino):
    target = EmbeddedTarget(PORTS)
    try:
        p4rt = Controller(target.address, PORTS).connect()
        p4rt.reconcile()
        for ctl in (p4rt, tofino):
            every_change(ctl)
        assert state(p4rt) == state(tofino)
        for ctl in (p4rt, tofino):
            ctl.remove(2)
        assert state(p4rt) == state(tofino)
        p4rt.close()
    finally:
        target.close()


def test_the_switch_holds_what_the_plan_says(tofino, fake):
    every_change(tofino)
    plan = tofino.plan
    read = state(tofino)
    for table in plan.tables():
        want = [e for e in plan.desired_entries() if e.table == table]
        assert read["tables"][table] == sorted(repr(e) for e in want if not e.is_default)
        if any(e.is_default for e in want):   # the others keep the program's default
            assert read["defaults"][table] == [repr(e) for e in want if e.is_default]
    assert read["groups"] == {g.group_id: g for g in plan.desired_groups()}
    workers = fake.entries["pipe.SaAtpIngress.admission.workers"]
    assert all(dict(k)["ig_intr_md.ingress_port"] in PORTS for k in workers)


def test_admission_clears_the_jobs_pipe_then_writes_groups_and_the_jobs_entry_last(fake):
    ctl = TofinoController("tofino", switch_config((1, 2, 3, 130, 131)),
                           client=FakeClient({"tofino": fake})).connect()
    ctl.reconcile()
    for spec, pipe in ((job_spec(1, 3, slots=4), 0),
                       (JobSpec(2, 2, tuple(WorkerSpec(i, 130 + i, f"02:00:00:00:02:0{i}",
                                                       f"10.2.0.{i + 1}") for i in range(2))), 1)):
        fake.writes.clear()
        placed = ctl.admit(spec)
        registers = [w for w in fake.writes if ".aggregator." in w[1] or ".lanes." in w[1]]
        assert fake.writes[:len(registers)] == registers, "cleared before anything else"
        assert {w[5] for w in registers} == {pipe}
        cleared = {(w[1], next(iter(w[2].values()))) for w in registers}
        for index in placed.aggregator_range():
            assert ("pipe.SaAtpIngress.aggregator.progress", index) in cleared
            assert ("pipe.SaAtpIngress.lanes.lanes_31", index) in cleared
            for worker in range(P.MAX_WORKERS):
                assert ("pipe.SaAtpIngress.aggregator.member", index * 32 + worker) in cleared
        tables = [w[1] for w in fake.writes]
        assert tables.index("$pre.mgid") > max(i for i, t in enumerate(tables)
                                               if t == "$pre.node")
        assert tables[-1] == "pipe.SaAtpIngress.admission.jobs"
    fake.writes.clear()
    ctl.remove(1)
    assert fake.writes[0][:2] == ("del", "pipe.SaAtpIngress.admission.jobs")


def test_a_job_across_two_pipes_is_refused_before_anything_is_written(fake):
    config = switch_config((1, 2, 130))
    ctl = TofinoController("tofino", config, client=FakeClient({"tofino": fake})).connect()
    ctl.reconcile()
    fake.writes.clear()
    spec = JobSpec(4, 2, (WorkerSpec(0, 1, "02:00:00:00:04:01", "10.4.0.1"),
                          WorkerSpec(1, 130, "02:00:00:00:04:02", "10.4.0.2")))
    with pytest.raises(SpecError, match="pipes \\[0, 1\\]"):
        ctl.admit(spec)
    assert fake.writes == [] and ctl.jobs == {}


def test_jobs_of_two_pipes_sum_in_the_same_slots_of_their_own_registers():
    """Each pipe's registers are its own, so the allocator gives a job of pipe 1 the slots a
    job of pipe 0 holds; their chunks, interleaved on the model, each sum only their own
    contributions (numpy's sum)."""
    target = ModelTarget((1, 2, 130, 131))
    ctl = target.controller()
    ctl.reconcile()
    jobs = [Job(job_spec(1, 2, slots=4), target),
            Job(JobSpec(2, 4, tuple(WorkerSpec(i, 130 + i, f"02:00:00:00:02:0{i + 1}",
                                               f"10.2.0.{i + 1}", P.UDP_PORT + i)
                                    for i in range(2)), switch_mac=SWITCH.mac,
                        switch_ip=SWITCH.ip), target)]
    placed = [ctl.admit(j.spec) for j in jobs]
    assert [ctl.pipe_of(p.spec) for p in placed] == [0, 1]
    assert placed[0].slot_base == placed[1].slot_base == 0
    rng = np.random.default_rng(3)
    rows = [random_lanes(rng, 2) for _ in jobs]
    for chunk in range(3):
        for job, r in zip(jobs, rows, strict=True):
            assert job.data(0, chunk, r[0] + chunk) == []
        for job, r in zip(jobs, rows, strict=True):
            assert_result_to_all(job, job.data(1, chunk, r[1]), chunk, r[0] + chunk + r[1],
                                 0b11, 2)


def test_a_job_borrows_from_the_pool_and_its_removal_frees_the_lanes_it_holds(fake):
    """A borrowing job's entry places its borrowed slots in the pool (docs/protocol.md §4.6);
    removing it clears the pool aggregators its chunks hold, in its pipe, and no others."""
    ctl = TofinoController("tofino", switch_config((1, 2, 130, 131)),
                           client=FakeClient({"tofino": fake})).connect()
    ctl.reconcile()
    ctl.resize_pool(8)
    spec = JobSpec(4, 2, tuple(WorkerSpec(i, 130 + i, f"02:00:00:00:04:0{i}", f"10.4.0.{i + 1}")
                               for i in range(2)), borrow=2)
    placed = ctl.admit(spec)
    [entry] = ctl.read_entries("SaAtpIngress.admission.jobs")
    params = dict(entry.params)
    assert (params["num_slots"], params["own_slots"]) == (4, 2)
    assert (ctl.read_jobs()[4].window, ctl.read_jobs()[4].slots) == (4, 2)
    assert params["pool_base"] == placed.pool_base
    pool = list(ctl.desired.allocator.pool_range())
    holder = "pipe.SaAtpIngress.aggregator.lane_holder"
    mine = 2 * (placed.slot_base + 2) + 1        # chunk 6's aggregator: borrowed slot 2, set 1
    cells = {pool[1]: mine + 1, pool[2]: (mine + 1) | P.POOL_HELD,   # held, released by it
             pool[3]: 0x7FF | P.POOL_HELD}                             # another job's
    for pipe in (0, 1):
        for index, hi in cells.items():
            fake.set_register(holder, pipe, index, {f"{holder[5:]}.lo": (hi & ~P.POOL_HELD) - 1,
                                                    f"{holder[5:]}.hi": hi})
    ctl.remove(4)
    held = {pipe: {i: fake.register(holder, pipe, i)[f"{holder[5:]}.hi"] for i in cells}
            for pipe in (0, 1)}
    assert held[1] == {pool[1]: 0, pool[2]: 0, pool[3]: cells[pool[3]]}
    assert held[0] == cells   # the other pipe's registers are another pool


def test_reconcile_restores_a_restarted_switch_and_then_writes_nothing(tofino, fake):
    every_change(tofino)
    before = state(tofino)
    ports = dict(fake.entries["$PORT"])
    fake.restart()
    counts = tofino.reconcile()
    assert counts["ports"] > 0 and counts["entries"] > 0 and counts["groups"] == 3
    assert state(tofino) == before and fake.entries["$PORT"] == ports
    assert fake.value_set("pipe.SaAtpIngressParser.cpu_port").members == [(P.CPU_PORT, 0x1FF)]
    fake.writes.clear()
    assert tofino.reconcile() == {"ports": 0, "loop_ports": 0, "pipeline": 0, "groups": 0,
                                  "entries": 0}
    assert fake.writes == []


def test_a_changed_group_on_the_switch_is_rewritten(tofino, fake):
    tofino.admit(job_spec(1, 3))
    node = fake.entries["$pre.node"][(("$MULTICAST_NODE_ID", 257 * 64 + 2),)]
    node[1]["$DEV_PORT"] = (7,)
    assert tofino.read_groups()[257].replicas == ((1, 0), (2, 1), (7, 2))
    assert tofino.reconcile()["groups"] == 1
    assert tofino.read_groups()[257].replicas == ((1, 0), (2, 1), (3, 2))


def test_a_slot_reads_back_in_the_protocols_terms(tofino, fake):
    placed = tofino.admit(job_spec(1, 3))
    index = 2 * placed.slot_base + 1
    cells = {"progress": (2 << 16) | 2, "chunk_id": 41, "run_id": 9, "contributors": 0b101,
             "agreed_scale": 0x8004, "max_exp": 0x8006, "helper_id": 2, "valid": 1}
    for name, value in cells.items():
        reg = f"pipe.SaAtpIngress.aggregator.{name}"
        fake.set_register(reg, 0, index, {f"SaAtpIngress.aggregator.{name}.f1": value})
    fake.set_register("pipe.SaAtpIngress.lanes.lanes_03", 0, index,
                      {"SaAtpIngress.lanes.lanes_03.lo": 7,
                       "SaAtpIngress.lanes.lanes_03.hi": 0xFFFF_FFFE})
    _, state1 = tofino.read_slot(1, 0)
    assert (state1.state, state1.count, state1.chunk, state1.run) == (P.SlotState.TAKEN, 2, 41, 9)
    assert (state1.bitmap, state1.scale, state1.exp, state1.helper) == (0b101, 0x8004, 0x8006, 2)
    assert state1.lanes[3] == 7 and state1.lanes[3 + P.LANES // 2] == -2
    assert sum(1 for v in state1.lanes if v) == 2


def test_counters_read_back_by_op_and_reason(tofino, fake):
    placed = tofino.admit(job_spec(1, 2))
    base = placed.job_index * P.STATS_PER_JOB
    for _ in range(3):
        fake.count("pipe.SaAtpIngress.stats.packets", base + P.Op.DATA, 324)
    fake.count("pipe.SaAtpEgress.stats.drops", base + P.DropReason.SIM, 324)
    fake.count("pipe.SaAtpIngress.aggregator.evictions", placed.job_index, 324)
    fake.count("pipe.SaAtpIngress.aggregator.management", P.MGMT_CLEAR_AGGREGATOR, 329)
    assert tofino.counters(1) == {"ingress": {"packets": {"DATA": 3}, "drops": {}},
                                  "egress": {"packets": {}, "drops": {"SIM": 1}},
                                  "evictions": 1}
    assert tofino.counters()["management"] == {"READ_AGGREGATOR": 0, "CLEAR_AGGREGATOR": 1}


def test_the_ports_file():
    config = parse_config(CONFIG)
    assert config.data_ports == (1, 2, 130) and config.loop_port_for(130) == 140
    entries = {dict(e.key)["$DEV_PORT"]: dict(e.data) for e in port_entries(config)}
    assert sorted(entries) == [1, 2, 130, 140]   # 68 is internal: no $PORT entry
    assert entries[2] == {"$SPEED": "BF_SPEED_25G", "$FEC": "BF_FEC_TYP_NONE",
                          "$AUTO_NEGOTIATION": "PM_AN_FORCE_DISABLE", "$PORT_ENABLE": True,
                          "$LOOPBACK_MODE": "BF_LPBK_NONE"}
    assert entries[140]["$LOOPBACK_MODE"] == "BF_LPBK_MAC_NEAR"


@pytest.mark.parametrize("change, message", [
    (('speed = "25G"', 'speed = "30G"'), "speed must be one of"),
    (("port = 140\nmac_loopback = true", "port = 70"), "pipe 1, which has no loop port"),
    (("port = 130", "port = 1"), "configured twice"),
    (("cpu_port = 64", "cpu = 64"), "cpu_port"),
])
def test_a_bad_ports_file_says_what_is_wrong(change, message):
    with pytest.raises(SpecError, match=message):
        parse_config(CONFIG.replace(*change))


@pytest.fixture
def no_client_imported(monkeypatch):
    """No bfrt_grpc imported or importable from sys.path; afterwards, what there was (another
    test's SDE client stays imported)."""
    saved = {k: sys.modules.pop(k) for k in list(sys.modules) if k.split(".")[0] == "bfrt_grpc"}
    where = (("bfrt_grpc",), ("tofino", "bfrt_grpc"), ("client.py",))
    monkeypatch.setattr("sys.path", [p for p in sys.path
                                     if not any(Path(p, *sub).exists() for sub in where)])
    yield
    for name in [k for k in sys.modules if k.split(".")[0] == "bfrt_grpc"]:
        del sys.modules[name]
    sys.modules.update(saved)


def test_the_client_comes_from_the_sde(tmp_path, monkeypatch, no_client_imported):
    monkeypatch.delenv("SDE_INSTALL", raising=False)
    with pytest.raises(bfrt.BfrtUnavailable, match="SDE_INSTALL"):
        bfrt.import_bfrt_grpc()
    package = tmp_path / "lib" / "python3.10" / "site-packages" / "tofino" / "bfrt_grpc"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "client.py").write_text("ClientInterface = 'the SDE client'\n")
    monkeypatch.setenv("SDE_INSTALL", str(tmp_path))
    assert bfrt.import_bfrt_grpc().ClientInterface == "the SDE client"


def test_sa_atp_ctl_against_a_tofino(tmp_path, monkeypatch, capsys, fake):
    monkeypatch.setattr(bfrt, "import_bfrt_grpc", lambda: FakeClient({"10.0.0.1:50052": fake}))
    (tmp_path / "switch.toml").write_text(CONFIG)
    spec = JobSpec(5, 4, (WorkerSpec(0, 1, "02:00:00:00:05:01", "10.5.0.1"),
                          WorkerSpec(1, 2, "02:00:00:00:05:02", "10.5.0.2")))
    (tmp_path / "job.toml").write_text(spec.to_toml())
    base = ["--target", "tofino", "--switch", "10.0.0.1:50052", "--switch-config",
            str(tmp_path / "switch.toml"), "--state", str(tmp_path / "state.json")]

    def run(*args):
        capsys.readouterr()
        assert cli.main(base + list(args)) == 0
        out = capsys.readouterr().out
        return json.loads(out) if out.strip() else None

    assert run("pipeline")["ports"] > 0
    assert run("job", "add", str(tmp_path / "job.toml"))["window"] == [0, 3]
    assert run("job", "list")["5"]["expected"] == 0b11
    assert run("job", "membership", "5", "--fan-in", "1")["fan_in"] == 1
    assert run("counters", "--job", "5")["evictions"] == 0
    assert [s["state"] for s in run("slot", "5", "0")] == [0, 0]
    assert run("drop-sim", "0.5", "--port", "2")["ingress"]["ports"] == {"2": 0.5}
    fake.restart()
    assert run("reconcile")["entries"] > 0
    assert run("status")["pipes"] == {"5": 0}
    assert cli.main(base + ["job", "remove", "5"]) == 0
    assert fake.group(0x100 + 1) == []
    assert cli.main(["--target", "tofino", "job", "list"]) == 2
    bad = textwrap.dedent(CONFIG).replace('fec = "rs"', 'fec = "xx"')
    (tmp_path / "switch.toml").write_text(bad)
    assert cli.main(base + ["status"]) == 1


def test_the_example_ports_file_is_valid():
    config = load_config(Path(__file__).resolve().parents[2] / "examples/tofino/switch.toml")
    assert config.data_ports == (0, 4, 8, 12)
    assert {config.loop_port_for(p) for p in config.data_ports + (config.cpu_port,)} == {68, 196}


def test_the_example_conf_names_the_program_and_its_pipeline():
    """examples/tofino/sa_atp_tna.conf (what p4c-gen-bfrt-conf writes) points bf_switchd at
    the program the controller binds, its one pipeline and the files of share/tofinopd."""
    conf = json.loads((Path(__file__).resolve().parents[2]
                       / "examples/tofino/sa_atp_tna.conf").read_text())
    [program] = conf["p4_devices"][0]["p4_programs"]
    assert program["program-name"] == names.PROGRAM
    assert program["bfrt-config"] == f"share/tofinopd/{names.PROGRAM}/bf-rt.json"
    [pipeline] = program["p4_pipelines"]
    assert pipeline["p4_pipeline_name"] == names.PIPE
    assert pipeline["config"] == f"share/tofinopd/{names.PROGRAM}/{names.PIPE}/tofino.bin"
    assert pipeline["pipe_scope"] == [0, 1, 2, 3]

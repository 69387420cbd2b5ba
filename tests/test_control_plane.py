"""The controller over real gRPC against a switch target: lifecycle, rejection without writes,
reconciliation after a restart, and the CLI; and both backends held to the written contracts
(control_plane/contracts.py)."""

import ast
import inspect
import json
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest

from control_plane import cli, p4runtime_entries
from control_plane.contracts import AggregatorControl, PacketStatsControl, SwitchBackend
from control_plane.controller import Controller
from control_plane.controls.aggregator import Aggregator
from control_plane.switch_controller import SwitchController
from control_plane.tofino.controller import TofinoController
from protocol import constants as P
from protocol.codec import Endpoint, Frame, Header, decode_frame, encode_frame
from protocol.jobspec import JobSpec, SpecError, WorkerSpec
from tests.tofino.targets import switch_config

PORTS = (1, 2, 3, 4)
SWITCH = Endpoint("02:00:00:00:00:fe", "10.0.0.254")


@pytest.fixture
def ports():
    return PORTS


def spec(job_id: int, n: int = 2, slots: int = 4, port_offset: int = 0) -> JobSpec:
    return JobSpec(job_id, slots, tuple(
        WorkerSpec(i, 1 + (i + port_offset) % 4, f"02:00:00:00:{job_id:02x}:{i + 1:02x}",
                   f"10.{job_id}.0.{i + 1}") for i in range(n)),
        switch_mac=SWITCH.mac, switch_ip=SWITCH.ip)


def contribute(target, s: JobSpec, worker: int, chunk: int, value: int):
    w = s.worker(worker)
    frame = encode_frame(Frame(Endpoint(w.mac, w.ip, w.udp_port), SWITCH,
                               Header(op=P.Op.DATA, job=s.id, worker=worker, chunk=chunk,
                                      slot=chunk % s.slots, flags=(chunk // s.slots) % 2,
                                      scale=0x8000),
                               np.full(P.LANES, value, np.int32)))
    return [(port, decode_frame(out)) for port, out in target.send(w.port, frame)]


def switch_contents(controller: Controller) -> dict:
    """Every table (defaults included) and multicast group, as the switch holds them."""
    return {"tables": {t: sorted(map(repr, controller._read_table(t)))
                       for t in controller.plan.tables()},
            "groups": controller.read_groups()}


def test_remove_deletes_entries_clears_aggregators_and_frees_the_range(target, controller):
    a = spec(1, slots=8)
    placed = controller.admit(a)
    contribute(target, a, 0, 3, 5)  # an unfinished aggregation
    controller.remove(1)
    assert controller.read_jobs() == {}
    assert controller.read_entries(controller.plan.admission.workers_table) == []
    assert controller.read_entries(controller.plan.replica_rewrite.table) == []
    assert placed.group not in controller.read_groups()
    states = controller.aggregator.read(controller.conn, placed.aggregator_range())
    assert all(s.state == P.SlotState.EMPTY and not any(s.lanes) for s in states)
    again = controller.admit(spec(2, slots=8))
    assert again.slot_base == placed.slot_base
    assert contribute(target, a, 0, 3, 5) == []  # job 1's packets are now dropped
    assert controller.counters()["ingress"]["drops"]["UNKNOWN_JOB"] == 1


@pytest.mark.parametrize("make_bad, message", [
    (lambda: JobSpec(9, 4, (WorkerSpec(0, 7, "02:00:00:00:09:01", "10.9.0.1"),)),
     "port 7 is not a port of the switch"),
    (lambda: spec(1), "job 1 is already admitted"),
    (lambda: spec(8, slots=P.NUM_SLOTS), "no free range"),
    (lambda: JobSpec(8, 4, (WorkerSpec(0, 2, "02:00:00:00:01:01", "10.8.0.1"),)),
     "MAC 02:00:00:00:01:01 is already on port 1"),
])
def test_bad_requests_are_rejected_before_anything_is_written(target, controller, make_bad,
                                                              message):
    controller.admit(spec(1))
    before = switch_contents(controller)
    with pytest.raises(SpecError, match=message):
        controller.admit(make_bad())
    assert switch_contents(controller) == before
    assert set(controller.jobs) == {1}


def test_reconcile_is_idempotent(target, controller):
    controller.admit(spec(1))
    controller.admit(spec(2, port_offset=2))
    controller.set_loss(0.01, port=2)
    assert controller.reconcile() == {"pipeline": 0, "groups": 0, "entries": 0}


def test_restart_then_reconcile_restores_every_job(target, controller):
    a, b = spec(1), spec(2, n=3, port_offset=1)
    controller.admit(a)
    controller.admit(b)
    controller.set_loss(0.5, port=3, direction="egress")
    wanted = switch_contents(controller)
    target.restart()
    controller.connect()  # the old stream died with the switch
    assert controller.conn.pipeline_cookie() is None
    counts = controller.reconcile()
    assert counts["pipeline"] == 1 and counts["entries"] > 0
    assert switch_contents(controller) == wanted
    controller.set_loss(0.0, port=3, direction="egress")
    contribute(target, a, 0, 0, 2)
    outs = contribute(target, a, 1, 0, 3)
    assert sorted(p for p, _ in outs) == [1, 2]
    assert all(f.header.op == P.Op.RESULT and f.lanes[0] == 5 for _, f in outs)


def test_a_forced_pipeline_push_then_reconcile_delivers_every_copy_once(target, controller):
    """bmv2 keeps its replication state across a pipeline push that PI forgets: without deleting
    the groups first, the re-created groups add their copies to the old ones."""
    a = spec(1, n=3)
    controller.admit(a)
    assert controller.load_pipeline(force=True)
    controller.reconcile()
    contribute(target, a, 0, 0, 2)
    contribute(target, a, 1, 0, 3)
    outs = contribute(target, a, 2, 0, 4)
    assert sorted(p for p, _ in outs) == [1, 2, 3]
    assert all(f.header.op == P.Op.RESULT and f.lanes[0] == 9 for _, f in outs)
    arp = b"\xff" * 6 + bytes.fromhex("020000009901") + b"\x08\x06" + bytes(46)
    assert sorted(p for p, _ in target.send(1, arp)) == [2, 3, 4]  # flooded, once per port


def test_reconcile_removes_what_is_not_desired(target, controller):
    controller.admit(spec(1))
    other = Controller(target.address, PORTS, election_id=2).connect()  # takes over as primary
    other.desired = controller.desired
    del other.desired.allocator.jobs[1]
    other.reconcile()
    assert other.read_jobs() == {} and other.read_entries(other.plan.l2.table) == []
    other.close()


def test_cli_walkthrough(target, tmp_path, capsys):
    state = tmp_path / "state.json"
    spec_file = tmp_path / "job.toml"
    spec_file.write_text(
        '[job]\nid = 7\nslots = 4\nswitch_mac = "02:00:00:00:00:fe"\nswitch_ip = "10.0.0.254"\n'
        + "".join(f'[[workers]]\nid = {i}\nport = {i + 1}\nmac = "02:00:00:00:07:{i + 1:02x}"\n'
                  f'ip = "10.7.0.{i + 1}"\n' for i in range(2)))
    base = ["--switch", target.address, "--state", str(state)]

    def run(*args) -> object:
        assert cli.main([*base, *args]) == 0
        out = capsys.readouterr().out
        return json.loads(out) if out.strip() else None

    run("--ports", "1-4", "pipeline")
    assert run("job", "add", str(spec_file))["job"] == 7
    assert list(run("job", "list")) == ["7"]
    s = spec(7)
    contribute(target, s, 0, 0, 1)
    contribute(target, s, 1, 0, 1)
    counters = run("counters", "--job", "7")
    assert counters["ingress"]["packets"] == {"DATA": 2}
    assert counters["egress"]["packets"] == {"RESULT": 2}
    slot = run("slot", "7", "0")
    assert slot[0]["state"] == P.SlotState.COMPLETE and slot[0]["lanes"][0] == 2
    assert run("drop-sim", "0.25", "--egress")["egress"]["default"] == 0.25
    assert run("job", "membership", "7", "--fan-in", "1")["fan_in"] == 1
    target.restart()
    assert run("reconcile")["pipeline"] == 1
    assert run("status")["jobs"]["7"]["fan_in"] == 1
    assert cli.main([*base, "job", "add", str(tmp_path / "missing.toml")]) == 1
    assert "cannot read job spec" in capsys.readouterr().err


def test_a_controller_with_a_lower_election_id_cannot_change_the_switch(target, controller):
    import grpc
    from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

    from control_plane.connection import SwitchError

    primary = Controller(target.address, PORTS, election_id=10).connect()
    primary.admit(spec(1))
    before = switch_contents(primary)
    with pytest.raises(SwitchError, match="not primary"):
        Controller(target.address, PORTS, election_id=5).connect()
    # Nor can it write without arbitrating: the switch itself refuses the lower election id.
    entry = primary.plan.admission.job_entry(primary.jobs[1])
    request = p4runtime_pb2.WriteRequest(device_id=0)
    request.election_id.low = 5
    update = request.updates.add(type=p4runtime_pb2.Update.DELETE)
    update.entity.table_entry.CopyFrom(p4runtime_entries.table_entry(entry, primary.conn.p4info))
    with grpc.insecure_channel(target.address) as channel:
        with pytest.raises(grpc.RpcError) as refused:
            p4runtime_pb2_grpc.P4RuntimeStub(channel).Write(request, timeout=10)
    assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert switch_contents(primary) == before
    primary.close()


def test_counters_say_what_happened_on_the_wire(target, controller):
    """Management requests have their own counter and are not traffic of no job; egress counts
    the copies that left, not the flood copy pruned at the ingress port; ops no host may send are
    counted too; the job's packet counters equal the frames seen on the ports."""
    a = spec(1, n=3, slots=8)
    controller.admit(a)
    counts = controller.counters()
    assert counts["management"]["CLEAR_AGGREGATOR"] == 2 * a.slots
    assert "OTHER" not in counts["ingress"]["packets"]

    arp = b"\xff" * 6 + bytes.fromhex("020000009901") + b"\x08\x06" + bytes(46)
    copies = target.send(1, arp)
    counts = controller.counters()
    assert len(copies) == 3
    assert counts["ingress"]["packets"]["OTHER"] == 1
    assert counts["egress"]["packets"]["OTHER"] == len(copies)

    seen = Counter()
    for chunk in range(4):
        for w in range(3):
            for _, f in contribute(target, a, w, chunk, 1):
                seen[f.header.op.name] += 1
    w = a.worker(0)
    bad = bytearray(encode_frame(Frame(Endpoint(w.mac, w.ip, w.udp_port), SWITCH,
                                       Header(op=P.Op.DATA, job=1, worker=0))))
    bad[42] = (P.VERSION << 4) | 9  # an op no host may send
    assert target.send(w.port, bytes(bad)) == []
    counts = controller.counters(1)
    assert counts["egress"]["packets"] == dict(seen) == {"RESULT": 12}
    assert counts["ingress"]["packets"] == {"DATA": 12, "OP_9": 1}
    assert counts["ingress"]["drops"] == {"BAD_OP": 1}


# -- the contracts ------------------------------------------------------------------------------

BACKENDS = {"p4runtime": lambda: Controller("offline", PORTS),
            "bfrt": lambda: TofinoController("offline", switch_config(PORTS))}
CONTROLS = {"aggregator": AggregatorControl, "ingress_stats": PacketStatsControl,
            "egress_stats": PacketStatsControl}


def methods(protocol) -> dict:
    found = {n: f for n, f in vars(protocol).items()
             if inspect.isfunction(f) and not n.startswith("__")}
    assert found, protocol
    return found


def shape(function) -> list[tuple]:
    """What a caller relies on: each parameter's name, kind and default (``self`` aside)."""
    params = list(inspect.signature(function).parameters.values())[1:]
    return [(p.name, p.kind, p.default) for p in params]


@pytest.mark.parametrize("backend", BACKENDS)
def test_each_backend_and_its_controls_have_the_signatures_of_the_contracts(backend):
    ctl = BACKENDS[backend]()
    assert isinstance(ctl, SwitchController)
    for name in SwitchBackend.__annotations__:
        assert hasattr(ctl, name), name
    for name, method in methods(SwitchBackend).items():
        assert shape(getattr(type(ctl), name)) == shape(method), name
    for attr, protocol in CONTROLS.items():
        control = getattr(ctl, attr)
        assert isinstance(control, protocol), attr
        for name, method in methods(protocol).items():
            assert shape(getattr(type(control), name)) == shape(method), f"{attr}.{name}"


def modules_loaded_with(module: str, prefixes: tuple[str, ...]) -> list[str]:
    """The modules named ``prefixes...`` that importing ``module`` loads, in a fresh Python."""
    code = (f"import sys, {module}; "
            f"print(sorted(m for m in sys.modules if m.startswith({prefixes!r})))")
    return ast.literal_eval(subprocess.run([sys.executable, "-c", code], capture_output=True,
                                           text=True, check=True).stdout)


def test_the_contracts_load_neither_backends_libraries():
    assert modules_loaded_with("control_plane.contracts", (
        "p4.", "grpc", "bfrt_grpc", "control_plane.controls", "control_plane.tofino",
        "control_plane.connection")) == []


def test_the_tofino_backend_loads_no_p4runtime_code():
    """The BF Runtime backend shares the plan and the entries, not their P4Runtime form."""
    assert modules_loaded_with("control_plane.tofino.controller", (
        "p4.", "google.rpc", "control_plane.p4runtime_entries",
        "control_plane.connection")) == []


def test_a_v1model_switch_has_one_pipe():
    with pytest.raises(ValueError, match="one pipe, 0, not 1"):
        Aggregator().read(None, [0], pipe=1)

"""What the BF Runtime stack refuses or answers differently from a naive fake, one test per rule,
each run through the fake client (everywhere) and through Intel's client against the test
server (where an SDE is installed): the fake refuses what the real stack refuses, in the same
way (the same exception class, the same gRPC code)."""

from types import SimpleNamespace

import grpc
import pytest

from control_plane.tofino.controller import TofinoController
from control_plane.tofino.controls.aggregator import LANE_REGISTERS, STATE_REGISTERS
from tests.p4.packets import job_spec
from tests.tofino.bfrt_rules import BfrtDevice
from tests.tofino.bfrt_schema import Schema
from tests.tofino.fake_bfrt import FakeClient
from tests.tofino.fake_switch import FakeSwitch
from tests.tofino.sde import sde_or_skip
from tests.tofino.targets import switch_config

PROGRAM = "sa_atp_tna"
JOBS = "pipe.SaAtpIngress.admission.jobs"
LOOP_SET = "pipe.SaAtpIngressParser.loop_ports"
PROGRESS = "pipe.SaAtpIngress.aggregator.progress"
BOOT = {"$SPEED": "BF_SPEED_100G", "$FEC": "BF_FEC_TYP_RS", "$PORT_ENABLE": True}


@pytest.fixture(params=["fake", "intel"])
def stack(request):
    """The device (the server's state), the client module, and the server's address: a
    2-pipe switch on which bf_switchd added port 60."""
    fake = FakeSwitch(pipes=2, boot_ports={60: BOOT})
    if request.param == "fake":
        device = BfrtDevice(fake)
        yield SimpleNamespace(device=device, gc=FakeClient({"switch": device}), address="switch")
        return
    from tests.tofino.bfrt_server import BfrtServer

    sde = sde_or_skip()
    device = BfrtDevice(fake, Schema.load(sde.fixed_dir))
    server = BfrtServer(device, sde)
    yield SimpleNamespace(device=device, gc=sde.client, address=server.address)
    server.stop()


def session(stack, client_id=1, bind=True):
    interface = stack.gc.ClientInterface(grpc_addr=stack.address, client_id=client_id,
                                         device_id=0, num_tries=1, perform_subscribe=bind)
    if bind:
        interface.bind_pipeline_config(PROGRAM)
    return interface, interface.bfrt_info_get(PROGRAM)


def codes(exc) -> list[str]:
    """The gRPC codes of a refused request's entries."""
    names = {c.value[0]: c.name for c in grpc.StatusCode}
    return [names[e.canonical_code] for _, e in exc.sub_errors_get()]


def close(interface) -> None:
    if interface.is_independent:
        interface.channel.close()
    else:
        interface.tear_down_stream()


def test_a_value_set_key_is_ternary(stack):
    interface, info = session(stack)
    table = info.table_get(LOOP_SET)
    with pytest.raises(ValueError, match="Passed in type:Exact is not equal to type of "
                                         "keyfield:Ternary"):
        table.make_key([stack.gc.KeyTuple("f1", 68)])
    table.entry_add(stack.gc.Target(), [table.make_key([stack.gc.KeyTuple("f1", 68, 0x1FF)])],
                    [table.make_data([])])
    assert stack.device.switch.value_set(LOOP_SET).members == [(68, 0x1FF)]
    close(interface)


def test_a_key_wider_than_its_field_is_refused_by_the_server(stack):
    interface, info = session(stack)
    table = info.table_get(LOOP_SET)
    key = table.make_key([stack.gc.KeyTuple("f1", 0x200, 0x1FF)])   # a port is 9 bits
    with pytest.raises(stack.gc.BfruntimeReadWriteRpcException) as refused:
        table.entry_add(stack.gc.Target(), [key], [table.make_data([])])
    assert codes(refused.value) == ["INVALID_ARGUMENT"]
    close(interface)


def test_a_data_field_wider_than_its_bytes_is_refused_by_the_client(stack):
    interface, info = session(stack)
    table = info.table_get(JOBS)
    with pytest.raises(ValueError, match="expected 1 len received 2 len"):
        table.make_data([stack.gc.DataTuple("job_index", 0x100)],
                        "SaAtpIngress.admission.set_job")
    close(interface)


def test_only_mandatory_key_fields_are_required(stack):
    interface, info = session(stack)
    info.table_get(JOBS).make_key([])            # hdr.sa.job is not mandatory
    with pytest.raises(AssertionError, match="mandatory"):
        info.table_get("$pre.node").make_key([])
    with pytest.raises(KeyError):
        info.table_get(JOBS).make_key([stack.gc.KeyTuple("job", 1)])
    close(interface)


def test_a_register_read_has_a_value_per_active_pipe(stack):
    interface, info = session(stack)
    table, gc = info.table_get(PROGRESS), stack.gc
    key = table.make_key([gc.KeyTuple("$REGISTER_INDEX", 5)])
    table.entry_mod(gc.Target(pipe_id=1), [key],
                    [table.make_data([gc.DataTuple("SaAtpIngress.aggregator.progress.f1", 9)])])
    [(data, _)] = table.entry_get(gc.Target(), [key], {"from_hw": True}, p4_name=PROGRAM)
    assert data.to_dict()["SaAtpIngress.aggregator.progress.f1"] == [0, 9]
    [(data, _)] = table.entry_get(gc.Target(pipe_id=1), [key], {"from_hw": True},
                                  p4_name=PROGRAM)
    assert data.to_dict()["SaAtpIngress.aggregator.progress.f1"] == [9]
    close(interface)


def test_a_missing_key_is_not_found_and_an_added_one_exists(stack):
    interface, info = session(stack)
    table, gc = info.table_get(JOBS), stack.gc
    key = table.make_key([gc.KeyTuple("hdr.sa.job", 7)])
    with pytest.raises(gc.BfruntimeReadWriteRpcException) as refused:
        list(table.entry_get(gc.Target(), [key], p4_name=PROGRAM))
    assert codes(refused.value) == ["NOT_FOUND"]
    with pytest.raises(gc.BfruntimeReadWriteRpcException) as refused:
        table.entry_del(gc.Target(), [key])
    assert codes(refused.value) == ["NOT_FOUND"]
    data = table.make_data([], "SaAtpIngress.admission.transit")
    table.entry_add(gc.Target(), [key], [data])
    with pytest.raises(gc.BfruntimeReadWriteRpcException) as refused:
        table.entry_add(gc.Target(), [key], [data])
    assert codes(refused.value) == ["ALREADY_EXISTS"]
    close(interface)


def test_a_const_table_takes_no_entries(stack):
    interface, info = session(stack)
    table, gc = info.table_get("pipe.SaAtpIngress.decide.decide"), stack.gc
    with pytest.raises(gc.BfruntimeReadWriteRpcException) as refused:
        table.entry_add(gc.Target(), [table.make_key([])], [table.make_data([], "NoAction")])
    assert codes(refused.value) == ["INVALID_ARGUMENT"]
    close(interface)


def test_a_client_that_has_not_bound_the_program_must_name_it(stack):
    interface, info = session(stack, bind=False)
    table = info.table_get(JOBS)
    with pytest.raises(RuntimeError, match="No binary details field"):   # UNKNOWN, no entry
        list(table.entry_get(stack.gc.Target()))
    assert list(table.entry_get(stack.gc.Target(), p4_name=PROGRAM)) == []
    close(interface)


def test_one_client_per_id_and_one_writer_per_program(stack):
    first, _ = session(stack, client_id=3)
    with pytest.raises(RuntimeError, match="Failed to subscribe"):
        session(stack, client_id=3)
    with pytest.raises(stack.gc.BfruntimeForwardingRpcException) as refused:
        session(stack, client_id=4)
    assert refused.value.grpc_error_get().code() == grpc.StatusCode.ALREADY_EXISTS
    close(first)
    again, _ = session(stack, client_id=5)   # the first left: its binding went with it
    close(again)


def test_ports_need_speed_and_fec_and_read_back_as_the_port_manager_names_them(stack):
    interface, info = session(stack)
    table, gc = info.table_get("$PORT"), stack.gc
    key = table.make_key([gc.KeyTuple("$DEV_PORT", 1)])
    with pytest.raises(gc.BfruntimeReadWriteRpcException) as refused:
        table.entry_add(gc.Target(), [key], [table.make_data([gc.DataTuple(
            "$SPEED", str_val="BF_SPEED_25G")])])
    assert codes(refused.value) == ["INVALID_ARGUMENT"]
    table.entry_add(gc.Target(), [key], [table.make_data([
        gc.DataTuple("$SPEED", str_val="BF_SPEED_25G"),
        gc.DataTuple("$FEC", str_val="BF_FEC_TYP_FIRECODE")])])
    ports = {k.to_dict()["$DEV_PORT"]["value"]: d.to_dict()
             for d, k in table.entry_get(gc.Target(), None, p4_name=PROGRAM)}
    assert sorted(ports) == [1, 60]              # bf_switchd's own port is there too
    assert ports[1]["$FEC"] == "BF_FEC_TYP_FC"
    table.entry_mod(gc.Target(), [key], [table.make_data([
        gc.DataTuple("$FEC", str_val="BF_FEC_TYP_NONE")])])
    assert stack.device.port_flaps == {}
    table.entry_mod(gc.Target(), [key], [table.make_data([
        gc.DataTuple("$SPEED", str_val="BF_SPEED_25G")])])
    assert stack.device.port_flaps == {1: 1}     # a change naming $SPEED re-adds the port
    close(interface)


def test_the_controller_clears_a_job_in_one_request_per_register(stack):
    ctl = TofinoController(stack.address, switch_config((1, 2, 3)), client=stack.gc)
    with ctl:
        ctl.reconcile()
        job, _ = ctl._admission_writes(job_spec(1, 3, slots=64))
        before = stack.device.requests
        ctl._clear_aggregators(job)
        # the state registers, member, the 32 lane pairs, the lanes' gate and the lane holders
        assert stack.device.requests - before == len(STATE_REGISTERS) + len(LANE_REGISTERS) + 3

"""Packet-level tests of the P4 program (p4src/), runnable against any target that serves
P4Runtime: the switch is programmed only through the controller, packets go in on ports, and the
tests check what comes out, the counters, and the aggregators' state. Expected sums come from
numpy, never from the switch.

Targets: ``embedded`` (the software switch, in this process, behind a real gRPC P4Runtime
server) and ``bmv2`` (simple_switch_grpc on veth pairs in a network namespace the test creates;
skipped where bmv2 or root is absent); and for the TNA program (tests/tofino/targets.py)
``tna-model`` (its reference model, programmed over BF Runtime) and ``tna-twin`` (the embedded
target and the model in lockstep, compared packet by packet).
"""

from __future__ import annotations

import pytest

from control_plane.controller import Controller
from tests.p4.packets import PORTS
from tests.targets import TARGETS, make_target
from tests.tofino.targets import TNA_TARGETS, make_tna_controller, make_tna_target


@pytest.fixture
def ports():
    return PORTS


@pytest.fixture(params=TARGETS + TNA_TARGETS)
def target(request, ports):
    if request.param in TNA_TARGETS:
        if request.param == "tna-model" and request.node.get_closest_marker("p4runtime"):
            pytest.skip("reads the switch over P4Runtime")
        t = make_tna_target(request.param, ports)
    else:
        t = make_target(request.param, ports)
    yield t
    if request.param == "tna-twin":
        t.check_everything()
    t.close()


@pytest.fixture
def controller(target, ports):
    if target.name in TNA_TARGETS:
        ctl = make_tna_controller(target, ports)
    else:
        ctl = Controller(target.address, ports).connect()
        ctl.reconcile()
    yield ctl
    ctl.close()

"""Packet-level tests of the P4 program (p4src/), runnable against any target that serves
P4Runtime: the switch is programmed only through the controller, packets go in on ports, and the
tests check what comes out, the counters, and the aggregators' state. Expected sums come from
numpy, never from the switch.

Targets: ``embedded`` (the software switch, in this process, behind a real gRPC P4Runtime
server) and ``bmv2`` (simple_switch_grpc on veth pairs in a network namespace the test creates;
skipped where bmv2 or root is absent).
"""

from __future__ import annotations

import pytest

from tests.p4.packets import PORTS


@pytest.fixture
def ports():
    return PORTS

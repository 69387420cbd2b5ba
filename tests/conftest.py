"""Fixtures shared by the tests that drive a switch target over P4Runtime (tests/p4/ and the
controller tests). Each of those modules says which ports its switch has with a ``ports``
fixture."""

from __future__ import annotations

import pytest

from control_plane.controller import Controller
from tests.targets import TARGETS, make_target


@pytest.fixture(params=TARGETS)
def target(request, ports):
    t = make_target(request.param, ports)
    yield t
    t.close()


@pytest.fixture
def controller(target, ports):
    ctl = Controller(target.address, ports).connect()
    ctl.reconcile()
    yield ctl
    ctl.close()


@pytest.fixture(scope="session", autouse=True)
def compiled_kernels():
    """The host library's kernels compiled once, here, before tests start worker processes
    that load them together (host_lib.communicator.compile_kernels)."""
    from host_lib.communicator import compile_kernels

    compile_kernels()

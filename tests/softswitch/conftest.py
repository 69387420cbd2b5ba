"""Fixtures of the P4Runtime server tests: a server on a fresh dataplane (CPU port 64; what leaves
on data ports is kept in ``server.sent``) and a client of it."""

from __future__ import annotations

import pytest

from softswitch.dataplane import Dataplane
from softswitch.p4runtime_server import P4RuntimeServer
from tests.softswitch.p4runtime_client import Client


@pytest.fixture
def server():
    dataplane = Dataplane(device_id=0, cpu_port=64)
    sent: list[tuple[int, bytes]] = []
    dataplane.set_transmit(lambda port, frame: sent.append((port, frame)))
    srv = P4RuntimeServer(dataplane, "127.0.0.1:0")
    srv.start()
    srv.sent = sent
    yield srv
    srv.stop(grace=None)


@pytest.fixture
def client(server):
    c = Client(server.port)
    yield c
    c.close()


"""Compatibility check: p4runtime-shell (a third-party P4Runtime client) drives the server."""

from __future__ import annotations

import p4runtime_sh.shell as sh
import pytest

from softswitch.dataplane import Dataplane
from softswitch.p4runtime_server import P4RuntimeServer
from tests.softswitch.programs import COMPILED


@pytest.fixture
def shell():
    dataplane = Dataplane()
    sent = []
    dataplane.set_transmit(lambda port, frame: sent.append((port, frame)))
    server = P4RuntimeServer(dataplane, "127.0.0.1:0")
    server.start()
    sh.setup(device_id=0, grpc_addr=f"127.0.0.1:{server.port}", election_id=(0, 1),
             config=sh.FwdPipeConfig(str(COMPILED / "tables.p4info.txtpb"),
                                     str(COMPILED / "tables.json")))
    yield dataplane, sent
    sh.teardown()
    server.stop(grace=None)


def test_table_entries_and_counters_through_p4runtime_shell(shell):
    dataplane, sent = shell
    te = sh.TableEntry("IngressImpl.t_exact")(action="IngressImpl.set_exact")
    te.match["hdr.key.addr"] = "10.0.0.1"
    te.match["hdr.key.port"] = "80"
    te.action["v"] = "7"
    te.action["port"] = "3"
    te.insert()
    frame = bytes.fromhex("02000000000202000000000188b6") + bytes.fromhex("0a0000010050") + \
        bytes(16)
    dataplane.receive(1, frame)
    assert sent[-1][0] == 3
    entries = list(sh.TableEntry("IngressImpl.t_exact").read())
    assert len(entries) == 1 and entries[0].action["v"].value == b"\x07"
    counters = list(sh.DirectCounterEntry("IngressImpl.exact_counter").read())
    assert counters[0].packet_count == 1
    te.delete()
    assert list(sh.TableEntry("IngressImpl.t_exact").read()) == []

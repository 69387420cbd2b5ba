"""The Wireshark dissector (tools/wireshark/sa_atp.lua): the committed file is the generator's
output, and Debian's tshark, loading it, decodes every field of every packet type in a capture
the embedded switch wrote with the values the codec reads from the same bytes."""

from __future__ import annotations

import select
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from control_plane.controller import Controller
from host_lib.engine.links import UdpTunnelLink
from protocol import constants as P
from protocol.codec import decode_frame
from softswitch.pcap import read_pcap
from tests.p4.packets import Job, job_spec
from tools import wireshark
from topologies.switch_process import EMBEDDED, SwitchProcess, udp_ports

TSHARK = shutil.which("tshark")


def test_committed_dissector_is_the_generators_output():
    assert wireshark.OUT.read_text() == wireshark.render(), \
        "run python tools/wireshark.py and commit tools/wireshark/sa_atp.lua"


def test_dissector_fields_cover_the_codecs_header_and_lanes():
    names = [f.name for f in wireshark.fields()]
    assert names[:2] == ["version", "op"] and names[-1] == "lane"
    # one byte, 2 nibbles
    span = sum(f.size * f.count for f in wireshark.fields() if f.mask != 0xF0)
    assert span == P.HEADER_LEN + P.PAYLOAD_LEN


def expect(link: UdpTunnelLink, op: P.Op, timeout: float = 10.0) -> bytes:
    """The next frame on ``link``, which must be an ``op``."""
    buf = bytearray(2048)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        select.select([link], [], [], 0.1)
        n = link.recv_into(buf)
        if n:
            frame = bytes(buf[:n])
            assert decode_frame(frame).header.op == op
            return frame
    raise AssertionError(f"no {op.name} arrived")


def capture(pcap_dir: Path, run_dir: Path) -> list[bytes]:
    """Drive every packet type through the embedded switch with --pcap; the frames it sent."""
    job = Job(job_spec(3, 2, slots=4), target=None)
    rng = np.random.default_rng(0)
    a, b = (rng.integers(-2**28, 2**28, P.LANES, dtype=np.int32) for _ in range(2))
    data = {"scale": 0x8003, "exp": 0x8002}
    with SwitchProcess(udp_ports([1, 2]), run_dir, binary=EMBEDDED, pcap_dir=pcap_dir) as switch, \
            Controller(switch.grpc_address, [1, 2]).connect() as controller:
        controller.reconcile()
        controller.admit(job.spec)
        w0, w1 = (UdpTunnelLink(switch.udp_ports[p]) for p in (1, 2))
        # a probe of a chunk nobody holds is bounced to its sender alone: once each link has
        # its bounce, the switch knows where both are, and multicasts reach them
        probes = [job.frame(w, P.Op.DATA, 2, flags=P.Flag.PROBE, **data) for w in (0, 1)]
        for link, probe in zip((w0, w1), probes, strict=True):
            link.send(probe)
            expect(link, P.Op.BOUNCE)
        first = [job.frame(0, P.Op.DATA, 0, a, **data),
                 job.frame(0, P.Op.DATA, 0, a, flags=P.Flag.RETX, **data)]
        for f in first:
            w0.send(f)
        sent = probes + first
        expect(w0, P.Op.BOUNCE), expect(w1, P.Op.BOUNCE)  # PENDING: chunk 0 waits for worker 1
        sent.append(job.frame(1, P.Op.DATA, 0, b, **data))
        w1.send(sent[-1])
        expect(w0, P.Op.RESULT), expect(w1, P.Op.RESULT)
        sent += [job.frame(0, P.Op.DATA, 5, a, **data),
                 job.frame(0, P.Op.DATA, 5, a, flags=P.Flag.RETX, **data)]
        w0.send(sent[-2]), w0.send(sent[-1])
        expect(w0, P.Op.BOUNCE), expect(w1, P.Op.BOUNCE)  # PENDING goes to every worker
        sent.append(job.frame(1, P.Op.TAKEOVER, 5))
        w1.send(sent[-1])
        expect(w0, P.Op.PARTIAL), expect(w1, P.Op.PARTIAL)
        sent.append(job.frame(0, P.Op.HELPER_DATA, 5, a, reason=1, flags=P.Flag.COPY, **data))
        w0.send(sent[-1])
        expect(w1, P.Op.HELPER_DATA)
        sent.append(job.frame(1, P.Op.HELPER_RESULT, 5, a + b, bitmap=0b11, count=2, **data))
        w1.send(sent[-1])
        expect(w0, P.Op.RESULT), expect(w1, P.Op.RESULT)
        w0.close(), w1.close()
    return sent


def tshark_rows(pcap: Path, columns: list[str]) -> list[dict[str, str]]:
    cmd = [TSHARK, "-X", f"lua_script:{wireshark.OUT}", "-r", str(pcap), "-T", "fields",
           "-E", "separator=/t", "-E", "occurrence=a", "-E", "aggregator=,"]
    for c in columns:
        cmd += ["-e", c]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=120).stdout
    return [dict(zip(columns, line.split("\t"), strict=True)) for line in out.splitlines()]


@pytest.mark.skipif(TSHARK is None, reason="tshark is not installed (apt-get install tshark)")
def test_tshark_decodes_every_field_of_every_packet_type(tmp_path):
    pcap_dir = tmp_path / "pcap"
    sent = capture(pcap_dir, tmp_path)
    fields = wireshark.fields()
    flags = wireshark.flag_fields()
    columns = ([f.abbrev for f in fields] + [abbrev for abbrev, _ in flags]
               + ["sa_atp.bounce", "_ws.col.Info"])
    frames, rows = [], []
    for pcap in sorted(pcap_dir.glob("*.pcap")):
        frames += read_pcap(pcap)
        rows += tshark_rows(pcap, columns)
    assert len(rows) == len(frames)
    assert set(sent) <= set(frames), "the switch captured every frame the hosts sent"
    ops = set()
    for raw, row in zip(frames, rows, strict=True):
        decoded = decode_frame(raw)
        header = decoded.header
        ops.add(header.op)
        for f in fields:
            if f.name == "lane":
                got = [int(v) for v in row[f.abbrev].split(",")]
                assert got == decoded.lanes.tolist()
            else:
                assert int(row[f.abbrev], 0) == getattr(header, f.name), (f.name, row)
        for abbrev, bit in flags:
            assert row[abbrev] in ("1", "True") if header.flags & bit \
                else row[abbrev] in ("0", "False"), (abbrev, row)
        assert row["_ws.col.Info"].startswith(P.Op(header.op).name + " ")
        if header.op == P.Op.BOUNCE:
            assert int(row["sa_atp.bounce"]) == header.reason
            assert row["_ws.col.Info"].endswith(P.Bounce(header.reason).name)
        else:
            assert row["sa_atp.bounce"] == ""
    assert ops == set(P.Op)

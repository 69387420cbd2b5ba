"""AF_XDP (pktio/xdp.py, XdpLink) on a veth pair between two network namespaces that the test
creates and removes: the frames of the SA-ATP port reach the link, byte for byte, and nothing
else does (another UDP port, TCP and ARP reach the kernel as before); what the link sends
arrives whole; zero-copy mode, which veth has not, is refused and leaves the interface clean.
Needs root, iproute2 and a kernel with AF_XDP; skipped elsewhere. (Whole allreduces on AF_XDP
links through the embedded switch: tests/test_host_links.py.)"""

from __future__ import annotations

import select
import shutil
import socket
import subprocess
import uuid

import numpy as np
import pytest

from host_lib.engine.links import XdpLink
from pktio.xdp import available
from protocol import constants as P
from protocol.codec import Endpoint, FrameBatch
from tests.targets import _InNamespace, _ip

pytestmark = pytest.mark.skipif(not available() or shutil.which("ip") is None,
                                reason="needs root, iproute2 and AF_XDP")
A_IP, B_IP = "10.77.0.1", "10.77.0.2"


@pytest.fixture
def pair():
    """Namespaces a and b joined by veth va - vb; their names and MAC addresses."""
    tag = uuid.uuid4().hex[:6]
    a, b = f"xa-{tag}", f"xb-{tag}"
    made = []
    try:
        for ns in (a, b):
            _ip("netns", "add", ns)
            made.append(ns)
        _ip("-n", a, "link", "add", "va", "type", "veth", "peer", "name", "vb", "netns", b)
        macs = {"va": "02:00:00:77:00:01", "vb": "02:00:00:77:00:02"}
        for ns, dev, ip in ((a, "va", A_IP), (b, "vb", B_IP)):
            _ip("-n", ns, "link", "set", dev, "address", macs[dev])
            _ip("-n", ns, "addr", "add", f"{ip}/24", "dev", dev)
            _ip("-n", ns, "link", "set", dev, "up")
        yield a, b, macs
    finally:
        for ns in made:
            subprocess.run(["ip", "netns", "del", ns], check=False, capture_output=True)


def frames(src: Endpoint, dst: Endpoint, n: int) -> np.ndarray:
    chunk = np.arange(n, dtype=np.uint32)
    lanes = np.random.default_rng(n).integers(-2**31, 2**31, (n, P.LANES), dtype=np.int64)
    return FrameBatch(src, dst).encode(op=P.Op.RESULT, job=1, worker=0, slot=chunk % 8,
                                       chunk=chunk, lanes=lanes.astype(np.int32))


def received(link: XdpLink, count: int) -> list[bytes]:
    rows = np.zeros((64, P.FRAME_LEN + 4), np.uint8)
    got: list[bytes] = []
    while len(got) < count and select.select([link], [], [], 2.0)[0]:
        lengths = link.recv_batch(rows)
        got += [rows[i, :n].tobytes() for i, n in enumerate(lengths.tolist())]
    return got


def test_the_sa_atp_port_reaches_the_link_and_everything_else_the_kernel(pair):
    a, b, macs = pair
    with _InNamespace(b):
        link = XdpLink("vb")
        other = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        other.bind((B_IP, P.UDP_PORT + 1))
        listener = socket.create_server((B_IP, 5005))
    try:
        with _InNamespace(a):
            sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            sender.bind((A_IP, P.UDP_PORT))
            sent = frames(Endpoint(macs["va"], A_IP), Endpoint(macs["vb"], B_IP), 40)
            for frame in sent:  # the kernel (and ARP, through b's kernel) builds the headers
                sender.sendto(frame.tobytes()[P.ETH_LEN + P.IPV4_LEN + P.UDP_LEN:],
                              (B_IP, P.UDP_PORT))
            sender.sendto(b"not for the link", (B_IP, P.UDP_PORT + 1))
            tcp = socket.create_connection((B_IP, 5005), timeout=5)
        got = received(link, 40)
        assert [g[P.ETH_LEN + P.IPV4_LEN + P.UDP_LEN:] for g in got] == [
            f.tobytes()[P.ETH_LEN + P.IPV4_LEN + P.UDP_LEN:] for f in sent]
        assert all(g[:6] == bytes.fromhex(macs["vb"].replace(":", "")) for g in got)
        other.settimeout(5)
        assert other.recv(100) == b"not for the link"
        conn, _ = listener.accept()
        tcp.sendall(b"rendezvous")
        assert conn.recv(100) == b"rendezvous"
        for s in (conn, tcp, listener, other, sender):
            s.close()
    finally:
        link.close()


def test_frames_the_link_sends_arrive_whole(pair):
    a, b, macs = pair
    with _InNamespace(a):
        sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sink.bind((A_IP, P.UDP_PORT))
        sink.settimeout(5)
    with _InNamespace(b):
        link = XdpLink("vb")
    try:
        out = frames(Endpoint(macs["vb"], B_IP), Endpoint(macs["va"], A_IP), 100)
        link.send_batch(out[:60])
        link.send_batch(out[60:][::2])  # rows of a strided view
        link.send(out[61].tobytes())
        want = list(out[:60]) + list(out[60::2]) + [out[61]]
        got = [sink.recv(1000) for _ in want]
        assert got == [f.tobytes()[P.ETH_LEN + P.IPV4_LEN + P.UDP_LEN:] for f in want]
    finally:
        link.close()
        sink.close()


def test_zero_copy_is_refused_on_veth_and_leaves_the_interface_clean(pair):
    _, b, _ = pair
    with _InNamespace(b):
        with pytest.raises(OSError):
            XdpLink("vb", mode="zerocopy")
        XdpLink("vb").close()  # the refused link's program went with it

"""UdpSocketLink on loopback, in every pktio mode: what it sends is each frame's SA-ATP header and
lanes, to the frame's destination; what it hands the transport is byte for byte the frame
``encode_frame`` builds for the datagram's sender (the synthesized Ethernet/IP/UDP included)."""

from __future__ import annotations

import random
import select
import socket

import numpy as np
import pytest

from host_lib.engine.udp_link import L2L4_LEN, UdpSocketLink
from pktio.udp import UdpBatch
from protocol import constants as P
from protocol.codec import Endpoint, Frame, FrameBatch, Header, encode_frame
from tests.test_pktio import AVAILABLE


@pytest.fixture
def net():
    """A worker, its switch and a peer on addresses of their own in 127/8 (so that runs side by
    side do not meet on the SA-ATP port)."""
    base = f"127.{random.randint(1, 254)}.{random.randint(1, 254)}."
    return {"worker": Endpoint("02:00:00:00:00:01", base + "1"),
            "switch": Endpoint("02:00:00:00:00:fe", base + "254"),
            "peer": Endpoint("02:00:00:00:00:02", base + "2"),
            "stranger": Endpoint("00:00:00:00:00:00", base + "9", 40000)}


def bound(endpoint: Endpoint) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.bind((endpoint.ip, endpoint.port))
    s.setblocking(False)
    return s


def datagrams(sock: socket.socket, count: int) -> list[bytes]:
    out = []
    while len(out) < count and select.select([sock], [], [], 2.0)[0]:
        out.append(sock.recv(4096))
    return out


def frames(src: Endpoint, dst: Endpoint, n: int, op=P.Op.DATA, first: int = 0) -> np.ndarray:
    chunk = np.arange(first, first + n, dtype=np.uint32)
    lanes = np.random.default_rng(first).integers(-2**31, 2**31, (n, P.LANES), dtype=np.int64)
    return FrameBatch(src, dst).encode(op=op, job=3, worker=0, slot=chunk % 7, chunk=chunk,
                                       lanes=lanes.astype(np.int32))


@pytest.mark.parametrize("mode", AVAILABLE)
def test_frames_leave_as_their_header_and_lanes_to_their_destination(net, mode):
    link = UdpSocketLink(net["worker"], net["switch"], {1: net["peer"]}, mode=mode)
    switch, peer = bound(net["switch"]), bound(net["peer"])
    to_switch = frames(net["worker"], net["switch"], 150)
    to_peer = frames(net["worker"], net["peer"], 5, op=P.Op.HELPER_DATA, first=500)
    link.send_batch(to_switch)
    link.send_batch(np.r_[to_switch[:3], to_peer, to_switch[3:6]].astype(to_switch.dtype))
    link.send(to_peer[0].tobytes())
    payload = lambda f: f.tobytes()[L2L4_LEN:]  # noqa: E731
    assert datagrams(switch, 156) == [payload(f) for f in to_switch] + [
        payload(f) for f in to_switch[:6]]
    assert datagrams(peer, 6) == [payload(f) for f in to_peer] + [payload(to_peer[0])]
    for s in (link, switch, peer):
        s.close()


@pytest.mark.parametrize("mode", AVAILABLE)
def test_received_datagrams_become_the_frames_their_senders_would_encode(net, mode):
    link = UdpSocketLink(net["worker"], net["switch"], {1: net["peer"]}, mode=mode)
    switch, stranger = bound(net["switch"]), bound(net["stranger"])
    results = frames(net["switch"], net["worker"], 100, op=P.Op.RESULT)
    UdpBatch(switch).send(results.view(np.uint8).reshape(100, P.FRAME_LEN)[:, L2L4_LEN:],
                          (net["worker"].ip, net["worker"].port))  # one train, where offloaded
    odd = encode_frame(Frame(net["stranger"], net["worker"], Header(op=P.Op.RESULT, job=4)))
    stranger.sendto(odd[L2L4_LEN:], (net["worker"].ip, net["worker"].port))
    stranger.sendto(b"short", (net["worker"].ip, net["worker"].port))
    want = [f.tobytes() for f in results] + [odd]
    got, lengths = [], []
    rows = np.zeros((64, P.FRAME_LEN + 1), np.uint8)
    while len(got) < len(want) + 1 and select.select([link], [], [], 2.0)[0]:
        while n := len(received := link.recv_batch(rows)):
            got += [rows[i, :P.FRAME_LEN].tobytes() for i in range(n)]
            lengths += received.tolist()
    assert lengths == [P.FRAME_LEN] * len(want) + [L2L4_LEN + 5]
    assert got[:-1] == want
    for s in (link, switch, stranger):
        s.close()


@pytest.mark.parametrize("mode", AVAILABLE)
def test_tunnel_links_hand_out_one_frame_at_a_time_too(mode):
    """UdpTunnelLink.recv_into, for callers that take one frame at a time: a train comes out
    frame by frame, a longer datagram cut to the buffer."""
    from host_lib.engine.links import UdpTunnelLink

    switch = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    switch.bind(("127.0.0.1", 0))
    link = UdpTunnelLink(switch.getsockname(), mode=mode)
    train = np.random.default_rng(5).integers(0, 256, (5, P.FRAME_LEN), dtype=np.uint8)
    UdpBatch(switch).send(train, link.sock.getsockname())
    switch.sendto(bytes(P.FRAME_LEN + 50), link.sock.getsockname())
    select.select([link], [], [], 2.0)
    buf = bytearray(P.FRAME_LEN + 1)
    got = [bytes(buf[:n]) for n in iter(lambda: link.recv_into(buf), 0)]
    assert got == [row.tobytes() for row in train] + [bytes(P.FRAME_LEN + 1)]
    link.close()
    switch.close()

"""The protocol on an ordinary UDP socket: the kernel builds Ethernet, IPv4 and UDP.

:class:`UdpSocketLink` binds this worker's IP address and SA-ATP port and sends each frame's
SA-ATP header and lanes as one datagram to the frame's destination IP and port, so it works
wherever the worker has an interface toward the switch: a real NIC, a veth in a Mininet host, or
loopback. Batches go through :mod:`pktio.native` (segmentation offload and GRO, else
``sendmmsg``/``recvmmsg``), on which the compiled round loop runs too, else plain calls
(:class:`pktio.udp.UdpBatch`). The kernel must be able to reach the switch's IP (and
the peers', for helper traffic) through the switch: a route, and a neighbour entry with the
switch's MAC where nothing answers ARP for it. The frame's source MAC is the interface's, so the
job's worker MAC must be the interface's.

The kernel strips Ethernet/IP/UDP from what it receives; the link hands the transport complete
frames in the :data:`~protocol.codec.FRAME_DTYPE` layout, so the transport stays link-agnostic.
The per-frame fields it synthesizes, from the datagram's source address and the link's known
endpoints (``switch`` and ``peers``):

* ``eth_src``: the MAC of the known endpoint whose IP the datagram came from (00:00:00:00:00:00
  for an unknown sender); ``eth_dst``: this worker's MAC;
* ``ip_src`` and ``udp_sport``: the datagram's source address and port;
  ``ip_dst`` and ``udp_dport``: this worker's IP and port;
* the rest as :func:`~protocol.codec.encode_frame` builds it (IPv4 without options, DF, TTL 64,
  a valid header checksum, lengths of a whole frame, UDP checksum 0).
"""

from __future__ import annotations

import socket

import numpy as np

from pktio.native import NativeSocket
from pktio.reuseport import reuseport_socket, steer_by_field
from pktio.udp import UdpBatch, best_mode, sockaddr
from protocol import constants as P
from protocol.codec import FRAME_DTYPE, Endpoint, Frame, Header, encode_frame, field_offset

L2L4_LEN = P.ETH_LEN + P.IPV4_LEN + P.UDP_LEN  # what the kernel adds and strips
_IP_DST, _UDP_DPORT = field_offset("ip_dst"), field_offset("udp_dport")
_SLOT = field_offset("slot")
_UNKNOWN_MAC = "00:00:00:00:00:00"
_SOCKADDR_IN = 16  # the bytes of an IPv4 source address
_BUFFER = 8 << 20


class UdpSocketLink:
    """SA-ATP frames as UDP datagrams from ``local`` (its IP and port are bound); see the module
    doc. ``mode`` forces one of :data:`pktio.udp.MODES`."""

    def __init__(self, local: Endpoint, switch: Endpoint,
                 peers: dict[int, Endpoint] | None = None, mode: str | None = None):
        self.local, self.switch, self.peers = local, switch, peers
        self.sock = reuseport_socket()  # the shards' sockets may join its port (open_shards)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, _BUFFER)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, _BUFFER)
        self.sock.bind((local.ip, local.port))
        self.sock.setblocking(False)
        self.mode = mode or best_mode(self.sock)
        self._switch_name = sockaddr(socket.AF_INET, (switch.ip, switch.port))
        self.native = None if self.mode == "plain" else NativeSocket(
            self.sock, P.FRAME_LEN - L2L4_LEN, L2L4_LEN, self.mode, (switch.ip, switch.port))
        self._plain = UdpBatch(self.sock, "plain") if self.native is None else None
        self._macs = {e.ip_raw: e.mac for e in [switch, *(peers or {}).values()]}
        self._headers: dict[bytes, np.ndarray] = {}  # source sockaddr -> synthesized L2-L4

    def fileno(self) -> int:
        return self.sock.fileno()

    def send(self, frame) -> None:
        self.send_batch(np.frombuffer(frame, FRAME_DTYPE))

    def send_batch(self, frames: np.ndarray) -> None:
        """Each frame's SA-ATP header and lanes to its IP destination and UDP port (frames of
        one batch usually share them: one send of the whole batch)."""
        rows = frames[:, None].view(np.uint8)
        dests = np.concatenate([rows[:, _IP_DST:_IP_DST + 4], rows[:, _UDP_DPORT:_UDP_DPORT + 2]],
                               axis=1)
        if (dests == dests[0]).all():
            self._send(rows, dests[0])
            return
        for dest in np.unique(dests, axis=0):
            self._send(rows[(dests == dest).all(axis=1)], dest)

    def _send(self, rows: np.ndarray, dest: np.ndarray) -> None:
        address = _address(dest)
        if self.native is None:
            self._plain.send(rows[:, L2L4_LEN:], address)
        else:
            name = sockaddr(socket.AF_INET, address)
            self.native.send(rows, None if name == self._switch_name else name)

    def recv_batch(self, rows: np.ndarray) -> np.ndarray:
        """Datagrams into ``rows`` after room for the synthesized headers; their lengths as
        frames (header + datagram)."""
        if self.native is None:
            n = self._plain.recv(rows[:, L2L4_LEN:])
            io = self._plain
        else:
            n = self.native.recv(rows)
            io = self.native
        if n:
            self._synthesize(rows, io.names[:n])
        return io.lengths[:n] + L2L4_LEN

    def open_shards(self, k: int) -> list | None:
        """This link and k - 1 more on the same port, the kernel handing each datagram to link
        ``slot mod k`` (:mod:`pktio.reuseport`), datagram by datagram (a GRO train would go
        whole to one); None where the kernel cannot steer. The shards share the port, as the
        switch sends every result of a worker to its one port (a NIC's RSS therefore keeps them
        on one queue; the steering spreads them over the shards' cores after it)."""
        try:
            steer_by_field(self.sock, _SLOT - L2L4_LEN, k)
        except OSError:
            return None
        links = [self] + [UdpSocketLink(self.local, self.switch, self.peers, self.mode)
                          for _ in range(k - 1)]
        for link in links:
            if link.native is not None:
                link.native.one_by_one()
        return links

    def switch_headers(self) -> tuple[bytes, bytes]:
        """The sockaddr the switch's datagrams come from, and the headers their frames get:
        what the compiled round loop writes itself (``host_lib/engine/round_loop.py``)."""
        name = np.frombuffer(self._switch_name, np.uint8)
        return self._switch_name, self._header(name).tobytes()

    def finish_headers(self, rows: np.ndarray, n: int) -> None:
        """The synthesized headers of the first ``n`` rows the compiled loop received."""
        self._synthesize(rows, self.native.names[:n])

    def _synthesize(self, rows: np.ndarray, names: np.ndarray) -> None:
        n = len(names)
        names = names[:, :_SOCKADDR_IN]
        if (names == names[0]).all():
            rows[:n, :L2L4_LEN] = self._header(names[0])
        else:
            for name in np.unique(names, axis=0):
                rows[:n][(names == name).all(axis=1), :L2L4_LEN] = self._header(name)

    def _header(self, name: np.ndarray) -> np.ndarray:
        key = name.tobytes()
        header = self._headers.get(key)
        if header is None:
            ip, port = socket.inet_ntoa(key[4:8]), int.from_bytes(key[2:4], "big")
            src = Endpoint(self._macs.get(key[4:8], _UNKNOWN_MAC), ip, port)
            frame = encode_frame(Frame(src, self.local, Header(op=P.Op.RESULT, job=0)))
            header = self._headers[key] = np.frombuffer(frame[:L2L4_LEN], np.uint8)
        return header

    def close(self) -> None:
        self.sock.close()


def _address(dest: np.ndarray) -> tuple[str, int]:
    """(IP, port) of a frame's 4 destination address bytes and 2 port bytes."""
    raw = dest.tobytes()
    return socket.inet_ntoa(raw[:4]), int.from_bytes(raw[4:6], "big")

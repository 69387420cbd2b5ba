"""A worker's link to the switch: whole Ethernet frames out and in.

* :class:`UdpTunnelLink` carries each frame as one UDP datagram to a port of the embedded
  software switch on loopback (``softswitch-grpc -i 1@udp:127.0.0.1:PORT``): no root needed.
* :class:`RawEthernetLink` sends and receives frames on a Linux interface through AF_PACKET, as a
  Mininet host does with bmv2 or the embedded switch on veth pairs (needs CAP_NET_RAW).

Both are non-blocking and expose ``fileno()`` for the transport's poll loop.
"""

from __future__ import annotations

import socket
import struct

from host_lib import protocol as P

_RECV_BUFFER = 8 << 20
_ETH_P_ALL = 0x0003
_PACKET_OUTGOING = 4
_SA_ATP_PORT_BYTES = struct.pack("!H", P.UDP_PORT)


class UdpTunnelLink:
    """Frames as UDP datagrams to ``switch_addr`` (host, port), from an ephemeral local port."""

    def __init__(self, switch_addr: tuple[str, int], bind_host: str = "127.0.0.1"):
        self.switch_addr = switch_addr
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, _RECV_BUFFER)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, _RECV_BUFFER)
        self.sock.bind((bind_host, 0))
        self.sock.connect(switch_addr)
        self.sock.setblocking(False)

    def fileno(self) -> int:
        return self.sock.fileno()

    def send(self, frame) -> None:
        try:
            self.sock.send(frame)
        except (BlockingIOError, ConnectionRefusedError):
            pass  # a full buffer or an absent switch is loss; retransmission recovers

    def recv_into(self, buf) -> int:
        """Length of the next frame, 0 if none is waiting."""
        try:
            return self.sock.recv_into(buf)
        except (BlockingIOError, ConnectionRefusedError):
            return 0

    def close(self) -> None:
        self.sock.close()


class RawEthernetLink:
    """Frames on a Linux interface. Only frames to this host's SA-ATP UDP port are returned;
    a plain UDP socket bound to that port keeps the kernel from answering results with ICMP
    port-unreachable."""

    def __init__(self, interface: str, ip: str, udp_port: int = P.UDP_PORT):
        self.interface = interface
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(_ETH_P_ALL))
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, _RECV_BUFFER)
        self.sock.bind((interface, 0))
        self.sock.setblocking(False)
        self._port = struct.pack("!H", udp_port)
        self._sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._sink.bind((ip, udp_port))

    def fileno(self) -> int:
        return self.sock.fileno()

    def send(self, frame) -> None:
        try:
            self.sock.send(frame)
        except BlockingIOError:
            pass

    def recv_into(self, buf) -> int:
        while True:
            try:
                n, addr = self.sock.recvfrom_into(buf)
            except BlockingIOError:
                return 0
            if addr[2] == _PACKET_OUTGOING:
                continue  # our own transmissions, looped back by AF_PACKET
            if n >= 38 and buf[36:38] == self._port and buf[34:36] == _SA_ATP_PORT_BYTES:
                return n

    def close(self) -> None:
        self.sock.close()
        self._sink.close()

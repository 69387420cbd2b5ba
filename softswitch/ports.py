"""Switch ports: Linux interfaces (AF_PACKET, like bmv2's ``-i N@veth0``) and UDP tunnels.

A UDP-tunnel port ``N@udp:HOST:PORT`` binds ``HOST:PORT``; every datagram received there is one
whole Ethernet frame entering switch port ``N``, and frames leaving port ``N`` are sent to the
address that most recently sent a datagram to it (frames for a port with no peer yet are dropped
and counted); an empty datagram only makes its sender the port's peer.  This lets worker
processes attach to the switch without root or veth pairs.

One thread waits on all port sockets and feeds every received frame to the dataplane. Ports
receive in batches and the frames that the batch sends out leave in batches, port by port, after
it (:mod:`pktio`: UDP segmentation offload and GRO on tunnel ports, PACKET_MMAP rings on
interfaces), so a packet costs the pipeline and not two system calls; frames sent from another
thread (P4Runtime PacketOut) leave at once.
"""

from __future__ import annotations

import json
import logging
import re
import select
import socket
import struct
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from pktio.ring import open_ring
from pktio.udp import UdpBatch, address

from .pcap import PcapWriter

if TYPE_CHECKING:
    from .dataplane import Dataplane

log = logging.getLogger("softswitch.ports")

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
MAX_FRAME = 65535
UDP_BATCH = 64  # datagrams a tunnel port takes in one receive
# Linux <linux/if_packet.h>: the VLAN tag the kernel took out of a received frame comes back
# in a tpacket_auxdata control message.
SOL_PACKET = 263
PACKET_AUXDATA = 8
TP_STATUS_VLAN_VALID = 0x10
TP_STATUS_VLAN_TPID_VALID = 0x40
ETH_P_8021Q = 0x8100
_AUXDATA = struct.Struct("=IIIHHHH")  # status, len, snaplen, mac, net, vlan_tci, vlan_tpid


@dataclass
class PortStats:
    rx: int = 0
    tx: int = 0
    tx_dropped: int = 0  # UDP port with no peer yet, or a send error


class Port:
    def __init__(self, number: int, name: str):
        self.number = number
        self.name = name
        self.stats = PortStats()
        self.sock: socket.socket
        self.pcap_in: PcapWriter | None = None
        self.pcap_out: PcapWriter | None = None
        self.pending: list[bytes] = []  # frames to send after the batch being processed

    def recv_batch(self) -> list[bytes]:
        """Frames waiting on the port; none when nothing is (or only our own transmissions)."""
        try:
            frame = self.recv()
        except BlockingIOError:
            return []
        return [] if frame is None else [frame]

    def recv(self) -> bytes | None:
        raise NotImplementedError

    def send(self, frame: bytes) -> None:
        """Send one frame now (safe from any thread)."""
        raise NotImplementedError

    def flush(self) -> None:
        """Send the pending frames (from the port thread)."""
        frames, self.pending = self.pending, []
        for frame in frames:
            self.send(frame)

    def close(self) -> None:
        self.sock.close()
        for w in (self.pcap_in, self.pcap_out):
            if w is not None:
                w.close()


class UdpPort(Port):
    def __init__(self, number: int, host: str, udp_port: int):
        super().__init__(number, f"udp:{host}:{udp_port}")
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
        self.sock.bind((host, udp_port))
        self.sock.setblocking(False)
        self.address = self.sock.getsockname()[:2]
        self.name = f"udp:{host}:{self.address[1]}"  # the port actually bound
        self.peer: tuple | None = None
        self.io = UdpBatch(self.sock, capacity=UDP_BATCH)
        self._rows = np.zeros((UDP_BATCH, MAX_FRAME + 1), np.uint8)
        self._peer_name = b""

    def recv_batch(self) -> list[bytes]:
        n = self.io.recv(self._rows)
        if n:
            last = self.io.names[n - 1].tobytes()
            if last != self._peer_name:
                self._peer_name, self.peer = last, address(last)
        return [self._rows[i, :length].tobytes()
                for i, length in enumerate(self.io.lengths[:n].tolist()) if length]

    def send(self, frame: bytes) -> None:
        if self.peer is None:
            self.stats.tx_dropped += 1
            return
        try:
            self.sock.sendto(frame, self.peer)
            self.stats.tx += 1
        except OSError as exc:
            self.stats.tx_dropped += 1
            log.warning("port %d: cannot send to %s: %s", self.number, self.peer, exc)

    def flush(self) -> None:
        """Runs of equal-length frames leave as one batch each."""
        frames, self.pending = self.pending, []
        if self.peer is None:
            self.stats.tx_dropped += len(frames)
            return
        start = 0
        while start < len(frames):
            size = len(frames[start])
            end = start + 1
            while end < len(frames) and len(frames[end]) == size:
                end += 1
            rows = np.frombuffer(b"".join(frames[start:end]), np.uint8).reshape(end - start, size)
            try:
                sent = self.io.send(rows, self.peer)
            except OSError as exc:
                sent = 0
                log.warning("port %d: cannot send to %s: %s", self.number, self.peer, exc)
            self.stats.tx += sent
            self.stats.tx_dropped += end - start - sent
            start = end


class InterfacePort(Port):
    """A Linux network interface through an AF_PACKET socket (needs CAP_NET_RAW).

    The kernel strips a received frame's outer 802.1Q/802.1ad tag into packet metadata (VLAN
    acceleration); bmv2 reads through libpcap, which puts it back. So does this port, from the
    PACKET_AUXDATA control message (or the ring's frame header), so that a tagged frame reaches
    the pipeline, and leaves, with its tag, as on bmv2. Frames go in and out through
    PACKET_MMAP rings (:mod:`pktio.ring`) where the kernel has them, else one call per frame."""

    def __init__(self, number: int, ifname: str):
        super().__init__(number, ifname)
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        self.sock.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
        self.sock.bind((ifname, 0))
        self.sock.setblocking(False)
        self.ring = open_ring(self.sock)

    def recv_batch(self) -> list[bytes]:
        if self.ring is None:
            return super().recv_batch()
        return [with_vlan_tag(frame, status, 0, 0, 0, 0, tci, tpid)
                for frame, status, tci, tpid in self.ring.recv(UDP_BATCH)]

    def recv(self) -> bytes | None:
        frame, ancillary, _flags, addr = self.sock.recvmsg(MAX_FRAME,
                                                           socket.CMSG_SPACE(_AUXDATA.size))
        if addr[2] == PACKET_OUTGOING:  # our own transmissions, seen by the packet socket
            return None
        for level, kind, data in ancillary:
            if level == SOL_PACKET and kind == PACKET_AUXDATA and len(data) >= _AUXDATA.size:
                return with_vlan_tag(frame, *_AUXDATA.unpack_from(data))
        return frame

    def send(self, frame: bytes) -> None:
        if self.ring is not None:
            self._count(self.ring.send([frame]), 1)
            return
        try:
            self.sock.send(frame)
            self.stats.tx += 1
        except OSError as exc:
            self.stats.tx_dropped += 1
            log.warning("port %d (%s): send failed: %s", self.number, self.name, exc)

    def flush(self) -> None:
        if self.ring is None:
            super().flush()
            return
        frames, self.pending = self.pending, []
        self._count(self.ring.send(frames), len(frames))

    def _count(self, sent: int, frames: int) -> None:
        self.stats.tx += sent
        self.stats.tx_dropped += frames - sent

    def close(self) -> None:
        if self.ring is not None:
            self.ring.close()
        super().close()


def with_vlan_tag(frame: bytes, status: int, _len: int, _snaplen: int, _mac: int, _net: int,
                  tci: int, tpid: int) -> bytes:
    """The frame with the tag that tpacket_auxdata says the kernel removed put back after the
    MAC addresses (TPID 0x8100 when the kernel does not report one)."""
    if not status & TP_STATUS_VLAN_VALID:
        return frame
    if not status & TP_STATUS_VLAN_TPID_VALID:
        tpid = ETH_P_8021Q
    return frame[:12] + struct.pack("!HH", tpid, tci) + frame[12:]


_UDP_SPEC = re.compile(r"^udp:(?P<host>\[[^\]]+\]|[^:]+):(?P<port>\d+)$")


def parse_interface(spec: str) -> tuple[int, str]:
    """``N@name`` -> (N, name), as bmv2's ``-i`` option."""
    number, sep, name = spec.partition("@")
    if not sep or not number.isdigit() or not name:
        raise ValueError(f"invalid interface {spec!r}: expected <port-num>@<interface-name>")
    return int(number), name


def open_port(number: int, name: str) -> Port:
    m = _UDP_SPEC.match(name)
    if m:
        return UdpPort(number, m.group("host").strip("[]"), int(m.group("port")))
    return InterfacePort(number, name)


class PortManager:
    """Owns the ports of one switch and the thread that feeds their frames to the dataplane."""

    def __init__(self, dataplane: Dataplane, pcap_dir: str | Path | None = None):
        self.dataplane = dataplane
        self.ports: dict[int, Port] = {}
        self.pcap_dir = None if pcap_dir is None else Path(pcap_dir)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop_ident: int | None = None
        self._wake_r, self._wake_w = socket.socketpair()
        self.unknown_port_drops = 0
        dataplane.set_transmit(self.transmit)

    def add(self, number: int, name: str) -> Port:
        if number in self.ports:
            raise ValueError(f"port {number} is given twice")
        if self.dataplane.cpu_port and number == self.dataplane.cpu_port:
            raise ValueError(f"CPU port {number} is used as a data port")
        port = open_port(number, name)
        if self.pcap_dir is not None:
            stem = re.sub(r"[^A-Za-z0-9_.-]", "_", port.name)
            port.pcap_in = PcapWriter(self.pcap_dir / f"{stem}_in.pcap")
            port.pcap_out = PcapWriter(self.pcap_dir / f"{stem}_out.pcap")
        self.ports[number] = port
        if isinstance(port, UdpPort):
            log.info("port %d bound to udp:%s:%d", number, *port.address)
        else:
            log.info("port %d attached to interface %s", number, name)
        return port

    def udp_addresses(self) -> dict[int, tuple[str, int]]:
        return {n: (p.address[0], p.address[1]) for n, p in self.ports.items()
                if isinstance(p, UdpPort)}

    def write_udp_port_file(self, path: str | Path) -> None:
        """Record the bound UDP addresses as JSON: {"<port>": ["host", udp_port], ...}."""
        data = {str(n): list(addr) for n, addr in sorted(self.udp_addresses().items())}
        tmp = Path(str(path) + ".tmp")
        tmp.write_text(json.dumps(data) + "\n")
        tmp.replace(path)

    def transmit(self, number: int, frame: bytes) -> None:
        port = self.ports.get(number)
        if port is None:
            self.unknown_port_drops += 1
            return
        if port.pcap_out is not None:
            port.pcap_out.write(frame)
        if threading.get_ident() == self._loop_ident:
            port.pending.append(frame)
        else:
            port.send(frame)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="softswitch-ports", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        """One batch per ready port per turn. A port whose batch was not empty is asked again
        next turn without waiting: more may be queued, some of it (the rest of a GRO train)
        where select does not see it."""
        self._loop_ident = threading.get_ident()
        by_fd = {p.sock.fileno(): p for p in self.ports.values()}
        fds = list(by_fd) + [self._wake_r.fileno()]
        backlog: dict[int, Port] = {}
        while not self._stop.is_set():
            ready, _, _ = select.select(fds, [], [], 0 if backlog else None)
            turn = backlog | {fd: by_fd[fd] for fd in ready if fd in by_fd}
            backlog = {}
            for fd, port in turn.items():
                try:
                    frames = port.recv_batch()
                except OSError as exc:
                    log.warning("port %d: receive failed: %s", port.number, exc)
                    continue
                for frame in frames:
                    self._receive(port, frame)
                for out in self.ports.values():
                    if out.pending:
                        out.flush()
                if frames:
                    backlog[fd] = port

    def _receive(self, port: Port, frame: bytes) -> None:
        port.stats.rx += 1
        if port.pcap_in is not None:
            port.pcap_in.write(frame)
        try:
            self.dataplane.receive(port.number, frame)
        except Exception:  # keep the switch alive whatever one packet does
            log.exception("error while processing a packet from port %d", port.number)

    def stop(self) -> None:
        self._stop.set()
        self._wake_w.send(b"x")
        if self._thread is not None:
            self._thread.join(timeout=5)
        for port in self.ports.values():
            port.close()
        self._wake_r.close()
        self._wake_w.close()

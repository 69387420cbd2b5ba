"""UDP-tunnel ports with real sockets on 127.0.0.1, pcap capture, and the softswitch-grpc command
started as a process (ports file, P4Runtime port, clean SIGTERM shutdown)."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest
from p4.v1 import p4runtime_pb2 as pb
from p4.v1 import p4runtime_pb2_grpc

from softswitch import load_program
from softswitch.cli import StopRequest
from softswitch.dataplane import Dataplane
from softswitch.pcap import read_pcap
from softswitch.ports import PortManager, parse_interface
from tests.softswitch.programs import COMPILED, program

ETH = bytes.fromhex("0200000000020200000000010800")


def rep_frame(mode: int) -> bytes:
    return ETH + bytes([mode]) + bytes(13) + b"payload"


def udp_socket() -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    s.settimeout(5)
    return s


def wait_until(predicate, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return False


def test_parse_interface():
    assert parse_interface("3@udp:127.0.0.1:40003") == (3, "udp:127.0.0.1:40003")
    assert parse_interface("1@veth0") == (1, "veth0")
    for bad in ("veth0", "x@veth0", "1@"):
        with pytest.raises(ValueError):
            parse_interface(bad)


def test_udp_ports_learn_their_peer_and_forward(tmp_path):
    dataplane = Dataplane()
    dataplane.install(program("replication"))
    ports = PortManager(dataplane, pcap_dir=tmp_path)
    ports.add(1, "udp:127.0.0.1:0")
    ports.add(2, "udp:127.0.0.1:0")
    ports.add(3, "udp:127.0.0.1:0")
    ports.start()
    a, b = udp_socket(), udp_socket()
    try:
        addrs = ports.udp_addresses()
        assert all(port != 0 for _, port in addrs.values())
        # b says hello on port 1 (its frame is forwarded to port 1 itself: b is the peer by then).
        b.sendto(rep_frame(0), addrs[1])
        assert b.recvfrom(2048)[0][:14] == ETH
        a.sendto(rep_frame(0), addrs[2])
        data, src = b.recvfrom(2048)
        assert src == addrs[1] and data[:14] == ETH and data[14] == 0
        # Port 3 has never heard from anyone: its frames are dropped and counted.
        a.sendto(rep_frame(4), addrs[2])
        assert wait_until(lambda: ports.ports[3].stats.tx_dropped == 1)
        assert ports.ports[2].stats.rx == 2
        ports.write_udp_port_file(tmp_path / "ports.json")
        saved = json.loads((tmp_path / "ports.json").read_text())
        assert saved == {str(n): [h, p] for n, (h, p) in addrs.items()}
    finally:
        ports.stop()
        a.close()
        b.close()
    port2 = f"udp_127.0.0.1_{addrs[2][1]}"
    assert len(read_pcap(tmp_path / f"{port2}_in.pcap")) == 2
    outs = read_pcap(tmp_path / f"udp_127.0.0.1_{addrs[1][1]}_out.pcap")
    assert len(outs) == 2 and outs[1][:14] == ETH


def test_cpu_port_cannot_be_a_data_port():
    ports = PortManager(Dataplane(cpu_port=64))
    with pytest.raises(ValueError, match="CPU port"):
        ports.add(64, "udp:127.0.0.1:0")
    ports.stop()


def test_command_line_switch_process(tmp_path):
    port_file = tmp_path / "ports.json"
    cmd = [sys.executable, "-m", "softswitch", str(COMPILED / "replication.json"),
           "-i", "1@udp:127.0.0.1:0", "-i", "2@udp:127.0.0.1:0", "--thrift-port", "9090",
           "--udp-port-file", str(port_file), "--", "--grpc-server-addr", "127.0.0.1:0"]
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    try:
        grpc_line = ""
        for line in proc.stdout:
            if line.startswith("Server listening on"):
                grpc_line = line
                break
        assert grpc_line, proc.stderr.read()
        grpc_port = int(grpc_line.rsplit(":", 1)[1])
        ports = {int(k): tuple(v) for k, v in json.loads(port_file.read_text()).items()}
        a, b = udp_socket(), udp_socket()
        b.sendto(rep_frame(0), ports[1])
        b.recvfrom(2048)
        a.sendto(rep_frame(0), ports[2])
        assert b.recvfrom(2048)[0][:14] == ETH
        a.close()
        b.close()
        with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
            stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)
            assert stub.Capabilities(pb.CapabilitiesRequest()).p4runtime_api_version
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
        assert "--thrift-port ignored" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_stop_signal_leaves_the_next_one_to_end_the_process():
    """The command line's handler records SIGTERM and puts SIGINT's and SIGTERM's default
    back: it never runs inside itself, and a second signal ends the switch at once."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        stop = StopRequest()
        assert stop.requested == 0
        signal.raise_signal(signal.SIGTERM)  # its handler has run when this returns
        assert stop.requested == signal.SIGTERM
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
        assert signal.getsignal(signal.SIGINT) == signal.SIG_DFL
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


def test_command_line_errors():
    run = lambda *a: subprocess.run([sys.executable, "-m", "softswitch", *a],  # noqa: E731
                                    capture_output=True, text=True, timeout=60)
    assert run().returncode == 1
    assert run("--no-p4", str(COMPILED / "tables.json")).returncode == 1
    bad = run("--no-p4", "-i", "nonsense")
    assert bad.returncode == 1 and "invalid interface" in bad.stderr


# -- AF_PACKET interfaces ----------------------------------------------------------------------

_libc = ctypes.CDLL("libc.so.6", use_errno=True)
_CLONE_NEWNET = 0x40000000


@contextlib.contextmanager
def in_namespace(name: str):
    """Create sockets inside network namespace ``name`` (this thread only)."""
    home = os.open("/proc/self/ns/net", os.O_RDONLY)
    target = os.open(f"/run/netns/{name}", os.O_RDONLY)
    try:
        if _libc.setns(target, _CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "setns failed")
        yield
    finally:
        _libc.setns(home, _CLONE_NEWNET)
        os.close(home)
        os.close(target)


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


@pytest.fixture
def veth_namespace():
    """A network namespace with two veth pairs, sw1/h1 and sw2/h2, removed afterwards."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("needs root and iproute2")
    ns = f"sswtest{os.getpid()}"
    _ip("netns", "add", ns)
    try:
        for p in (1, 2):
            _ip("-n", ns, "link", "add", f"sw{p}", "type", "veth", "peer", "name", f"h{p}")
            for end in (f"sw{p}", f"h{p}"):
                _ip("netns", "exec", ns, "sysctl", "-qw", f"net.ipv6.conf.{end}.disable_ipv6=1")
                _ip("-n", ns, "link", "set", end, "up")
        yield ns
    finally:
        _ip("netns", "del", ns)


@pytest.fixture(params=["rings", "calls"])
def port_io(request, monkeypatch):
    """Interface ports with PACKET_MMAP rings, and with one call per frame (a kernel without
    rings)."""
    if request.param == "calls":
        monkeypatch.setattr("softswitch.ports.open_ring", lambda sock: None)
    return request.param


def test_interface_ports_through_af_packet(veth_namespace, port_io):
    dataplane = Dataplane()
    dataplane.install(program("replication"))
    ports = PortManager(dataplane)
    with in_namespace(veth_namespace):
        ports.add(1, "sw1")
        ports.add(2, "sw2")
        hosts = {}
        for p in (1, 2):
            s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
            s.bind((f"h{p}", 0))
            s.settimeout(5)
            hosts[p] = s
    assert (ports.ports[1].ring is None) == (port_io == "calls")
    ports.start()
    try:
        sent = rep_frame(0)
        hosts[2].send(sent)
        got = hosts[1].recv(2048)
        # Forwarded to port 1, the rep header filled in by the pipeline (ingress port 2).
        assert got[:14] == ETH and got.endswith(b"payload") and len(got) == len(sent)
        assert got[20:22] == b"\x00\x02"
        assert wait_until(lambda: ports.ports[2].stats.rx == 1 and ports.ports[1].stats.tx == 1)
        # A burst crosses in batches, every frame once and in order.
        burst = [sent + i.to_bytes(2, "big") for i in range(200)]
        for frame in burst:
            hosts[2].send(frame)
        tails = [hosts[1].recv(2048)[-2:] for _ in burst]
        assert tails == [frame[-2:] for frame in burst]
        assert wait_until(lambda: ports.ports[1].stats.tx == 201)
    finally:
        ports.stop()
        for s in hosts.values():
            s.close()


def test_interface_ports_keep_vlan_tags(veth_namespace, port_io):
    """The kernel takes a received frame's outer tag out into packet metadata; the port puts it
    back (as bmv2's libpcap does), so a tagged frame crosses the switch with its tag: 802.1Q and
    802.1ad, in from a veth interface and out through a UDP tunnel port, which passes bytes."""
    dataplane = Dataplane()
    sw = dataplane.install(load_program((COMPILED.parents[2] / "p4src" / "compiled"
                                         / "sa_atp.json").read_text()))
    sw.tables["SaAtpIngress.l2.dmac"].add({"hdr.ethernet.dst_addr": 0x020000000A01},
                                          "SaAtpIngress.l2.forward", {"port": 1})
    ports = PortManager(dataplane)
    ports.add(1, "udp:127.0.0.1:0")
    with in_namespace(veth_namespace):
        ports.add(2, "sw2")
        host = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
        host.bind(("h2", 0))
    ports.start()
    peer = udp_socket()
    try:
        peer.sendto(b"hello", ports.ports[1].address)  # the tunnel learns where to send
        assert wait_until(lambda: ports.ports[1].peer is not None)
        plain = bytes.fromhex("020000000a01020000000a0088b5") + bytes(46)
        dot1q = plain[:12] + bytes.fromhex("81000064") + plain[12:]
        qinq = plain[:12] + bytes.fromhex("88a8a007") + dot1q[12:]
        for frame in (dot1q, qinq, plain):
            host.send(frame)
            got, _ = peer.recvfrom(2048)
            assert got == frame
    finally:
        ports.stop()
        host.close()
        peer.close()

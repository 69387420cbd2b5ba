"""Allreduce through the embedded switch on real interfaces: each worker in a network namespace
of its own, joined to a switch port by a veth pair, on UdpSocketLink (the kernel's UDP stack,
segmentation offload and GRO), RawEthernetLink (PACKET_MMAP rings, and one call per frame) or
XdpLink (AF_XDP, copy mode, where the kernel has it);
exact sums against the numpy reference, under loss, with one shard and with two (on
UdpSocketLink, each shard's own socket on the worker's port, the kernel steering each result to
the shard of its slot). Needs root and iproute2; the namespaces and links are removed
afterwards."""

from __future__ import annotations

import multiprocessing
import os
import shutil
import subprocess
import uuid

import numpy as np
import pytest

from control_plane.controller import Controller
from host_lib.engine.runs import new_run_id
from pktio.xdp import available as xdp_available
from protocol.constants import CPU_PORT
from softswitch.dataplane import Dataplane
from softswitch.p4runtime_server import P4RuntimeServer
from softswitch.ports import PortManager
from tests.quant_reference import AllreduceReference
from tests.targets import _InNamespace, _ip
from tests.test_transport import inputs
from topologies.local import SWITCH_IP, SWITCH_MAC, local_job

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("ip") is None,
                                reason="needs root and iproute2")
N, ELEMENTS, CALLS = 3, 60_000, 2


class VethCluster:
    """A switch namespace with ports sw1..swN, and worker w's namespace with h<w> at the job's
    MAC and IP, routes and neighbour entries to the switch's IP and every peer through it. UDP
    segmentation offload is off on the workers' veths: a software switch reads frames, and a
    veth would hand it a whole segmented train as one (a NIC cuts it, or the kernel does)."""

    def __init__(self, spec):
        self.spec = spec
        tag = uuid.uuid4().hex[:6]
        self.switch_ns = f"hpsw-{tag}"
        self.worker_ns = {w.id: f"hpw{w.id}-{tag}" for w in spec.workers}
        self.made: list[str] = []
        try:
            self._build()
        except BaseException:
            self.close()
            raise

    def _build(self) -> None:
        for ns in [self.switch_ns, *self.worker_ns.values()]:
            _ip("netns", "add", ns)
            self.made.append(ns)
        for w in self.spec.workers:
            ns, sw, host = self.worker_ns[w.id], f"sw{w.port}", f"h{w.port}"
            _ip("-n", self.switch_ns, "link", "add", sw, "type", "veth", "peer", "name", host,
                "netns", ns)
            _ip("-n", ns, "link", "set", host, "address", w.mac, "gso_max_segs", "1")
            for name, end in ((self.switch_ns, sw), (ns, host)):
                _ip("netns", "exec", name, "sysctl", "-qw",
                    f"net.ipv6.conf.{end}.disable_ipv6=1")
                _ip("-n", name, "link", "set", end, "up")
            _ip("-n", ns, "addr", "add", f"{w.ip}/24", "dev", host)
            _ip("-n", ns, "route", "add", f"{SWITCH_IP}/32", "dev", host)
            _ip("-n", ns, "neigh", "add", SWITCH_IP, "lladdr", SWITCH_MAC, "dev", host)
            for peer in self.spec.workers:
                if peer.id != w.id:
                    _ip("-n", ns, "neigh", "add", peer.ip, "lladdr", peer.mac, "dev", host)

    def close(self) -> None:
        for ns in self.made:
            subprocess.run(["ip", "netns", "del", ns], check=False, capture_output=True)


def _worker(ns: str, spec, worker: int, run: int, link_kind: str, shards: int, results) -> None:
    from host_lib.communicator import CommunicatorConfig, SwitchCommunicator
    from host_lib.engine.links import RawEthernetLink, XdpLink
    from host_lib.engine.udp_link import UdpSocketLink

    try:
        _InNamespace(ns).__enter__()  # this process lives in the worker's namespace
        config = CommunicatorConfig.from_spec(spec, worker, run, silence_timeout=20.0,
                                              shards=shards)
        me = spec.worker(worker)
        if link_kind == "udp":
            link = UdpSocketLink(config.local, config.switch, config.peers)
        elif link_kind == "xdp":
            link = XdpLink(f"h{me.port}", me.udp_port)
        else:
            link = RawEthernetLink(f"h{me.port}", me.ip, me.udp_port, ring=link_kind == "ring")
            assert (link.ring is not None) == (link_kind == "ring")
        retransmissions, out = 0, []
        with SwitchCommunicator(config, link) as comm:
            assert comm.transport.shards == shards
            # a link that steers datagrams to the shard sockets runs the compiled loop on each
            assert all((t._compiled is not None) == (link_kind == "udp")
                       for t in comm.transport.transports)
            for c in range(CALLS):
                out.append(comm.allreduce(inputs(21, worker, c, ELEMENTS), tag="t"))
                retransmissions += comm.last_stats.retransmissions
            out.append(comm.allreduce_int(np.arange(1000, dtype=np.int32) * (worker + 1)))
            out.append(retransmissions)
        results.put((worker, out))
    except BaseException as exc:  # noqa: BLE001 - reported to the test
        results.put((worker, repr(exc)))


@pytest.mark.parametrize("link_kind, shards", [
    ("udp", 1), ("udp", 2), ("ring", 1), ("ring", 2), ("calls", 1),
    pytest.param("xdp", 1, marks=pytest.mark.skipif(not xdp_available(), reason="no AF_XDP")),
    pytest.param("xdp", 2, marks=pytest.mark.skipif(not xdp_available(), reason="no AF_XDP"))])
def test_exact_sums_through_the_switch_on_veth_links(link_kind, shards):
    spec = local_job(1, N, slots=32)
    cluster = VethCluster(spec)
    dataplane = Dataplane(cpu_port=CPU_PORT)
    server = P4RuntimeServer(dataplane, "127.0.0.1:0")
    ports = PortManager(dataplane)
    controller = None
    try:
        with _InNamespace(cluster.switch_ns):
            for w in spec.workers:
                ports.add(w.port, f"sw{w.port}")
        ports.start()
        controller = Controller(f"127.0.0.1:{server.start()}", [w.port for w in spec.workers])
        controller.connect()
        controller.reconcile()
        controller.admit(spec)
        controller.set_loss(0.01, direction="ingress")
        ctx = multiprocessing.get_context("spawn")
        results = ctx.Queue()
        run = new_run_id()
        procs = [ctx.Process(target=_worker, args=(cluster.worker_ns[w.id], spec, w.id, run,
                                                   link_kind, shards, results), daemon=True)
                 for w in spec.workers]
        for p in procs:
            p.start()
        got = dict(results.get(timeout=300) for _ in procs)
        for p in procs:
            p.join(timeout=30)
    finally:
        if controller is not None:
            controller.close()
        ports.stop()
        server.stop(grace=None)
        cluster.close()
    failed = {w: r for w, r in got.items() if isinstance(r, str)}
    assert not failed, failed
    ref = AllreduceReference(N)
    want = [ref([inputs(21, v, c, ELEMENTS) for v in range(N)]) for c in range(CALLS)]
    for w in range(N):
        for c in range(CALLS):
            np.testing.assert_array_equal(got[w][c], want[c])
        np.testing.assert_array_equal(got[w][CALLS], np.arange(1000, dtype=np.int32) * 6)
    assert sum(got[w][-1] for w in range(N)) > 0  # the 1 % loss was recovered from

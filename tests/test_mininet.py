"""SA-ATP end to end on Mininet (topologies/): worker processes in Mininet hosts sum arrays through
bmv2 or the embedded switch over veth links, in a star and in a leaf-spine tree; every result is
checked against the numpy reference, and teardown must leave no process, namespace or link.

Needs root and Mininet (the Python package and Debian's ``mnexec``); the bmv2 cases need
``simple_switch_grpc``. Skipped, with the reason, where any is missing.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from protocol import constants as P
from tests.quant_reference import AllreduceReference
from topologies.switch_process import bmv2_available


def _mininet_unavailable() -> str | None:
    if os.geteuid() != 0:
        return "Mininet needs root"
    try:
        import mininet.net  # noqa: F401
    except ImportError:
        return "Mininet is not importable (pip install -e '.[dev]')"
    missing = [tool for tool in ("mnexec", "ifconfig") if shutil.which(tool) is None]
    if missing:
        return f"{' and '.join(missing)} not on PATH (apt-get install mininet)"
    return None


UNAVAILABLE = _mininet_unavailable()
pytestmark = [pytest.mark.mininet,
              pytest.mark.skipif(UNAVAILABLE is not None, reason=UNAVAILABLE or "")]
TARGETS = ["embedded", pytest.param("bmv2", marks=[
    pytest.mark.bmv2,
    pytest.mark.skipif(not bmv2_available(), reason="simple_switch_grpc is not installed")])]
ELEMENTS = 50_000


def make_calls(seed: int, n: int, elements: int = ELEMENTS) -> dict[int, list[np.ndarray]]:
    """Per worker: float32 gradient-like values (magnitudes vary by block, a few outliers that
    force repairs), int32 values over the whole range, float32 again."""
    calls = {}
    for w in range(n):
        rng = np.random.default_rng((seed, w))
        floats = []
        for _ in range(2):
            scale = np.exp(rng.uniform(-12, 2, -(-elements // P.LANES))).repeat(P.LANES)
            x = rng.standard_normal(elements) * scale[:elements]
            x[rng.integers(0, elements, 3)] *= 1e4
            floats.append(x.astype(np.float32))
        ints = rng.integers(-2**31, 2**31, elements, dtype=np.int64).astype(np.int32)
        calls[w] = [floats[0], ints, floats[1]]
    return calls


def expected(calls: dict[int, list[np.ndarray]]) -> list[np.ndarray]:
    """The quantized float32 reference (a fresh worker's history) and wrapping int32 sums."""
    n = len(calls)
    reference = AllreduceReference(n)
    out = []
    for c in range(len(calls[0])):
        inputs = [calls[w][c] for w in range(n)]
        if inputs[0].dtype == np.int32:
            total = np.sum([x.astype(np.int64) for x in inputs], axis=0)
            out.append(((total + 2**31) % 2**32 - 2**31).astype(np.int32))
        else:
            out.append(reference(inputs))
    return out


def check_exact(run, calls) -> None:
    want = expected(calls)
    for w in calls:
        for c, (got, e) in enumerate(zip(run.results[w], want, strict=True)):
            assert got.dtype == e.dtype
            np.testing.assert_array_equal(got, e, err_msg=f"worker {w}, call {c}")


# -- what teardown must leave as it found it ---------------------------------------------------

def _lines(*cmd: str) -> list[str]:
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.splitlines()


def _named_namespaces() -> set[str]:
    return {line.split()[0] for line in _lines("ip", "netns", "list")}


def _links() -> set[str]:
    """Interfaces of the root namespace ("3: s1-eth1@if2: <...>" -> "s1-eth1")."""
    return {line.split(": ")[1].split("@")[0] for line in _lines("ip", "-o", "link", "show")}


def _our_processes(run_dir: Path) -> dict[int, str]:
    """Switch programs (bmv2, the embedded target) and workers whose command line names
    run_dir: other suites may run switches of their own at the same time."""
    found = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        switch_like = any(s in cmd for s in ("simple_switch_grpc", "-m softswitch",
                                             "softswitch-grpc", "topologies.mininet_worker"))
        if switch_like and str(run_dir) in cmd:
            found[int(proc.name)] = cmd
    return found


def _processes_in(namespaces: set[str]) -> list[int]:
    pids = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            with contextlib.suppress(OSError):
                if os.readlink(proc / "ns" / "net") in namespaces:
                    pids.append(int(proc.name))
    return pids


@contextlib.contextmanager
def cluster_leaving_nothing_behind(topo, run_dir: Path, target: str):
    """A started MininetCluster; on the way out, stop it and check that the named network
    namespaces and the root namespace's links named for the topology's nodes (Mininet names
    an interface ``<node>-eth<i>``; tests in other files may add and remove their own meanwhile),
    the hosts' namespaces and our processes are as before."""
    from topologies.mininet_cluster import MininetCluster

    nodes = set(topo.nodes())

    def ours(names: set[str]) -> set[str]:
        return {name for name in names if name.split("-", 1)[0] in nodes}

    netns_before, links_before = ours(_named_namespaces()), ours(_links())
    host_namespaces: set[str] = set()
    try:
        with MininetCluster(topo, run_dir, target=target) as cluster:
            host_namespaces = {os.readlink(f"/proc/{h.pid}/ns/net") for h in cluster.net.hosts}
            assert all(sw.process.name == target for sw in cluster.net.switches)
            yield cluster
    finally:
        assert ours(_named_namespaces()) == netns_before
        assert ours(_links()) == links_before
        assert _processes_in(host_namespaces) == []
        assert _our_processes(run_dir) == {}


# -- the tests ----------------------------------------------------------------------------------

@pytest.mark.parametrize("target", TARGETS)
def test_star_exact_sums_with_and_without_loss(tmp_path, target):
    from topologies.mininet_topos import StarTopo

    with cluster_leaving_nothing_behind(StarTopo(4), tmp_path, target) as cluster:
        calls = make_calls(1, 4)
        clean = cluster.run_allreduces(calls)
        check_exact(clean, calls)
        assert "SIM" not in clean.counters["ingress"].get("drops", {})
        assert sum(s["repairs"] for w in clean.stats for s in clean.stats[w]) > 0

        cluster.set_loss(0.02)
        calls = make_calls(2, 4)
        lossy = cluster.run_allreduces(calls)
        check_exact(lossy, calls)
        assert lossy.counters["ingress"]["drops"]["SIM"] > 0
        assert lossy.counters["egress"]["drops"]["SIM"] > 0
        assert sum(s["retransmissions"] for w in lossy.stats for s in lossy.stats[w]) > 0
        # No IPv6 and no ARP: the switch saw no frame that is not SA-ATP.
        assert "OTHER" not in cluster.aggregating_switch.counters()["ingress"]["packets"]


@pytest.mark.parametrize("target", TARGETS)
def test_leaf_spine_exact_sums_aggregated_at_the_spine(tmp_path, target):
    from topologies.mininet_topos import LeafSpineTopo

    topo = LeafSpineTopo(leaves=2, hosts_per_leaf=2)
    with cluster_leaving_nothing_behind(topo, tmp_path, target) as cluster:
        calls = make_calls(3, 4)
        run = cluster.run_allreduces(calls)
        check_exact(run, calls)
        chunks = sum(-(-len(x) // P.LANES) for x in calls[0])
        # The spine got every worker's chunks and sent every worker its results...
        assert run.counters["ingress"]["packets"]["DATA"] >= 4 * chunks
        assert run.counters["egress"]["packets"]["RESULT"] >= 4 * chunks
        # ...and each leaf only forwarded the job (transit: counted as matching no job).
        for leaf in topo.leaves:
            seen = cluster.controllers[leaf].counters()["ingress"]["packets"]
            assert seen["DATA"] >= 2 * chunks and seen["RESULT"] >= 2 * chunks


def test_teardown_after_a_failure_leaves_nothing_behind(tmp_path):
    from topologies.local import WorkerFailed
    from topologies.mininet_topos import StarTopo

    with pytest.raises(WorkerFailed, match="allreduce takes float32"), \
            cluster_leaving_nothing_behind(StarTopo(2), tmp_path, "embedded") as cluster:
        cluster.run_allreduces({w: [np.zeros(10, np.float64)] for w in range(2)})

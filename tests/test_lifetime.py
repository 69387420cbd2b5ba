"""No process the project starts outlives its parent (topologies/lifetime.py), whatever signal
ends the parent: a local cluster's switch and workers, and a benchmark section's switch,
torchrun and training processes. Each case starts the parent in a process of its own, waits
until every child it expects exists, sends the signal, and then finds none of them left."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from topologies import lifetime

ROOT = Path(__file__).resolve().parent.parent
SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGKILL]


def _stat(pid: int) -> tuple[int, str, int] | None:
    """(parent pid, state, start time) of a live process, None for a gone or zombie one."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return (None if fields[0] == "Z" else (int(fields[1]), fields[0], int(fields[19])))


def descendants(root: int) -> dict[tuple[int, int], str]:
    """Every live descendant of ``root``: (pid, start time) -> command line."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (stat := _stat(int(entry.name))) is not None:
            parents.setdefault(stat[0], []).append(int(entry.name))
    found, todo = {}, list(parents.get(root, []))
    while todo:
        pid = todo.pop()
        stat = _stat(pid)
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if stat is not None:
            found[(pid, stat[2])] = cmdline
            todo += parents.get(pid, [])
    return found


def alive(process: tuple[int, int]) -> bool:
    stat = _stat(process[0])
    return stat is not None and stat[2] == process[1]   # the same process, not a reused pid


def kill_and_count_survivors(parent: subprocess.Popen, expected: dict[str, int],
                             sig: int, timeout: float = 120) -> dict[tuple[int, int], str]:
    """Wait until ``parent`` has at least ``expected[text]`` descendants whose command line
    holds ``text``, for each text; send ``sig``; return the descendants still alive once the
    parent is gone and the kernel and the parent's cleanup have had up to 30 s."""
    deadline = time.monotonic() + timeout
    while True:
        children = descendants(parent.pid)
        counts = {text: sum(text in c for c in children.values()) for text in expected}
        if all(counts[t] >= n for t, n in expected.items()):
            break
        assert parent.poll() is None, f"the parent ended first:\n{_stderr(parent)}"
        assert time.monotonic() < deadline, f"children never all started: {counts}"
        time.sleep(0.1)
    parent.send_signal(sig)
    try:
        parent.wait(timeout=300)
    except subprocess.TimeoutExpired:
        parent.send_signal(signal.SIGABRT)  # faulthandler writes every thread's stack
        parent.wait(timeout=60)
        pytest.fail(f"the parent did not end within 300 s of {sig.name}:\n{_stderr(parent)}")
    deadline = time.monotonic() + 30
    while any(alive(p) for p in children) and time.monotonic() < deadline:
        time.sleep(0.1)
    return {p: c for p, c in children.items() if alive(p)}


def _sigint_as_a_terminal_sends_it() -> None:
    """In the parent before it starts: SIGINT acted on, as in a foreground program, whatever
    the test's own disposition is (a shell ignores SIGINT in what it runs in the background,
    and Python then leaves it ignored: no KeyboardInterrupt)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start(argv: list[str], cwd: Path, log: Path) -> subprocess.Popen:
    """The parent, its stderr (and its children's) in ``log``: a pipe nobody reads while it
    runs would fill and block whichever of them writes next."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONFAULTHANDLER="1")
    with open(log, "wb") as err:
        parent = subprocess.Popen([sys.executable, *argv], cwd=cwd, env=env,
                                  stdout=subprocess.DEVNULL, stderr=err,
                                  preexec_fn=_sigint_as_a_terminal_sends_it)
    parent.log = log
    return parent


def _stderr(parent: subprocess.Popen) -> str:
    return parent.log.read_text(errors="replace")[-4000:]


CLUSTER = """
    import time

    from topologies.local import LocalCluster, local_job


    def wait(comm, arg):
        time.sleep(600)


    if __name__ == "__main__":
        with LocalCluster([local_job(1, 3, slots=4)], "run") as cluster:
            cluster.run_workers(wait, {1: [None] * 3}, timeout=600)
"""


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
def test_no_process_outlives_a_local_cluster_run(tmp_path, sig):
    """A script that runs a cluster as a library does (no signal handler of its own): its switch
    and its three workers, the multiprocessing children, end with it."""
    (tmp_path / "cluster.py").write_text(textwrap.dedent(CLUSTER))
    parent = start(["cluster.py"], tmp_path, tmp_path / "stderr")
    survivors = kill_and_count_survivors(
        parent, {"-m softswitch": 1, "multiprocessing.spawn": 3}, sig)
    assert survivors == {}


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
def test_no_process_outlives_a_bench_section(tmp_path, sig):
    """``python -m bench --only sa_atp``, stopped once its first run's switch, torchrun and
    four training processes exist."""
    parent = start(["-m", "bench", "--only", "sa_atp", "--out", str(tmp_path / "results.json")],
                   ROOT, tmp_path / "stderr")
    survivors = kill_and_count_survivors(
        parent, {"-m softswitch": 1, "torch.distributed.run": 1, "-u -m experiments.train": 4},
        sig)
    assert survivors == {}
    assert not (tmp_path / "results.json").exists()   # nothing half written


MANY_THREADS = """
    import threading
    import time

    from topologies.switch_process import SwitchProcess, udp_ports

    never = threading.Event()
    for _ in range(200):
        threading.Thread(target=never.wait, daemon=True).start()
    with SwitchProcess(udp_ports([1, 2]), "switch", binary="softswitch-grpc"):
        time.sleep(600)
"""


def catches(pid: int, sig: int) -> bool:
    """Whether process ``pid`` has a handler of its own for ``sig``."""
    status = Path(f"/proc/{pid}/status").read_text()
    caught = int(status.split("SigCgt:")[1].split()[0], 16)
    return bool(caught & (1 << (sig - 1)))


def test_a_switch_ends_with_a_parent_of_many_threads_sigkilled(tmp_path):
    """The kernel sends the switch its death signal once for each thread of the parent as they
    end, a burst of SIGTERMs: the switch's handler, interrupted by the next one, must not hang
    it (one that set a threading.Event did, in a third of this test's runs; the next signal
    ending it at once is tests/softswitch/test_softswitch_ports.py's)."""
    (tmp_path / "parent.py").write_text(textwrap.dedent(MANY_THREADS))
    parent = start(["parent.py"], tmp_path, tmp_path / "stderr")
    deadline = time.monotonic() + 60
    while not (switch := [p for p, c in descendants(parent.pid).items() if "-m softswitch" in c]) \
            or not catches(switch[0][0], signal.SIGTERM):   # its handler is installed
        assert parent.poll() is None, f"the parent ended first:\n{_stderr(parent)}"
        assert time.monotonic() < deadline, "the switch never installed its handler"
        time.sleep(0.05)
    assert kill_and_count_survivors(parent, {"-m softswitch": 1}, signal.SIGKILL) == {}


def test_torchruns_workers_end_with_it_however_it_ends(tmp_path):
    """torchrun killed outright once its two workers exist, as it dies when a signal reaches
    it while it is still starting them: it never stops them, and they end anyway (asked for
    it themselves, or found themselves orphaned when they got to ask)."""
    parent = start(["-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", "-m",
                    "experiments.train", "--comm", "gloo", "--iterations", "100000",
                    "--no-progress", "--log-dir", str(tmp_path / "logs")],
                   ROOT, tmp_path / "stderr")
    survivors = kill_and_count_survivors(parent, {"-u -m experiments.train": 2},
                                         signal.SIGKILL)
    assert survivors == {}


HANGING_CLEANUP = """
    import time

    from topologies import lifetime

    lifetime.exit_on_sigterm()
    try:
        print("ready", flush=True)
        time.sleep(600)
    finally:
        time.sleep(600)  # a cleanup that never ends (a join on a thread blocked in a call)
"""


def test_a_cleanup_that_hangs_after_sigterm_ends_within_the_unwind_bound(tmp_path):
    """After SIGTERM the process unwinds; if its cleanup has not ended UNWIND_S later, it ends
    anyway, with SIGTERM's exit status."""
    (tmp_path / "hang.py").write_text(textwrap.dedent(HANGING_CLEANUP))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "hang.py"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "ready\n"  # the handler is installed
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=lifetime.UNWIND_S + 60) == 128 + signal.SIGTERM
    assert time.monotonic() - sent >= lifetime.UNWIND_S  # the cleanup ran until the bound

"""Child processes that end with their parent, whatever ends it.

A parent ended by SIGKILL runs no cleanup at all, and Python's default SIGTERM ends it without
unwinding its ``with`` blocks: a switch, a worker or a torchrun it started would outlive it, with
init as its parent. So every process the project starts asks the kernel to signal it when its
parent dies (``PR_SET_PDEATHSIG``): a program started with :func:`popen` runs under ``setpriv
--pdeathsig`` (util-linux), a Python child of ``multiprocessing`` calls :func:`die_with_parent`
first; and a command-line entry point calls :func:`exit_on_sigterm`, so that SIGTERM unwinds as
Ctrl-C does and its ``with`` blocks stop what they started, workers before switches.

The kernel sends the signal when the *thread* that started the child ends, not the process:
children are started from the thread that outlives them (the main thread, in this project).
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import threading

_PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int, sig: int = signal.SIGKILL) -> None:
    """In a child: have the kernel send ``sig`` when its parent ends; ``parent`` is the pid the
    parent had, and a child whose parent ended before the request exits at once (no signal
    would ever come)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != parent:
        os._exit(1)


def die_with_launcher(sig: int = signal.SIGKILL) -> None:
    """:func:`die_with_parent` in a process whose launcher cannot ask for it (torchrun starts
    its workers in sessions of their own, with no death signal): the parent it has now, and
    one already orphaned (reparented to init before it got here) exits at once. torchrun
    signalled while it starts its workers can die before it knows them: they outlived it,
    waiting on it, found by tests/test_lifetime.py under load."""
    parent = os.getppid()
    if parent == 1:
        os._exit(1)
    die_with_parent(parent, sig)


def guarded(cmd: list[str], sig: int = signal.SIGTERM) -> list[str]:
    """``cmd`` run so that it gets ``sig`` when the process that starts it ends (as is, where
    util-linux's ``setpriv`` is missing)."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return list(cmd)
    return [setpriv, f"--pdeathsig={signal.Signals(sig).name.removeprefix('SIG')}", "--", *cmd]


def popen(cmd: list[str], sig: int = signal.SIGTERM, **kwargs) -> subprocess.Popen:
    """``subprocess.Popen`` of a command that gets ``sig`` when this process ends."""
    return subprocess.Popen(guarded(cmd, sig), **kwargs)


UNWIND_S = 10.0  # how long the cleanup after a SIGTERM may take before the process ends anyway


def exit_on_sigterm() -> None:
    """Make the first SIGTERM end this process as Ctrl-C does, by unwinding (``SystemExit``),
    so that cleanup runs; a second one ends it at once (children then get their signal from the
    kernel), and so does a cleanup still running UNWIND_S later (one that waits on a thread
    blocked in a call kept a switch alive 30 s after its parent was killed, once under load)."""
    def unwind(signum, _frame):
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        watchdog = threading.Timer(UNWIND_S, os._exit, args=(128 + signum,))
        watchdog.daemon = True
        watchdog.start()
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, unwind)

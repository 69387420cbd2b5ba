"""A policy's planning in a process of its own.

The planning rank plans the next iteration while the current one's gradient is aggregated
(:mod:`host_lib.scheduling.policies.driver`). On a thread of the training process, planning
holds the interpreter's lock for as long as it computes, and the communicator's round loop, in
the same process, waits for it: on the 2-core testbed, SA-ATP's cost model (3-4 ms of CPU a
plan there) lengthened every iteration's communication by 2-3 ms without a straggler. In a
process of its own the plan takes the same CPU time but holds no lock of the training process.

The child is started with ``python -m`` of this module, not forked (the training process holds
torch's and the transport's threads) and not through multiprocessing's spawn (which imports the
training script again). The two talk over two pipes: the policy first, then per plan the
iteration and the history's new rows, answered by the plan or the error it raised, and, once an
iteration's communication is over and the next plan is in, a request to prepare the one after
it (:meth:`Policy.prepare`), answered by nothing (an error it raised comes back with the next
plan). The child ends when its input reaches EOF, so it never outlives the training process,
however that ends.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import threading
import traceback
import weakref

from host_lib.scheduling.policies.base import IterationPlan, Policy, StepHistory

STOP_S = 10.0  # how long a closed planner may take to finish the plan it is computing


class PlannerProcess:
    """Plans with ``policy`` in a child process: :meth:`plan` is ``policy.plan`` (the
    history must only grow between calls, as the exchange's does)."""

    def __init__(self, policy: Policy):
        to_child, self._requests = os.pipe()
        self._answers, from_child = os.pipe()
        path = os.pathsep.join(p for p in sys.path if p)  # it imports what this process does
        self.process = subprocess.Popen(
            [sys.executable, "-m", __name__, str(to_child), str(from_child)],
            pass_fds=(to_child, from_child), stdin=subprocess.DEVNULL,
            env={**os.environ, "PYTHONPATH": path})
        os.close(to_child)
        os.close(from_child)
        self._out = os.fdopen(self._requests, "wb")
        self._in = os.fdopen(self._answers, "rb")
        self._sent = (0, 0)  # the steps and communication rows of the history already sent
        self._writing = threading.Lock()  # plans and preparations come from different threads
        self._finalizer = weakref.finalize(self, _stop, self._out, self._in, self.process)
        self._send(policy)

    def plan(self, iteration: int, history: StepHistory) -> IterationPlan:
        steps, comms = self._sent
        self._send(("plan", iteration, history.steps_since(steps), history.comms_since(comms)))
        self._sent = (len(history), len(history.comm_s))
        try:
            kind, value = pickle.load(self._in)
        except EOFError:
            raise RuntimeError(f"the planner process ended (exit code "
                               f"{self.process.wait()})") from None
        if kind == "error":
            raise RuntimeError(f"the policy failed in the planner process:\n{value}")
        return value

    def prepare(self) -> None:
        """Have the policy prepare its next plan (:meth:`Policy.prepare`), without waiting."""
        self._send(("prepare",))

    def _send(self, message) -> None:
        with self._writing:
            pickle.dump(message, self._out, protocol=pickle.HIGHEST_PROTOCOL)
            self._out.flush()

    def close(self) -> None:
        self._finalizer()


def _stop(out, answers, process: subprocess.Popen) -> None:
    out.close()  # the child's EOF: it ends once it has answered what it was asked
    try:
        process.wait(STOP_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    answers.close()


def serve(requests, answers) -> None:
    """The child's loop: plan and prepare every request until EOF."""
    policy: Policy = pickle.load(requests)
    history = StepHistory(policy.n_workers)
    failed = None  # the error of a preparation, for the next plan's answer
    while True:
        try:
            kind, *request = pickle.load(requests)
        except EOFError:
            return
        if kind == "prepare":
            try:
                policy.prepare(history)
            except Exception:  # noqa: BLE001 - the parent raises it with the next plan
                failed = failed or traceback.format_exc()
            continue
        iteration, steps, comms = request
        for compute_s, samples, measured in steps:
            history.add(compute_s, samples, **measured)
        for comm_s, measured in comms:
            history.add_comm(comm_s, **measured)
        try:
            if failed:
                answer = ("error", failed)
            else:
                answer = ("plan", policy.plan(iteration, history))
        except Exception:  # noqa: BLE001 - the parent raises it
            answer = ("error", traceback.format_exc())
        pickle.dump(answer, answers, protocol=pickle.HIGHEST_PROTOCOL)
        answers.flush()


if __name__ == "__main__":
    with os.fdopen(int(sys.argv[1]), "rb") as requests, os.fdopen(int(sys.argv[2]), "wb") as out:
        serve(requests, out)

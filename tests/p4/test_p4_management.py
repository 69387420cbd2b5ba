"""The controller's reads of aggregators (docs/protocol.md §10) at every run id: a management
request never goes through the run logic of §4.5, so a live aggregator is reported as it is
whatever its run, on both sides of 2^31 and across the wrap, through every read the controller
and ``sa-atp-ctl`` offer, on every target.

The v1model program once compared the carrier frame's run (0) with the held run as a data
packet's: for a held run of 2^31 or more, run 0 is "newer" in serial-number arithmetic, so
every read reported EMPTY for an aggregator holding a COMPLETE chunk."""

from __future__ import annotations

import json

import numpy as np
import pytest

from control_plane import cli
from control_plane.tofino import bfrt
from protocol import constants as P
from tests.p4.packets import Job, job_spec, random_lanes, wrapping_sum
from tests.tofino.targets import ModelTarget, switch_config

HALF = 2**31
# Runs next to the edges of serial-number arithmetic, then random 32-bit ones on either side.
EDGES = (0, 1, HALF - 1, HALF, HALF + 1, 2**32 - 2, 2**32 - 1)
_rng = np.random.default_rng(39)
RANDOM = tuple(int(r) for r in _rng.integers(1, HALF, 3)) + \
    tuple(int(r) for r in _rng.integers(HALF, 2**32, 3))
# One job's runs in the order a job makes them (each newer than the one before, serial-number
# arithmetic): over 2^31 and across the wrap, twice.
SUCCESSIVE = (HALF - 2, HALF - 1, HALF, HALF + 7, 2**32 - 1, 0, 3, HALF - 1, HALF + 1,
              2**32 - 5, 2**32 - 1, 1)


def test_the_runs_cover_both_halves_and_follow_each_other():
    """The runs the tests use are what their names say (a precondition, checked)."""
    assert {r >= HALF for r in RANDOM} == {True, False}
    steps = [(b - a) % 2**32 for a, b in zip(SUCCESSIVE, SUCCESSIVE[1:], strict=False)]
    assert all(0 < s < HALF for s in steps)
    assert sum(b < a for a, b in zip(SUCCESSIVE, SUCCESSIVE[1:], strict=False)) == 2  # wraps


class Expected:
    """What one slot of the job holds, by numpy, and the fields a read must report."""

    def __init__(self, index: int, state: P.SlotState, run: int, chunk: int, bitmap: int,
                 helper: int, lanes):
        self.index, self.state, self.run, self.chunk = index, state, run, chunk
        self.bitmap, self.count, self.helper = bitmap, bin(bitmap).count("1"), helper
        self.lanes = tuple(int(v) for v in lanes)

    def check(self, read) -> None:
        """``read``: an AggregatorState, or its fields as ``sa-atp-ctl slot`` prints them."""
        got = read if isinstance(read, dict) else vars(read)
        fields = ("index", "state", "run", "chunk", "bitmap", "count", "helper")
        assert {k: got[k] for k in fields} == {k: getattr(self, k) for k in fields}
        if self.lanes:
            assert tuple(got["lanes"]) == self.lanes


def fill(job: Job, run: int, base: int, rng) -> dict[int, Expected]:
    """Chunks 0-3 of ``run``: COMPLETE, AGGREGATING, TAKEN (worker 1 the helper), and a
    borrowed slot AGGREGATING in the pool's lanes. Returns what each slot must read as."""
    rows = random_lanes(rng, 7)
    for w in range(3):
        job.data(w, 0, rows[w], run=run)
    job.data(0, 1, rows[3], run=run)
    job.data(0, 2, rows[4], run=run)
    job.data(1, 2, rows[5], run=run)
    [(_, partial)] = [o for o in job.send(1, P.Op.TAKEOVER, 2, run=run) if o[0] == 2]
    assert partial.header.op == P.Op.PARTIAL
    job.data(2, 3, rows[6], run=run)
    S = P.SlotState
    at = [2 * (base + s) for s in range(4)]
    return {0: Expected(at[0], S.COMPLETE, run, 0, 0b111, 0, wrapping_sum(rows[:3])),
            1: Expected(at[1], S.AGGREGATING, run, 1, 0b001, 0, rows[3]),
            2: Expected(at[2], S.TAKEN, run, 2, 0b011, 1, wrapping_sum(rows[4:6])),
            # a borrowed slot: its sum is in the pool's lanes (checked there)
            3: Expected(at[3], S.AGGREGATING, run, 3, 0b100, 0, ()),
            "pool": rows[6]}


def switch_toml(ports) -> str:
    config = switch_config(ports)
    return (f"[switch]\ncpu_port = {config.cpu_port}\n"
            + "".join(f"[[ports]]\nport = {p.port}\n" for p in config.ports)
            + "".join(f"[[loop_ports]]\nport = {p.port}\n" for p in config.loop_ports))


@pytest.fixture
def sa_atp_ctl_slot(target, controller, tmp_path, monkeypatch, capsys):
    """``sa-atp-ctl slot JOB SLOT`` against the target, as its own process would run it: a
    second controller, from the state file the fixture's controller saves."""
    state = tmp_path / "state.json"
    if isinstance(target, ModelTarget):
        config = tmp_path / "switch.toml"
        config.write_text(switch_toml(target.ports))
        monkeypatch.setattr(bfrt, "import_bfrt_grpc", lambda: target.client)
        args = ["--target", "tofino", "--switch", "tofino", "--switch-config", str(config)]
    else:   # P4Runtime: primary while it runs, then the fixture's controller again
        args = ["--switch", target.address, "--election-id", "2"]

    def slot(job_id: int, slot: int) -> list[dict]:
        controller.save_state(state)
        capsys.readouterr()
        assert cli.main([*args, "--state", str(state), "slot", str(job_id), str(slot)]) == 0
        if not isinstance(target, ModelTarget):  # the fixture's controller primary again
            controller.conn.wait_primary()
        return json.loads(capsys.readouterr().out)

    return slot


def check_every_read(controller, sa_atp_ctl_slot, job: Job, expected: dict) -> None:
    placed = controller.jobs[job.spec.id]
    for slot in range(4):
        a, b = controller.read_slot(job.spec.id, slot)
        expected[slot].check(a if expected[slot].index % 2 == 0 else b)
    pool = controller.desired.allocator.pool_range()[0]   # chunk 3's lanes: pool slot 0, set 0
    [lanes] = controller.aggregator.read(controller.conn, [pool], controller.pipe_of(placed.spec))
    assert lanes.held_by == expected[3].index and lanes.holder & P.POOL_HELD
    assert lanes.lanes == tuple(int(v) for v in expected["pool"])
    for slot in (0, 2):
        expected[slot].check(sa_atp_ctl_slot(job.spec.id, slot)[0])
    # the reads changed nothing: a probe still gets the stored result
    [(_, copy)] = job.send(0, P.Op.DATA, 0, run=expected[0].run, flags=P.Flag.PROBE,
                           scale=0x8000)
    assert copy.header.flags & P.Flag.COPY and copy.header.run == expected[0].run
    assert tuple(int(v) for v in copy.lanes) == expected[0].lanes


def borrowing_job(target, controller) -> Job:
    controller.resize_pool(2)
    return Job(job_spec(1, 3, slots=3, borrow=1), target)


@pytest.mark.parametrize("run", EDGES + RANDOM, ids=lambda r: f"{r:#010x}")
def test_every_read_reports_a_live_aggregator_as_it_is_at_any_run(target, controller, run,
                                                                    sa_atp_ctl_slot):
    job = borrowing_job(target, controller)
    placed = controller.admit(job.spec)
    expected = fill(job, run, placed.slot_base, np.random.default_rng(run))
    check_every_read(controller, sa_atp_ctl_slot, job, expected)
    controller.remove(1)   # reads the pool's lanes to free those the job's chunk holds
    pool = controller.desired.allocator.pool_range()[0]
    assert controller.aggregator.read(controller.conn, [pool])[0].holder == 0


def test_a_jobs_successive_runs_read_right_across_half_the_range_and_the_wrap(
        target, controller, sa_atp_ctl_slot):
    job = borrowing_job(target, controller)
    placed = controller.admit(job.spec)
    rng = np.random.default_rng(5)
    for run in SUCCESSIVE:
        expected = fill(job, run, placed.slot_base, rng)
        check_every_read(controller, sa_atp_ctl_slot, job, expected)

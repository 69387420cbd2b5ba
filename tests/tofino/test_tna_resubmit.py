"""Sums when resubmitted packets are reordered or lost between passes 1 and 2.

Nothing Intel publishes promises that resubmission keeps packets of different ingress ports in
their pass-1 order, or drops none. The program's lanes sit behind a gate (lanes.p4;
docs/tofino.md, "Order-free sums") that decides in pass 2 whether a contribution's lanes are
stored, added or already in, and a sum leaves only when the lanes hold every contribution the
state counts. Until the gate (commit 91d959f and before), pass 1 decided store, add and read,
and the cases and schedules below failed (they were strict xfails); the last tests show that
they still catch a gate that forgets whose lanes are in."""

from types import SimpleNamespace

import numpy as np
import pytest

from control_plane.tofino.controller import TofinoController
from protocol import constants as P
from protocol.codec import decode_frame
from tests.p4.packets import Job, job_spec, random_lanes, wrapping_sum
from tests.tofino.fake_bfrt import FakeClient
from tests.tofino.fake_switch import FakeSwitch
from tests.tofino.model import register_actions
from tests.tofino.model.pipeline import TnaModel
from tests.tofino.schedules import check_sums, contribution
from tests.tofino.targets import switch_config


def admitted_job(workers: int = 3, slots: int = 4, actions=None,
                 fan_in: int | None = None) -> tuple[TnaModel, Job, TofinoController]:
    """The model (with ``actions`` for its RegisterActions), its controller and one job it
    admitted (``fan_in`` contributions complete a chunk; all by default), the job's workers on
    ports 1, 2, ..."""
    fake = FakeSwitch()
    model = TnaModel(fake, actions=actions)
    ctl = TofinoController("tofino", switch_config(tuple(range(1, workers + 1))),
                           client=FakeClient({"tofino": fake})).connect()
    ctl.reconcile()
    spec = job_spec(1, workers, slots=slots, fan_in=fan_in)
    ctl.admit(spec)
    return model, Job(spec, SimpleNamespace(send=model.process)), ctl


def results(outs) -> list:
    return [decode_frame(frame) for _, frame in outs]


def assert_every_result_is_the_sum_its_bitmap_names(frames, rows) -> None:
    assert frames, "no result left the switch"
    for f in frames:
        if f.header.op == P.Op.RESULT:
            named = [rows[w] for w in range(len(rows)) if f.header.bitmap >> w & 1]
            np.testing.assert_array_equal(f.lanes, wrapping_sum(named))


def test_a_first_contribution_whose_pass_2_comes_last():
    model, job, _ = admitted_job()
    rows = random_lanes(np.random.default_rng(1), 3)
    model.process(1, job.frame(0, P.Op.DATA, 0, rows[0], scale=0x8000), hold_resubmit=True)
    outs = []
    for w in (1, 2):
        outs += model.process(w + 1, job.frame(w, P.Op.DATA, 0, rows[w], scale=0x8000))
    outs += model.release_resubmitted()
    assert_every_result_is_the_sum_its_bitmap_names(results(outs), rows)


def test_a_contribution_whose_pass_2_is_lost_is_retransmitted():
    model, job, _ = admitted_job()
    rows = random_lanes(np.random.default_rng(2), 3)
    model.process(1, job.frame(0, P.Op.DATA, 0, rows[0], scale=0x8000), hold_resubmit=True)
    model.resubmitted.clear()                        # lost between passes 1 and 2
    outs = []
    for w in (1, 2, 0):                              # worker 0 retransmits at its timeout
        outs += model.process(w + 1, job.frame(w, P.Op.DATA, 0, rows[w], scale=0x8000))
    assert_every_result_is_the_sum_its_bitmap_names(results(outs), rows)


def test_a_late_workers_copy_waits_for_the_lanes_the_chunk_counts():
    """Two of three complete a chunk (k-of-n), the first one's pass 2 held: the chunk is
    complete but its lanes short, so neither the second's result nor the late third worker's
    copy leaves; once the held pass 2 adds its lanes, the result does, and the third's
    retransmission gets a copy of it, which leaves it out."""
    model, job, _ = admitted_job(fan_in=2)
    rows = random_lanes(np.random.default_rng(5), 3)
    send = [job.frame(w, P.Op.DATA, 0, rows[w], scale=0x8000) for w in range(3)]
    model.process(1, send[0], hold_resubmit=True)
    assert model.process(2, send[1]) == []
    assert model.process(3, send[2]) == []           # late: a copy, of lanes not yet whole
    [result, *_] = frames = results(model.release_resubmitted())
    assert (result.header.op, result.header.bitmap) == (P.Op.RESULT, 0b011)
    [copy] = results(model.process(3, send[2]))
    assert copy.header.flags & P.Flag.COPY and copy.header.bitmap == 0b011
    assert_every_result_is_the_sum_its_bitmap_names(frames + [copy], rows)


def test_a_helpers_result_leaves_the_lanes_holding_exactly_its_workers():
    """k-of-n (two of three): worker 0's pass 2 comes after the takeover, so no partial
    leaves; the helper completes from its own and worker 2's contributions (bitmap 0b110).
    Its stored result makes the gate's workers exactly 0b110, not 0b110 with worker 0's lanes
    still OR-ed in: a worker that missed the result gets a copy of it."""
    model, job, _ = admitted_job(fan_in=2)
    rows = random_lanes(np.random.default_rng(9), 3)
    port = [job.spec.worker(w).port for w in range(3)]
    model.process(port[0], job.frame(0, P.Op.DATA, 0, rows[0], scale=0x8000),
                  hold_resubmit=True)
    assert model.process(port[1], job.frame(1, P.Op.TAKEOVER, 0)) == []   # lanes short
    assert model.release_resubmitted() == []
    [bounce] = results(model.process(port[2], job.frame(2, P.Op.DATA, 0, rows[2], scale=0x8000)))
    assert (bounce.header.op, bounce.header.reason) == (P.Op.BOUNCE, P.Bounce.TAKEN)
    total = rows[1] + rows[2]
    stored = results(model.process(port[1], job.frame(1, P.Op.HELPER_RESULT, 0, total,
                                                      bitmap=0b110, count=2, exp=0,
                                                      scale=0x8000)))
    assert {f.header.bitmap for f in stored} == {0b110}
    [copy] = results(model.process(port[2], job.frame(2, P.Op.DATA, 0, rows[2], scale=0x8000)))
    assert copy.header.flags & P.Flag.COPY and copy.header.bitmap == 0b110
    assert_every_result_is_the_sum_its_bitmap_names(stored + [copy], rows)


def every_worker_sends(model: TnaModel, job: Job, rows) -> list:
    """Each worker's contribution to chunk 0 in turn, no pass held; what leaves, decoded."""
    outs = []
    for w in range(len(rows)):
        outs += model.process(w + 1, job.frame(w, P.Op.DATA, 0, rows[w], scale=0x8000))
    return results(outs)


def test_in_order_passes_give_the_sum():
    """The same three contributions with no pass held: the sum (the tests above differ from
    this one only in the order or loss of a pass 2)."""
    model, job, _ = admitted_job()
    rows = random_lanes(np.random.default_rng(1), 3)
    frames = every_worker_sends(model, job, rows)
    assert [f.header.op for f in frames] == [P.Op.RESULT] * 3
    assert_every_result_is_the_sum_its_bitmap_names(frames, rows)


class ResubmitSchedule:
    """Hosts and a switch whose passes 2 are held, released in any order, or lost: one job of
    ``workers`` workers, each contribution the same in every send (``contribution``)."""

    def __init__(self, seed: int, held: float, workers: int = 3, slots: int = 2, actions=None):
        self.model, self.job, _ = admitted_job(workers, slots, actions)
        self.spec = self.job.spec
        self.rng = np.random.default_rng(seed)
        self.workers = workers
        self.held = held  # the share of sends whose pass 2 is held
        self.completed: set[int] = set()  # chunks with a result that names every worker

    def send(self, w: int, chunk: int, hold: bool) -> None:
        frame = self.job.frame(w, P.Op.DATA, chunk, contribution(1, w, chunk), scale=0x8000)
        self._check(self.model.process(self.spec.worker(w).port, frame, hold_resubmit=hold))

    def release(self) -> None:
        """A held pass 2, any of them: resubmission need not keep the order of pass 1."""
        index = int(self.rng.integers(len(self.model.resubmitted)))
        self._check(self.model.release_resubmitted(index))

    def lose(self) -> None:
        self.model.resubmitted.pop(int(self.rng.integers(len(self.model.resubmitted))))

    def _check(self, outs) -> None:
        frames = [(port, decode_frame(out)) for port, out in outs]
        check_sums(frames, self.workers)
        everyone = (1 << self.workers) - 1
        self.completed |= {f.header.chunk for _, f in frames
                           if f.header.op == P.Op.RESULT and f.header.bitmap == everyone}

    def round(self, chunks: range, steps: int) -> None:
        """Random sends of ``chunks`` (``held`` of them with pass 2 held), releases and losses
        of held passes 2, then the hosts' retransmissions until every chunk has its result.
        Every pass 2 held is released or lost before the hosts retransmit: resubmission may
        reorder and drop, but it does not hold a packet for a host's timeout, let alone until
        the aggregator sums its next chunk (on Tofino 1 the order-free design relies on that:
        docs/tofino.md, Order-free sums)."""
        for _ in range(steps):
            r = self.rng.random()
            if self.model.resubmitted and r < 0.25:
                self.release()
            elif self.model.resubmitted and r < 0.35:
                self.lose()
            else:
                w, chunk = int(self.rng.integers(self.workers)), int(self.rng.choice(chunks))
                self.send(w, chunk, hold=bool(self.rng.random() < self.held))
        while self.model.resubmitted:
            if self.rng.random() < 0.75:
                self.release()
            else:
                self.lose()
        for _ in range(3):  # every worker retransmits what has no result yet
            for chunk in chunks:
                for w in range(self.workers):
                    if chunk not in self.completed:
                        self.send(w, chunk, hold=False)


def two_rounds(schedule: ResubmitSchedule) -> None:
    """Two rounds of the job's chunks, the second in the aggregators of the first: every
    chunk ends with a result from every worker once the hosts retransmit."""
    window = 2 * schedule.spec.window  # chunks 0..window-1 use every aggregator once
    for first in (0, window):
        chunks = range(first, first + window)
        schedule.round(chunks, steps=40)
        assert set(chunks) <= schedule.completed, sorted(set(chunks) - schedule.completed)


@pytest.mark.parametrize("seed", range(4))
def test_random_schedules_of_reordered_and_lost_passes_2(seed):
    """Half the passes 2 held, released in random order or lost: every result is numpy's sum
    of the contributions its bitmap names, and every chunk gets its result."""
    two_rounds(ResubmitSchedule(seed, held=0.5))


@pytest.mark.parametrize("seed", range(4))
def test_the_same_schedules_with_no_pass_2_held(seed):
    """The schedules above with every pass 2 at once: what the design as built does right, so
    that those fail only for the order and loss of passes 2."""
    schedule = ResubmitSchedule(seed, held=0.0)
    two_rounds(schedule)
    assert schedule.completed == set(range(4 * schedule.spec.window))


def test_a_gate_that_forgets_whose_lanes_are_in_fails_the_schedules():
    """The schedules catch a gate that never records a worker's lanes: a retransmission then
    adds them again, and the lanes never match what the chunk counts."""
    forgetful = register_actions.registry()
    forgetful["lanes_gate"]["lanes_gate_join"] = lambda cell, phv: (
        ((cell[0], cell[1]), cell[1]) if cell[0] == phv.gate_id else ((phv.gate_id, 0), 0))
    forgetful["lanes_gate"]["lanes_gate_join_same"] = register_actions.lanes_gate_read
    with pytest.raises(AssertionError):
        for seed in range(4):
            two_rounds(ResubmitSchedule(seed, held=0.5, actions=forgetful))


def test_a_job_in_the_slots_of_a_removed_one_sums_from_nothing():
    """Removing a job zeroes its aggregators' generations, so the next job in its slots
    counts its aggregations from 1 again, as the removed one did: the controller clears the
    lanes' gate with them, or the new job's contributions would find their workers in
    already (read, not added) and the lanes the old job's."""
    model, job, ctl = admitted_job(slots=1)
    every_worker_sends(model, job, random_lanes(np.random.default_rng(3), 3))
    ctl.remove(job.spec.id)
    spec = job_spec(2, 3, slots=1)
    ctl.admit(spec)
    again = Job(spec, SimpleNamespace(send=model.process))
    new_rows = random_lanes(np.random.default_rng(4), 3)
    frames = every_worker_sends(model, again, new_rows)
    assert [f.header.op for f in frames] == [P.Op.RESULT] * 3
    assert_every_result_is_the_sum_its_bitmap_names(frames, new_rows)

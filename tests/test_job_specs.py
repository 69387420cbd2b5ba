"""Job spec parsing, validation and slot allocation (no switch needed)."""

from dataclasses import replace
from pathlib import Path

import pytest

from control_plane.allocation import Allocator
from protocol import constants as P
from protocol.jobspec import JobSpec, SpecError, WorkerSpec, load_spec, parse_spec

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "jobs" / "four_workers.toml"


def spec_text(job_extra: str = "", worker_extra: str = "", workers: int = 2) -> str:
    text = f'[job]\nid = 3\nslots = 8\n{job_extra}\n'
    for i in range(workers):
        text += (f'[[workers]]\nid = {i}\nport = {i + 1}\nmac = "02:00:00:00:00:0{i + 1}"\n'
                 f'ip = "10.0.0.{i + 1}"\n{worker_extra if i == 0 else ""}\n')
    return text


def test_example_spec_parses_to_what_it_says():
    spec = load_spec(EXAMPLE)
    assert (spec.id, spec.slots, len(spec.workers)) == (7, 64, 4)
    assert spec.workers[2] == WorkerSpec(2, 3, "02:00:00:00:00:03", "10.0.0.3", P.UDP_PORT)
    assert spec.effective_fan_in == 4 and spec.effective_expected == 0b1111


@pytest.mark.parametrize("job_extra, worker_extra, message", [
    ("slots = 9", "", "not valid TOML"),
    ("colour = 1", "", "unknown keys \\['colour'\\]"),
    ("", "colour = 1", "workers\\[0\\]: unknown keys"),
    ("fan_in = 3", "", "job.fan_in must be an integer in 1..2"),
    ("fan_in = 0", "", "job.fan_in"),
    ("expected = 4", "", "expected set 0x4 must be a non-empty subset"),
    ("switch_ip = \"10.0.0\"", "", "job.switch_ip is not an IPv4 address"),
    ("switch_mac = \"zz\"", "", "job.switch_mac is not a MAC address"),
    ("", "udp_port = 70000", "workers\\[0\\].udp_port"),
])
def test_bad_specs_are_rejected_naming_the_field(job_extra, worker_extra, message):
    with pytest.raises(SpecError, match=message):
        parse_spec(spec_text(job_extra, worker_extra))


@pytest.mark.parametrize("mutate, message", [
    (lambda t: t.replace("slots = 8", f"slots = {P.NUM_SLOTS + 1}"), "job.slots"),
    (lambda t: t.replace("slots = 8", "slots = 0"), "job.slots"),
    (lambda t: t.replace("id = 3", "id = 70000"), "job.id"),
    (lambda t: t.replace("id = 1\n", "id = 0\n"), "worker id 0 appears twice"),
    (lambda t: t.replace("id = 1\n", "id = 32\n"), "workers\\[1\\].id"),
    (lambda t: t.replace('ip = "10.0.0.1"', 'ip = "300.0.0.1"'), "workers\\[0\\].ip"),
    (lambda t: t.replace('mac = "02:00:00:00:00:02"', 'mac = "02:00:00:00:00:01"')
     .replace('ip = "10.0.0.2"', 'ip = "10.0.0.1"'), "share MAC/IP/UDP port"),
    (lambda t: t.split("[[workers]]")[0], "missing \\[\\[workers\\]\\]"),
    (lambda t: t.replace("[job]\nid = 3\n", "[job]\n"), "missing keys \\['id'\\]"),
    (lambda t: t.replace('port = 1\n', 'port = "one"\n'), "workers\\[0\\].port"),
])
def test_malformed_specs(mutate, message):
    with pytest.raises(SpecError, match=message):
        parse_spec(mutate(spec_text()))


def test_unknown_switch_ports_are_rejected():
    spec = parse_spec(spec_text())
    spec.validate(known_ports={1, 2})
    with pytest.raises(SpecError, match="port 2 is not a port of the switch"):
        spec.validate(known_ports={1, 3})


def test_missing_spec_file_is_a_clear_error(tmp_path):
    with pytest.raises(SpecError, match="cannot read job spec"):
        load_spec(tmp_path / "nope.toml")


def make(job_id: int, slots: int) -> JobSpec:
    return JobSpec(job_id, slots, (WorkerSpec(0, 1, "02:00:00:00:00:01", "10.0.0.1"),))


def test_allocations_are_disjoint_and_reused_first_fit():
    alloc = Allocator(num_slots=100, max_jobs=8)
    a = alloc.allocate(make(1, 30))
    alloc.add(a)
    b = alloc.allocate(make(2, 50))
    alloc.add(b)
    assert (a.slot_base, b.slot_base) == (0, 30)
    assert set(a.aggregator_range()).isdisjoint(b.aggregator_range())
    assert a.job_index != b.job_index and a.group != b.group
    with pytest.raises(SpecError, match="asks for 30 slots but no free range .*20 of 100"):
        alloc.allocate(make(3, 30))
    alloc.remove(1)
    c = alloc.allocate(make(3, 25))
    assert c.slot_base == 0 and c.job_index == a.job_index
    with pytest.raises(SpecError, match="already admitted"):
        alloc.allocate(make(2, 1))


def test_slots_are_allocated_per_pipe_and_job_indices_switch_wide():
    """Jobs of different pipes hold the same slots (each pipe's registers are its own); a
    full pipe refuses a job that another pipe still takes."""
    alloc = Allocator(num_slots=100, max_jobs=8)
    pipes = {1: 0, 2: 1, 3: 0, 4: 1, 5: 0}
    pipe_of = lambda spec: pipes[spec.id]  # noqa: E731
    placed = {}
    for job_id, slots in ((1, 60), (2, 60), (3, 40), (4, 30)):
        placed[job_id] = alloc.allocate(make(job_id, slots), pipe_of)
        alloc.add(placed[job_id])
    assert {j: p.slot_base for j, p in placed.items()} == {1: 0, 2: 0, 3: 60, 4: 60}
    assert len({p.job_index for p in placed.values()}) == 4
    with pytest.raises(SpecError, match="no free range of that size is left in pipe 0 "
                                        "\\(0 of 100"):
        alloc.allocate(make(5, 1), pipe_of)
    pipes[5] = 1
    assert alloc.allocate(make(5, 10), pipe_of).slot_base == 90


def test_job_indices_run_out_cleanly():
    alloc = Allocator(num_slots=100, max_jobs=3)
    for j in (1, 2):
        alloc.add(alloc.allocate(make(j, 1)))
    with pytest.raises(SpecError, match="no job index left"):
        alloc.allocate(make(9, 1))


def test_membership_changes_are_validated():
    spec = parse_spec(spec_text(workers=3))
    assert spec.with_membership(fan_in=2).effective_fan_in == 2
    assert spec.with_membership(expected=0b011, fan_in=2).effective_expected == 0b011
    with pytest.raises(SpecError, match="fan-in 3 exceeds the 2 expected"):
        spec.with_membership(expected=0b011)


def test_specs_round_trip_through_toml():
    spec = load_spec(EXAMPLE).with_membership(fan_in=3, expected=0b0111)
    assert parse_spec(spec.to_toml()) == spec
    spec = JobSpec(5, 2, (WorkerSpec(0, 1, "02:00:00:00:00:01", "10.0.0.1", 4000),),
                   inband_fanin=True)
    assert parse_spec(spec.to_toml()) == spec


def test_borrowing_jobs_share_the_pool_and_own_ranges_stay_below_it():
    alloc = Allocator(num_slots=100, max_jobs=8, pool_slots=20)
    a = alloc.allocate(replace(make(1, 30), borrow=20))
    alloc.add(a)
    b = alloc.allocate(replace(make(2, 25), borrow=5))
    alloc.add(b)
    assert a.spec.window == 50 and (a.slot_base, b.slot_base) == (0, 50)
    assert a.pool_base == b.pool_base == 80
    assert alloc.pool_range() == range(160, 200)
    assert set(alloc.pool_range()).isdisjoint(set(a.aggregator_range()) | set(b.aggregator_range()))
    with pytest.raises(SpecError, match="asks for 1 slots but no free range .*0 of 80"):
        alloc.allocate(make(3, 1))  # 80 slots below the pool, all taken
    with pytest.raises(SpecError, match="borrows 21 slots but the switch's shared pool has 20"):
        alloc.allocate(replace(make(4, 1), borrow=21))
    with pytest.raises(SpecError, match="jobs \\[1, 2\\] borrow from the pool"):
        alloc.resize_pool(10)


def test_the_pool_cannot_grow_into_admitted_ranges():
    alloc = Allocator(num_slots=100, max_jobs=8)
    alloc.add(alloc.allocate(make(1, 90)))
    with pytest.raises(SpecError, match="would start at slot 80, inside .*reach slot 89"):
        alloc.resize_pool(20)
    alloc.resize_pool(10)
    assert alloc.pool_range() == range(180, 200)
    with pytest.raises(SpecError, match="pool_slots must be an integer in 0..100"):
        Allocator(num_slots=100, pool_slots=101)


def test_borrow_is_parsed_and_validated():
    spec = parse_spec(spec_text("borrow = 24"))
    assert (spec.slots, spec.borrow, spec.window) == (8, 24, 32)
    assert parse_spec(spec.to_toml()) == spec
    with pytest.raises(SpecError, match="job.borrow must be an integer in 0..4088"):
        parse_spec(spec_text("borrow = 4089"))

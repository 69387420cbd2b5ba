"""`python -m sim --quick` end to end (what CI runs of `make sim`): it writes every study, and
its replay of the testbed's quick scenarios matches the committed testbed iteration times
(docs/results/results.csv) within the calibration tolerance for every method."""

from __future__ import annotations

import csv
import json

import pytest

from experiments.launch import METHODS
from sim import __main__ as sim_main
from sim.calibration import TOLERANCE
from sim.studies import studies
from sim.workloads import resnet50


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("sim")
    sim_main.main(["--quick", "--out", str(out)])
    return out


def rows(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def test_calibration_matches_the_testbed_for_every_method(quick):
    """Every method but k-of-n: whether its k rises during a run hangs on which workers'
    samples each update happened to sum (docs/simulation.md §4), so its iteration time at a
    straggler is a draw (56 or 79 ms at static 3x in two committed harness runs), which one
    testbed run samples once."""
    calibration = rows(quick / "calibration.csv")
    assert {r["method"] for r in calibration} == set(METHODS)
    for r in calibration:
        if r["method"] == "k-of-n" and r["scenario"] != "none":
            continue
        assert abs(float(r["sim_ms"]) / float(r["testbed_ms"]) - 1) <= TOLERANCE, r


def test_the_quick_variant_writes_every_study(quick):
    written = rows(quick / "studies.csv")
    for study in studies(quick=True):
        assert (quick / f"{study.name}.png").stat().st_size > 0
        expected = {(str(c.x), c.method) for c in study.cases}
        assert {(r["x"], r["method"]) for r in written if r["study"] == study.name} == expected
    for name in ("summary.md", "calibration.md", "calibration.png"):
        assert (quick / name).stat().st_size > 0
    assert json.loads((quick / "efficiency.json").read_text())["fit"]["rho"] >= 0


def test_no_synchronous_iteration_beats_its_slowest_compute(quick):
    """Plain in-network aggregation waits for the slowest worker: at least its step time."""
    step = resnet50().profile.time(64)
    for r in rows(quick / "studies.csv"):
        if r["study"] == "factor" and r["method"] == "switch":
            assert float(r["iter_ms"]) >= float(r["x"]) * step * 1e3

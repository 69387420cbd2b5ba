"""`make bench`'s harness calls (bench/softswitch.py), which the simulator's testbed replay takes
its switch's rate and its hosts' turnaround from: they run against the harness they measure
(its padded gradient, at each slot budget it gives that job), and say so in the summary."""

import pytest

from bench import softswitch
from experiments import digits
from experiments.harness import SCENARIOS
from protocol import constants as P


@pytest.mark.slow
def test_the_harness_calls_run_the_slot_budget_gradient_at_both_budgets():
    result = softswitch.harness_calls(calls=2, gap_s=0.0)
    scenario = SCENARIOS["slot-budget"]
    elements = sum(p.numel() for p in digits.model().parameters()) + scenario.pad_gradient
    assert result["elements"] == elements == 2410 + 32000
    assert result["chunks"] * P.LANES >= elements > (result["chunks"] - 1) * P.LANES
    assert set(result["call_s"]) == {"64", str(scenario.slots)}
    assert all(t > 0 for t in result["call_s"].values())
    assert any("8 slots" in line for line in softswitch.summary(
        {"aggregating": {"softswitch_pps": 1.0, "ratio_to_bmv2": None},
         "complete": {"softswitch_pps": 1.0, "ratio_to_bmv2": None},
         "through_ports_pps": 1.0, "harness_calls": result}))

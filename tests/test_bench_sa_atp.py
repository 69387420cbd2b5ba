"""`make bench`'s SA-ATP section end to end on one scenario and a few iterations: it runs against
the harness it drives (it once stopped at its first run when the harness's signature changed,
and nothing noticed), and its ratios and bound are what its own runs and the profile say."""

import pytest

from bench import sa_atp
from experiments.stragglers import PROFILES, StepTimeProfile


@pytest.mark.slow
def test_the_sa_atp_section_runs_and_reports_its_own_runs(monkeypatch):
    monkeypatch.setattr(sa_atp, "SCENARIOS", ("static-3x",))
    result = sa_atp.run(iterations=4)
    row = result["scenarios"]["static-3x"]
    stats = row["methods"]
    assert set(stats) == set(sa_atp.METHODS)
    plain = stats["switch"]["iter_mean_ms"]
    for method, s in stats.items():
        assert row["vs_plain"][method] == round(s["iter_mean_ms"] / plain, 3)
    # the bound's compute: the total work over the total speed, worker 3 three times slower
    p = StepTimeProfile.load(PROFILES, sa_atp.MODEL)
    balanced = (p.a * sa_atp.GLOBAL_BATCH + 4 * p.c) / (1 + 1 + 1 + 1 / 3)
    assert row["bound_compute_ms"] == round(balanced * 1e3, 2)
    assert row["bound_ms"] == pytest.approx(row["bound_compute_ms"] + row["bound_comm_ms"],
                                            abs=0.02)
    assert any(line.startswith("static-3x: switch") for line in sa_atp.summary(result))

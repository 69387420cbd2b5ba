"""Reading training logs into runs and tables (experiments/results.py), and the policy harness end
to end: one command, a small scenario matrix, the CSV, the summary and the plots."""

from __future__ import annotations

import csv
import json
import shutil

import numpy as np
import pytest

from experiments.results import load_run, median_rows, overview_table, scenario_tables, summary


def write_logs(path, ends, compute, accuracy_at=None):
    """rank*.jsonl as experiments/train.py writes them: ``ends[i][r]`` wall-clock end of iteration
    i on rank r (the job started at 100.0), ``compute[i][r]`` its compute time."""
    path.mkdir(parents=True, exist_ok=True)
    for r in range(len(ends[0])):
        with open(path / f"rank{r}.jsonl", "w") as f:
            for i, (end, comp) in enumerate(zip(ends, compute, strict=True)):
                rec = {"it": i, "end": end[r], "t": end[r] - 100.0, "compute_s": comp[r],
                       "iter_s": 0.0, "fallback": 0}
                if r == 0 and accuracy_at and i in accuracy_at:
                    rec["test_acc"] = accuracy_at[i]
                f.write(json.dumps(rec) + "\n")


def test_an_iteration_ends_when_its_first_rank_has_the_update(tmp_path):
    # rank 1 is late by 0.05 s every iteration (k-of-n); the job's progress is rank 0's
    ends = [[100.1, 100.15], [100.3, 100.35], [100.6, 100.65]]
    write_logs(tmp_path, ends, [[0.05, 0.1]] * 3, accuracy_at={1: 0.5, 2: 0.9})
    run = load_run("k-of-n", tmp_path)
    np.testing.assert_allclose(run.iter_s, [0.1, 0.2, 0.3])
    np.testing.assert_allclose(run.t, [0.1, 0.3, 0.6])
    assert run.time_to_accuracy(0.8) == pytest.approx(0.6)
    assert run.time_to_accuracy(0.95) is None
    s = summary(run, 0.8)
    # the first iteration (start-up) is left out of the iteration statistics only
    assert s["iter_mean_ms"] == pytest.approx(250.0)
    assert s["time_to_target_s"] == pytest.approx(0.6) and s["final_accuracy"] == 0.9


def row(scenario, method, iter_ms, tta):
    return {"scenario": scenario, "method": method, "scenario_description": scenario,
            "iter_mean_ms": iter_ms, "iter_p50_ms": iter_ms, "iter_p99_ms": iter_ms,
            "time_to_target_s": tta, "final_accuracy": 0.96}


def test_tables_mark_each_scenarios_best_and_runs_that_never_got_there():
    rows = [row("none", "gloo", 40.0, 4.0), row("none", "dpar", 45.0, 3.5),
            row("static-3x", "gloo", 110.0, None), row("static-3x", "dpar", 50.0, 5.0)]
    overview = overview_table(rows, 0.95).splitlines()
    assert overview[0] == "| time to 95% in s (iteration ms) | none | static-3x |"
    assert overview[2] == "| gloo | 4.0 (40) | not reached (110) |"
    assert overview[3] == "| dpar | **3.5** (45) | **5.0** (50) |"
    tables = scenario_tables(rows, 0.95)
    assert "| gloo | **40.0** | 40.0 | 40.0 | 1.00x | 4.0 | 0.960 |" in tables
    assert "| dpar | **50.0** | 50.0 | 50.0 | 0.45x | **5.0** | 0.960 |" in tables
    assert "neighbour" not in tables


def test_a_scenario_with_a_neighbour_job_shows_its_iteration_time():
    rows = [row("none", "gloo", 40.0, 4.0),
            row("multi-job", "gloo", 110.0, None) | {"neighbour_iter_mean_ms": 60.0},
            row("multi-job", "sa-atp", 55.0, 5.0) | {"neighbour_iter_mean_ms": 61.25}]
    tables = scenario_tables(rows, 0.95)
    none, multi = tables.split("### multi-job")
    assert "neighbour" not in none
    assert "| final accuracy | neighbour job's iteration mean |" in multi
    assert "| gloo | 110.0 | 110.0 | 110.0 | 1.00x | not reached | 0.960 | 60.0 |" in multi
    assert "| sa-atp | **55.0** | 55.0 | 55.0 | 0.50x | **5.0** | 0.960 | 61.2 |" in multi


def test_repeated_runs_give_medians_and_the_range_of_their_times_to_accuracy():
    runs = [row("static-3x", "boa", ms, tta) | {"seed": seed}
            for seed, (ms, tta) in enumerate([(50.0, 5.0), (54.0, 5.6), (51.0, None)])]
    runs += [row("static-3x", "sa-atp", ms, tta) | {"seed": seed}
             for seed, (ms, tta) in enumerate([(49.0, 5.1), (52.0, 4.8), (50.0, 5.3)])]
    runs += [row("static-3x", "switch", ms, tta) | {"seed": seed}
             for seed, (ms, tta) in enumerate([(110.0, None), (111.0, 9.0), (112.0, None)])]
    boa, sa_atp, switch = median_rows(runs)
    assert (boa["method"], boa["seeds"], boa["iter_mean_ms"]) == ("boa", 3, 51.0)
    # a run that never got there counts as the longest: the median of 5.0, 5.6 and never
    assert boa["time_to_target_s"] == 5.6 and boa["not_reached"] == 1
    assert (boa["tta_min_s"], boa["tta_max_s"]) == (5.0, 5.6)
    assert sa_atp["time_to_target_s"] == 5.1 and sa_atp["iter_mean_ms"] == 50.0
    assert switch["time_to_target_s"] is None and switch["iter_mean_ms"] == 111.0
    assert "seed" not in boa
    # against the first method seed by seed: the median of the per-seed ratios, not the ratio
    # of the medians (switch: 2.196 against 111 / 51 = 2.176); times to accuracy only where
    # both runs got there
    assert switch["iter_vs_first"] == pytest.approx(np.median([110 / 50, 111 / 54, 112 / 51]),
                                                    abs=1e-4)
    assert sa_atp["tta_vs_first"] == pytest.approx(np.median([5.1 / 5.0, 4.8 / 5.6]), abs=1e-4)
    assert switch["tta_vs_first"] == pytest.approx(9.0 / 5.6, abs=1e-4)
    assert (boa["iter_vs_first"], boa["tta_vs_first"]) == (1.0, 1.0)
    tables = scenario_tables([boa, sa_atp, switch], 0.95)
    assert "| vs boa (per seed) | time to 95% (s) | time to 95% vs boa (per seed) |" in tables
    assert "| boa | 51.0 | 51.0 | 51.0 | 1.00x | 5.6 (5.0–5.6, 1 of 3 not reached) | 1.000x | " \
        "0.960 |" in tables
    assert "| sa-atp | **50.0** | 50.0 | 50.0 | 0.98x | **5.1** (4.8–5.3) | 0.939x | 0.960 |" \
        in tables
    assert "| switch | 111.0 | 111.0 | 111.0 | 2.20x | not reached (9.0–9.0, 2 of 3 not " \
        "reached) | 1.607x | 0.960 |" in tables


def test_a_seed_without_the_first_methods_run_is_left_out_of_the_pairs():
    """The first method's run of seed 1 failed: the other method's seed 1 is compared with
    nothing (not with another method's run), its seeds 0 and 2 give the ratios 2.0 and 1.0."""
    runs = [row("s", method, ms, tta) | {"seed": seed} for seed, method, ms, tta in (
        (0, "boa", 10.0, 1.0), (0, "sa-atp", 20.0, 3.0), (1, "sa-atp", 30.0, 2.0),
        (1, "switch", 40.0, 2.0), (2, "boa", 10.0, 2.0), (2, "sa-atp", 10.0, 1.0))]
    boa, sa_atp, switch = median_rows(runs)
    assert sa_atp["iter_vs_first"] == np.median([2.0, 1.0])
    assert sa_atp["tta_vs_first"] == np.median([3.0, 0.5])
    assert switch["iter_vs_first"] is None and switch["tta_vs_first"] is None


def test_the_harness_reports_repeated_runs_from_their_logs(tmp_path):
    from experiments import harness

    # static-3x, switch and boa, seeds 5 and 6: iterations of 0.1 s, accuracy 0.96 reached at
    # iteration 2, 3 or 4 (0.3, 0.4 or 0.5 s)
    for method, reached in (("switch", (3, 4)), ("boa", (2, 2))):
        for seed, at in zip((5, 6), reached, strict=True):
            ends = [[100.0 + 0.1 * (i + 1)] * 2 for i in range(5)]
            write_logs(tmp_path / "logs" / "static-3x" / method / f"seed{seed}", ends,
                       [[0.05, 0.1]] * 5, accuracy_at={at: 0.96, 4: 0.97})
    harness.main(["--scenarios", "static-3x", "--methods", "switch,boa", "--seed", "5",
                  "--repeat", "2", "--report-only", "--out", str(tmp_path / "out"),
                  "--logs", str(tmp_path / "logs")])
    with open(tmp_path / "out" / "results.csv") as f:
        rows = list(csv.DictReader(f))
    # a seed's methods one after the other
    assert [(r["method"], r["seed"], r["time_to_target_s"]) for r in rows] == [
        ("switch", "5", "0.4"), ("boa", "5", "0.3"), ("switch", "6", "0.5"), ("boa", "6", "0.3")]
    text = (tmp_path / "out" / "summary.md").read_text()
    assert "seeds 5-6: each number the median of 2 runs" in text
    assert "| switch | **100.0** | 100.0 | 100.0 | 1.00x | 0.5 (0.4–0.5) | 1.000x | 0.970 |" \
        in text
    # boa's time to accuracy per seed against switch's: 0.3 / 0.4 and 0.3 / 0.5
    assert "| boa | **100.0** | 100.0 | 100.0 | 1.00x | **0.3** (0.3–0.3) | 0.675x | 0.970 |" \
        in text


@pytest.mark.slow
def test_the_harness_runs_a_matrix_and_writes_csv_summary_and_plots(tmp_path, monkeypatch):
    from experiments import harness

    # its throw-away warm-up run only keeps compiling out of the timed runs' figures
    monkeypatch.setattr(harness, "compile_kernels", lambda workers: None)
    harness.main(["--scenarios", "none,static-3x", "--methods", "switch,boa",
                  "--iterations", "12", "--eval-every", "4", "--target-accuracy", "0.3",
                  "--out", str(tmp_path / "out"), "--logs", str(tmp_path / "logs")])
    with open(tmp_path / "out" / "results.csv") as f:
        rows = list(csv.DictReader(f))
    assert [(r["scenario"], r["method"]) for r in rows] == [
        ("none", "switch"), ("none", "boa"), ("static-3x", "switch"), ("static-3x", "boa")]
    for r in rows:
        # the CSV is what each run's own logs say
        run = load_run(r["method"], tmp_path / "logs" / r["scenario"] / r["method"])
        assert int(r["iterations"]) == 12 == len(run.iter_s)
        assert float(r["final_accuracy"]) == pytest.approx(run.final_accuracy, abs=1e-4)
        assert float(r["iter_mean_ms"]) == pytest.approx(run.iter_s[1:].mean() * 1e3, abs=0.01)
        assert int(r["fallback_calls"]) == 0
    text = (tmp_path / "out" / "summary.md").read_text()
    assert "| time to 30% in s (iteration ms) | none | static-3x |" in text
    assert "### static-3x: worker 3 is 3x slower throughout" in text
    for png in ("iteration_times.png", "time_to_accuracy.png"):
        assert (tmp_path / "out" / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # --report-only rebuilds the same CSV and summary from the logs, training nothing; a run
    # whose logs are gone is reported as failed and left out
    shutil.rmtree(tmp_path / "logs" / "none" / "boa")
    harness.main(["--scenarios", "none,static-3x", "--methods", "switch,boa", "--iterations",
                  "12", "--target-accuracy", "0.3", "--report-only",
                  "--out", str(tmp_path / "again"), "--logs", str(tmp_path / "logs")])
    with open(tmp_path / "again" / "results.csv") as f:
        assert list(csv.DictReader(f)) == [r for r in rows if (r["scenario"], r["method"])
                                           != ("none", "boa")]


def test_the_neighbour_jobs_iteration_mean_comes_from_its_own_logs(tmp_path):
    from experiments import harness

    # the neighbour's iterations end at 0.1, 0.3, 0.6 s: the mean without the first is 250 ms
    write_logs(tmp_path / "neighbour", [[100.1], [100.3], [100.6]], [[0.05]] * 3)
    write_logs(tmp_path, [[100.1], [100.2], [100.3]], [[0.05]] * 3)  # the measured job's
    assert harness.neighbour_iter_mean_ms(tmp_path) == pytest.approx(250.0)

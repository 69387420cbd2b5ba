"""Result files (experiments/result_files.py): written whole or not at all, and a benchmark run
keeps its figures whatever the previous results file holds (an empty file, as ``mktemp`` makes,
once crashed ``python -m bench --out`` after every section had run, and wrote nothing)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from experiments import result_files

ROOT = Path(__file__).resolve().parent.parent
PREVIOUS = {"empty": "", "cut short": '{"codec": {"packets": 3', "not an object": "[1, 2]",
            "not UTF-8": b"\xff\xfe{}"}


def bench(out: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench", "--only", "codec", "--out", str(out)],
                          cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("previous", sorted(PREVIOUS))
def test_a_bench_run_keeps_its_figures_and_an_unreadable_previous_file(tmp_path, previous):
    out = tmp_path / "results.json"
    content = PREVIOUS[previous]
    (out.write_bytes if isinstance(content, bytes) else out.write_text)(content)
    done = bench(out)
    assert done.returncode == 0, done.stderr
    results = json.loads(out.read_text())
    assert results["codec"]["vectorised_pps"] > 0 and "machine" in results
    [aside] = tmp_path.glob("results.json.unreadable-*")
    assert aside.read_bytes() == (content if isinstance(content, bytes) else content.encode())
    assert "could not be read" in done.stderr and aside.name in done.stderr


def test_a_bench_run_adds_its_sections_to_a_readable_file(tmp_path):
    out = tmp_path / "results.json"
    out.write_text(json.dumps({"transport": {"elements": 7}}))
    assert bench(out).returncode == 0
    results = json.loads(out.read_text())
    assert results["transport"] == {"elements": 7} and "codec" in results
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.json"]


def test_a_write_that_fails_leaves_the_file_as_it_was(tmp_path):
    path = tmp_path / "summary.md"
    path.write_text("the last run's")
    with pytest.raises(RuntimeError), result_files.replacing(path) as tmp:
        tmp.write_text("half of the")
        raise RuntimeError("interrupted")
    assert path.read_text() == "the last run's"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.md"]
    result_files.write_text(path, "this run's")
    assert path.read_text() == "this run's"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.md"]


def test_figures_and_csv_keep_their_format(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    result_files.save_figure(fig, tmp_path / "plot.png", dpi=50)
    plt.close(fig)
    assert (tmp_path / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    result_files.write_csv([{"a": 1}, {"a": 2, "b": 3}], tmp_path / "rows.csv")
    assert (tmp_path / "rows.csv").read_text().splitlines() == ["a,b", "1,", "2,3"]

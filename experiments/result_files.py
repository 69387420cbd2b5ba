"""Result files written whole or not at all, and a previous results file that cannot be read
kept aside rather than lost (the benchmarks, the harness and the simulator write through here).

A run's figures are worth minutes to hours: a file cut short by an interrupted write, or a crash
on reading the previous file after the work is done, would lose them. Every file is written to a
temporary file beside it and renamed over it (``os.replace``, atomic within a file system).
"""

from __future__ import annotations

import csv
import json
import os
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def replacing(path: Path) -> Iterator[Path]:
    """A temporary path beside ``path`` (same suffix, so writers that go by it still work) to
    write to; it replaces ``path`` when the block ends without an exception, and is removed
    otherwise."""
    path = Path(path)
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp{path.suffix}")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_text(path: Path, text: str) -> None:
    with replacing(path) as tmp:
        tmp.write_text(text)


def write_csv(rows: list[dict], path: Path) -> Path:
    """``rows`` as CSV, a column for every key any row has (in order of appearance)."""
    fields = list(dict.fromkeys(k for r in rows for k in r))
    with replacing(path) as tmp, open(tmp, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    return path


def save_figure(fig, path: Path, dpi: int) -> Path:
    """A matplotlib figure to ``path`` (its format from the suffix)."""
    with replacing(path) as tmp:
        fig.savefig(tmp, dpi=dpi)
    return path


def read_json_or_keep_aside(path: Path) -> dict:
    """The JSON object in ``path``; ``{}`` if there is none, or if it cannot be read: then the
    file is renamed to ``<name>.unreadable-<time>`` beside it, with a warning."""
    path = Path(path)
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict):
            raise ValueError(f"a JSON {type(data).__name__}, not an object")
        return data
    except (OSError, ValueError) as exc:   # json.JSONDecodeError, UnicodeDecodeError included
        aside = path.with_name(f"{path.name}.unreadable-{time.strftime('%Y%m%d-%H%M%S')}")
        path.rename(aside)
        warnings.warn(f"{path} could not be read ({exc}); kept as {aside}, results written "
                      "anew", stacklevel=2)
        return {}

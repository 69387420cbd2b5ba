"""The map of names in docs/p4-program.md must hold: every P4 control it lists is declared in the
P4 file it names, its controller class lives in the module it names, and the tables, registers and
counters it lists exist in the compiled program under the control's instance."""

import importlib
import re
from pathlib import Path

import pytest

from control_plane.controller import Pipeline

ROOT = Path(__file__).resolve().parent.parent
DOC = (ROOT / "docs" / "p4-program.md").read_text()


def map_rows() -> list[list[str]]:
    lines = DOC[DOC.index("## Map of names"):].splitlines()
    rows = [line for line in lines if line.startswith("|")]
    return [[c.strip() for c in row.strip("|").split("|")] for row in rows[2:]]


ROWS = [r for r in map_rows() if r[3] != "—"]  # the controls with a controller class


def test_the_map_lists_every_control_with_state():
    p4info, _, _ = Pipeline().load()
    names = ([t.preamble.name for t in p4info.message.tables]
             + [r.preamble.name for r in p4info.message.registers]
             + [c.preamble.name for c in p4info.message.counters])
    instances = {n.split(".")[1] for n in names}
    documented = {i for row in ROWS for i in re.findall(r"`(\w+)`", row[1].split("(", 1)[1])}
    assert instances == documented


@pytest.mark.parametrize("row", ROWS, ids=[r[0] for r in ROWS])
def test_each_row_names_what_exists(row):
    p4_file, control, state, controller = row[:4]
    p4_file = p4_file.strip("`")
    control_name = re.match(r"`(\w+)`", control).group(1)
    instances = re.findall(r"`(\w+)`", control.split("(", 1)[1])
    assert re.search(rf"^control {control_name}\(", (ROOT / "p4src" / p4_file).read_text(), re.M)

    module, cls = re.match(r"`controls/(\w+)\.py` `(\w+)`", controller).groups()
    assert module == Path(p4_file).stem, "controller module named after the P4 file"
    assert cls == control_name, "controller class named after the P4 control"
    assert hasattr(importlib.import_module(f"control_plane.controls.{module}"), cls)

    p4info, _, _ = Pipeline().load()
    names = ({t.preamble.name for t in p4info.message.tables}
             | {r.preamble.name for r in p4info.message.registers}
             | {c.preamble.name for c in p4info.message.counters})
    for obj in re.findall(r"`(\w+)`", state):
        if obj.isupper() or obj == "lane_63":
            continue  # constants (FLOOD_GROUP); lane_63 stands for the run lane_00…lane_63
        assert any(n.split(".")[1] in instances and n.endswith("." + obj) for n in names), obj

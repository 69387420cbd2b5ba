"""The committed compile of the TNA program (``p4src/tofino/compiled/``, written by ``make
tofino``; ``make p4-check`` ties it to the sources) against what the project assumes of it: the
BF Runtime names, keys, actions and sizes that the fake BF Runtime switch reads from the source
(and the controller therefore writes) are the compiler's, and docs/tofino.md's resource summary
is this compile's."""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path

import pytest

from tests.tofino.fake_switch import program_schema

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import tofino_resources  # noqa: E402

COMPILED = ROOT / "p4src" / "tofino" / "compiled"
FIXED = ("$pre.", "$PORT")   # the SDE's own tables: in no program's bfrt.json
OBJECTS = ("MatchAction_Direct", "Register", "Counter", "ParserValueSet")


@pytest.fixture(scope="module")
def compiled() -> dict[str, dict]:
    tables = json.loads((COMPILED / "bfrt.json").read_text())["tables"]
    return {t["name"]: t for t in tables if t["table_type"] in OBJECTS}


def _data_names(entry: dict) -> tuple[str, ...]:
    return tuple(sorted(d["singleton"]["name"] if "singleton" in d else d["name"]
                        for d in entry["data"]))


def schema_of(compiled: dict[str, dict]) -> dict[str, tuple]:
    """What the controller relies on, per BF Runtime object: its kind, key fields, size where
    the controller addresses cells, and actions with their data fields (or data fields)."""
    out = {}
    for name, t in compiled.items():
        keys = tuple(k["name"] for k in t["key"])
        if t["table_type"] == "MatchAction_Direct":
            actions = {a["name"]: _data_names(a) for a in t["action_specs"]}
            out[name] = ("table", keys, 0, actions)
        elif t["table_type"] == "ParserValueSet":
            out[name] = ("table", keys, 0, {None: ()})
        else:
            kind = t["table_type"].lower()
            out[name] = (kind, keys, t["size"], {None: _data_names(t)})
    return out


def fake_schema() -> dict[str, tuple]:
    return {name: (s.kind, s.keys, s.size if s.kind != "table" else 0,
                   {a: tuple(sorted(d)) for a, d in s.actions.items()})
            for name, s in program_schema().items() if not name.startswith(FIXED)}


def test_the_fake_switch_has_the_compiled_programs_objects(compiled):
    assert sorted(fake_schema()) == sorted(schema_of(compiled))


def test_every_object_has_the_compiled_keys_actions_and_sizes(compiled):
    real = schema_of(compiled)
    for name, expected in fake_schema().items():
        assert real[name] == expected, name


def test_a_renamed_action_is_found(compiled):
    """The comparison sees a difference of one action name (as a renamed action in the source
    with a stale compile would make)."""
    name = next(n for n, t in compiled.items() if t["table_type"] == "MatchAction_Direct"
                and any(a["name"] != "NoAction" for a in t["action_specs"]))
    altered = json.loads(json.dumps(compiled))
    action = next(a for a in altered[name]["action_specs"] if a["name"] != "NoAction")
    action["name"] += "_renamed"
    assert schema_of(altered)[name] != fake_schema()[name]


def test_the_docs_resource_summary_is_the_committed_compiles():
    doc = (ROOT / "docs" / "tofino.md").read_text()
    assert tofino_resources.docs_block(doc) == tofino_resources.summary(COMPILED), (
        "run `python tools/tofino_resources.py --update-docs`")


def test_the_program_fits_tofino_1():
    resources = json.loads((COMPILED / "resources.json").read_text())
    rows = tofino_resources.stage_rows(resources)
    assert len(rows) == 12
    for row in rows:
        for label, value in row.items():
            if isinstance(value, tuple):
                used, capacity = value
                assert used <= capacity, (row["stage"], label)


# Pass 1 as a chain of tables, each reading what the one before it wrote (docs/tofino.md,
# 'Stages'): the compiler places a reader after its writer only if the source applies it after.
CHAIN = ("admission.jobs", "abs_slot_sel", "aggregator.admit_sel", "aggregator.run_id_sel",
         "aggregator.chunk_id_sel", "aggregator.lane_holder_sel",
         "aggregator.progress_check_sel", "aggregator.progress_sel",
         "aggregator.contributors_sel", "decide.decide", "respond.answer")


def _stages(node) -> set[int]:
    found = set()
    if isinstance(node, dict):
        if "stage_number" in node:
            found.add(node["stage_number"])
        for value in node.values():
            found |= _stages(value)
    elif isinstance(node, list):
        for value in node:
            found |= _stages(value)
    return found


def test_each_table_of_the_chain_is_placed_after_the_one_it_reads():
    """Before 2026-11-26 the source applied abs_slot_sel before the jobs lookup: the compiler
    put both in stage 1, and abs_slot was computed from a slot base of 0 (every job's slot s in
    the same aggregators). The model had used the job's slot base."""
    context = json.loads((COMPILED / "context.json").read_text())
    stage = {t["name"].removeprefix("SaAtpIngress."): min(_stages(t))
             for t in context["tables"] if t["name"].startswith("SaAtpIngress.") and _stages(t)}
    for writer, reader in itertools.pairwise(CHAIN):
        assert stage[writer] < stage[reader], (writer, stage[writer], reader, stage[reader])

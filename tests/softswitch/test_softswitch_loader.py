"""Loading: unsupported constructs are refused when the program is loaded, naming the construct
and the JSON node; nothing unsupported is silently ignored."""

from __future__ import annotations

import copy
import json

import pytest

from softswitch import ProgramError, UnsupportedConstruct, load_program
from tests.softswitch.programs import program_json


def base() -> dict:
    return json.loads(program_json("tables"))


def action(root: dict, name: str) -> dict:
    return next(a for a in root["actions"] if a["name"] == name)


def test_all_test_programs_load():
    for name in ("parsing", "tables", "arith", "stateful", "replication"):
        program = load_program(program_json(name))
        assert program.tables is not None and program.code is not None


def test_unknown_primitive_is_refused_naming_it_and_its_action():
    root = base()
    act = action(root, "IngressImpl.set_hm")
    act["primitives"].append({"op": "frobnicate", "parameters": [],
                              "source_info": {"filename": "tables.p4", "line": 123,
                                              "source_fragment": "frobnicate()"}})
    with pytest.raises(UnsupportedConstruct) as exc:
        load_program(root)
    message = str(exc.value)
    assert "primitive 'frobnicate'" in message
    assert "tables.p4:123" in message


def test_unknown_expression_operator_is_refused():
    root = base()
    act = action(root, "IngressImpl.set_hm")
    prim = act["primitives"][0]
    prim["parameters"][1] = {"type": "expression", "value": {"type": "expression", "value": {
        "op": "popcount", "left": None, "right": {"type": "runtime_data", "value": 0}}}}
    with pytest.raises(UnsupportedConstruct, match="operator 'popcount'"):
        load_program(root)


@pytest.mark.parametrize("section,what", [
    ("header_stacks", "header stacks"),
    ("meter_arrays", "meters"),
    ("parse_vsets", "parser value sets"),
    ("learn_lists", "digests"),
])
def test_unsupported_sections_are_refused(section, what):
    root = base()
    root[section] = [{"name": "thing", "id": 0}]
    with pytest.raises(UnsupportedConstruct, match=what) as exc:
        load_program(root)
    assert "name='thing'" in str(exc.value)


def test_unsupported_hash_algorithm_and_table_kinds():
    root = json.loads(program_json("stateful"))
    root["calculations"][0]["algo"] = "random"
    with pytest.raises(UnsupportedConstruct, match="hash algorithm 'random'"):
        load_program(root)
    root = base()
    root["pipelines"][0]["tables"][0]["type"] = "indirect"
    with pytest.raises(UnsupportedConstruct, match="action profiles"):
        load_program(root)


def test_backward_jump_is_refused():
    root = base()
    act = action(root, "IngressImpl.with_if")
    jumps = [p for p in act["primitives"] if p["op"] == "_jump"]
    assert jumps, "p4c compiles the if/else inside with_if into jumps"
    jumps[0]["parameters"][0]["value"] = "0x00000000"
    with pytest.raises(UnsupportedConstruct, match="backward jump"):
        load_program(root)


def test_malformed_programs():
    with pytest.raises(ProgramError, match="invalid JSON"):
        load_program("{not json")
    root = base()
    root["__meta__"]["version"] = [3, 0]
    with pytest.raises(UnsupportedConstruct, match="format version"):
        load_program(root)
    root = base()
    root["pipelines"] = [p for p in root["pipelines"] if p["name"] != "egress"]
    with pytest.raises(ProgramError, match="pipeline named 'egress'"):
        load_program(root)


def test_loading_does_not_modify_the_input():
    root = base()
    before = copy.deepcopy(root)
    load_program(root)
    assert root == before

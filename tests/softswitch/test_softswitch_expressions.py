"""The bmv2 JSON expression language beyond what the test programs' p4c output uses: each case
replaces the expression stored by one action of tables.p4 (``set_tern``, run as the default
action of t_ternary with v = 0xDD) and checks the stored byte against Python's arithmetic."""

from __future__ import annotations

import json
import logging
import struct

import pytest

from softswitch import V1Switch, load_program
from tests.softswitch.programs import program_json

V = {"type": "local", "value": 0}  # the action parameter v = 0xDD
ADDR = {"type": "field", "value": ["key", "addr"]}


def const(value: int) -> dict:
    return {"type": "hexstr", "value": hex(value) if value >= 0 else "-" + hex(-value)}


def op(name: str, left, right, **extra) -> dict:
    return {"type": "expression", "value": {"op": name, "left": left, "right": right, **extra}}


def masked(expr: dict) -> dict:
    return op("&", expr, const(0xFF))


def run(expr: dict, addr: int = 0) -> int | None:
    root = json.loads(program_json("tables"))
    action = next(a for a in root["actions"] if a["name"] == "IngressImpl.set_tern")
    action["primitives"][0]["parameters"][1] = {"type": "expression", "value": expr}
    sw = V1Switch(load_program(root))
    frame = bytes.fromhex("02000000000202000000000188b6") + struct.pack("!IHBBH", addr, 0, 0, 0,
                                                                        0) + bytes(12)
    out = sw.process(1, frame)
    return None if not out else out[0][1][24 + 2]


@pytest.mark.parametrize("expr,expected", [
    (masked(op("/", V, const(7))), 0xDD // 7),
    (masked(op("%", V, const(7))), 0xDD % 7),
    (masked(op("*", V, V)), (0xDD * 0xDD) & 0xFF),
    (masked(op("-", None, V)), -0xDD & 0xFF),
    (masked(op("~", None, V)), ~0xDD & 0xFF),
    (masked(op(">>", V, const(3))), 0xDD >> 3),
    (masked(op("two_comp_mod", V, const(8))), 0xDD - 0x100 & 0xFF),
    (masked(op("two_comp_mod", const(-129), const(8))), 127),
    (op("usat_cast", op("+", V, V), const(8)), 0xFF),
    (masked(op("sat_cast", op("-", const(0), V), const(8))), -128 & 0xFF),
    (op("?", op("b2d", None, op("valid", None, {"type": "header", "value": "key"})), const(3),
        cond=op(">", V, const(0xDC))), 1),
    (op("b2d", None, op("not", None, op("d2b", None, V))), 0),
    (op("b2d", None, op("or", op("==", V, const(1)), op("!=", V, const(0xDD)))), 0),
    (op("b2d", None, op("==", {"type": "header", "value": "key"},
                        {"type": "header", "value": "key"})), 1),
])
def test_operators(expr, expected):
    assert run(expr) == expected


@pytest.mark.parametrize("addr,expected", [(3, 8), (7, 128), (8, 0), (40, 0), (1 << 31, 0)])
def test_masked_dynamic_shift_past_the_width_is_zero(addr, expected):
    # p4c compiles bit<8> x << y as (x << y) & 0xff; y is a bit<32> field here.
    assert run(op("&", op("<<", const(1), ADDR), const(0xFF)), addr=addr) == expected


def test_division_by_zero_drops_the_packet_with_an_error(caplog):
    with caplog.at_level(logging.ERROR, logger="softswitch"):
        assert run(masked(op("/", V, op("-", V, V)))) is None
    assert "division by zero" in caplog.text

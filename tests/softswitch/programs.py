"""The compiled test programs of tests/p4programs, each loaded (and its code generated) once per
test session."""

from __future__ import annotations

import functools
from pathlib import Path

from softswitch import Program, V1Switch, load_program

COMPILED = Path(__file__).resolve().parents[1] / "p4programs" / "compiled"


@functools.cache
def program_json(name: str) -> str:
    return (COMPILED / f"{name}.json").read_text()


@functools.cache
def p4info_text(name: str) -> str:
    return (COMPILED / f"{name}.p4info.txtpb").read_text()


@functools.cache
def program(name: str) -> Program:
    return load_program(program_json(name))


def switch(name: str, **kwargs) -> V1Switch:
    return V1Switch(program(name), **kwargs)

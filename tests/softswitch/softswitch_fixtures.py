"""Shared helpers for the software-switch tests: the compiled executor test programs.

(A plain module rather than conftest.py: the tests import these helpers directly.)"""

from __future__ import annotations

import functools
import shutil
from pathlib import Path

import pytest

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
    """Each test program is loaded (and its code generated) once per test session."""
    return load_program(program_json(name))


def switch(name: str, **kwargs) -> V1Switch:
    return V1Switch(program(name), **kwargs)


bmv2_available = shutil.which("simple_switch_grpc") is not None

requires_bmv2 = pytest.mark.skipif(not bmv2_available,
                                   reason="simple_switch_grpc is not installed")

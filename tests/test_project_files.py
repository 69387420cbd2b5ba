"""What the project states about itself holds: the Python floor is the same in pyproject.toml,
ruff's target and the README, and the interpreter running the tests (CI's) meets it; the license
pyproject declares is the one in LICENSE."""

import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def floor() -> tuple[int, int]:
    match = re.fullmatch(r">=(\d+)\.(\d+)", PYPROJECT["project"]["requires-python"])
    assert match, PYPROJECT["project"]["requires-python"]
    return int(match[1]), int(match[2])


def test_the_python_floor_is_stated_once_and_met():
    major, minor = floor()
    assert PYPROJECT["tool"]["ruff"]["target-version"] == f"py{major}{minor}"
    assert f"Python ≥ {major}.{minor}" in (ROOT / "README.md").read_text()
    assert sys.version_info[:2] >= (major, minor)


def test_the_license_file_is_the_declared_license():
    assert PYPROJECT["project"]["license"] == "Apache-2.0"
    text = (ROOT / "LICENSE").read_text()
    assert text.lstrip().startswith("Apache License") and "Version 2.0, January 2004" in text

"""The project's floors: which package may import which (this table is the one place the rule is
written; docs/architecture.md explains it).

A package imports only from the floors below it, never up and never sideways unless the table
says so; inside ``host_lib`` the same holds between its layers. Imports under ``TYPE_CHECKING``
are annotations only and are exempt; every other import counts, a lazy one inside a function
too, since it runs back up the same way when it runs.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# package (or host_lib layer) -> what it may import from the project, besides itself.
MAY_IMPORT: dict[str, set[str]] = {
    "protocol": set(),
    "pktio": set(),
    "host_lib": set(),  # the package itself; each module lives in one of its layers below
    "softswitch": {"pktio"},  # its dataplane, ports and command stand on the floors below
    "softswitch.core": set(),
    "softswitch.v1model": {"softswitch.core"},
    "softswitch.p4runtime_server": {"softswitch.core"},
    "host_lib.engine": {"protocol", "pktio"},
    "host_lib.scheduling": {"protocol", "host_lib.engine"},
    "host_lib.communicator": {"protocol", "pktio", "host_lib.engine", "host_lib.metrics"},
    "host_lib.metrics": {"protocol", "host_lib.engine"},
    "host_lib.pytorch": {"protocol", "pktio", "host_lib.engine", "host_lib.communicator"},
    "control_plane": {"protocol"},
    "topologies": {"protocol", "pktio", "softswitch", "host_lib", "control_plane"},
    "experiments": {"protocol", "pktio", "softswitch", "host_lib", "control_plane",
                    "topologies"},
    "examples": {"protocol", "pktio", "softswitch", "host_lib", "control_plane", "topologies",
                 "experiments"},
    "bench": {"protocol", "pktio", "softswitch", "host_lib", "control_plane", "topologies",
              "experiments"},
    "sim": {"protocol", "host_lib", "experiments"},
    "tools": {"protocol"},
}
PACKAGES = sorted({name.split(".")[0] for name in MAY_IMPORT})


def unit(module: str) -> str | None:
    """The most specific entry of MAY_IMPORT that ``module`` belongs to."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in MAY_IMPORT:
            return ".".join(parts[:n])
    return None


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports(path: Path, module: str | None = None) -> list[tuple[int, str]]:
    """(line, module) of every project import in ``path`` outside ``if TYPE_CHECKING:``."""
    module = module or module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.extend((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            # ``from pkg import module`` names a module when pkg is a package of the project
            for alias in node.names:
                candidate = f"{target}.{alias.name}"
                found.append((node.lineno, candidate if _is_module(candidate) else target))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(), str(path)))
    return [(line, name) for line, name in found if name.split(".")[0] in PACKAGES]


def _is_module(name: str) -> bool:
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def project_files() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def test_every_package_of_the_table_exists():
    missing = [pkg for pkg in MAY_IMPORT
               if not (_is_module(pkg) or ROOT.joinpath(*pkg.split('.')).is_dir())]
    assert not missing


@pytest.mark.parametrize("path", project_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_import_runs_up_or_sideways(path: Path):
    mine = unit(module_name(path))
    assert mine is not None, f"{path} is in no unit of MAY_IMPORT"
    allowed = MAY_IMPORT[mine] | {mine}
    wrong = [f"line {line}: {name}" for line, name in imports(path)
             if not any(name == a or name.startswith(a + ".") for a in allowed)]
    assert not wrong, f"{mine} may import only {sorted(allowed)}"


def test_no_import_cycle_between_modules():
    """Modules form no cycle through imports that run (TYPE_CHECKING ones aside)."""
    graph = {module_name(p): {name for _, name in imports(p)} for p in project_files()}
    graph = {m: {n for n in targets if n in graph and n != m} for m, targets in graph.items()}
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def walk(m: str) -> list[str] | None:
        state[m] = 1
        path.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                return path[path.index(n):] + [n]
            if n not in state and (cycle := walk(n)):
                return cycle
        path.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state and (cycle := walk(m)):
            pytest.fail("import cycle: " + " -> ".join(cycle))


def test_the_checker_sees_an_upward_import(tmp_path: Path):
    """The scanner itself: a lazy import up a floor, and one under TYPE_CHECKING that is not."""
    f = tmp_path / "x.py"
    f.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                 "    from control_plane.allocation import Allocator\n"
                 "def f():\n    from host_lib import communicator\n")
    assert [name for _, name in imports(f, "examples.x")] == ["host_lib.communicator"]

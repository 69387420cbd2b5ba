"""Compile the project's P4 programs with p4c and check the committed artifacts against their sources.

Every program is compiled into ``<outdir>/<name>.json`` (bmv2 JSON) and
``<outdir>/<name>.p4info.txtpb`` (P4Info, text format).  Beside them, ``<name>.stamp.json``
records the SHA-256 of every source file and every artifact, and the p4c version that made them.
``check`` fails when a source or an artifact no longer matches its stamp, so a P4 change can never
land without the compiled program that goes with it.

Usage:  python tools/p4_artifacts.py compile [NAME ...]
        python tools/p4_artifacts.py check
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
P4C = "p4c-bm2-ss"


@dataclass(frozen=True)
class Program:
    """One P4 program: its top-level source, the sources it depends on, and where its outputs go."""

    name: str
    main: Path
    sources: tuple[Path, ...]
    outdir: Path

    @property
    def json_path(self) -> Path:
        return self.outdir / f"{self.name}.json"

    @property
    def p4info_path(self) -> Path:
        return self.outdir / f"{self.name}.p4info.txtpb"

    @property
    def stamp_path(self) -> Path:
        return self.outdir / f"{self.name}.stamp.json"


def programs() -> list[Program]:
    """The project's program (all of ``p4src/``) and the small executor test programs."""
    main_sources = tuple(sorted((ROOT / "p4src").rglob("*.p4")))
    found = [Program("sa_atp", ROOT / "p4src" / "sa_atp.p4", main_sources, ROOT / "p4src" / "compiled")]
    test_dir = ROOT / "tests" / "p4programs"
    for src in sorted(test_dir.glob("*.p4")):
        found.append(Program(src.stem, src, (src,), test_dir / "compiled"))
    return found


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def p4c_version() -> str:
    out = subprocess.run([P4C, "--version"], capture_output=True, text=True, check=True)
    return (out.stdout + out.stderr).strip().splitlines()[-1]


def compile_program(prog: Program) -> None:
    prog.outdir.mkdir(parents=True, exist_ok=True)
    cmd = [P4C, "--arch", "v1model", "--std", "p4-16",
           "-o", str(prog.json_path), "--p4runtime-files", str(prog.p4info_path), str(prog.main)]
    print("+", " ".join(rel(Path(c)) if c.startswith(str(ROOT)) else c for c in cmd))
    subprocess.run(cmd, check=True, cwd=ROOT)
    relativise_source_paths(prog.json_path)
    stamp = {
        "p4c": p4c_version(),
        "sources": {rel(s): sha256(s) for s in prog.sources},
        "artifacts": {rel(a): sha256(a) for a in (prog.json_path, prog.p4info_path)},
    }
    prog.stamp_path.write_text(json.dumps(stamp, indent=1, sort_keys=True) + "\n")


def relativise_source_paths(json_path: Path) -> None:
    """p4c records absolute source file names in the JSON's source_info; make them relative to
    the repository so the committed artifact does not depend on where it was compiled."""
    text = json_path.read_text()
    json_path.write_text(text.replace(f'"{ROOT.as_posix()}/', '"'))


def check_program(prog: Program) -> list[str]:
    """Every way in which the committed artifacts of ``prog`` disagree with its sources."""
    if not prog.stamp_path.exists():
        return [f"{prog.name}: no stamp at {rel(prog.stamp_path)}; run `make p4` where p4c is installed"]
    stamp = json.loads(prog.stamp_path.read_text())
    problems = []
    current = {rel(s): sha256(s) for s in prog.sources}
    for path in sorted(set(current) | set(stamp["sources"])):
        if path not in stamp["sources"]:
            problems.append(f"{path} is new since {prog.name} was compiled")
        elif path not in current:
            problems.append(f"{path} was removed since {prog.name} was compiled")
        elif current[path] != stamp["sources"][path]:
            problems.append(f"{path} changed since {prog.name} was compiled")
    for path, digest in stamp["artifacts"].items():
        art = ROOT / path
        if not art.exists():
            problems.append(f"{path} is missing")
        elif sha256(art) != digest:
            problems.append(f"{path} does not match its stamp (edited by hand?)")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    comp = sub.add_parser("compile", help="recompile with p4c and refresh the stamps")
    comp.add_argument("names", nargs="*", help="program names (default: all)")
    sub.add_parser("check", help="fail if sources and compiled artifacts disagree")
    args = parser.parse_args(argv)

    progs = programs()
    if args.command == "compile":
        if shutil.which(P4C) is None:
            print(f"error: {P4C} is not on PATH; install p4c (see README) to recompile", file=sys.stderr)
            return 2
        for prog in progs:
            if not args.names or prog.name in args.names:
                compile_program(prog)
        return 0

    problems = [p for prog in progs for p in check_program(prog)]
    if problems:
        print("P4 artifacts are out of date:", *problems, sep="\n  ", file=sys.stderr)
        print("Run `make p4` where p4c is installed and commit p4src/compiled/.", file=sys.stderr)
        return 1
    print(f"P4 artifacts match their sources ({len(progs)} programs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

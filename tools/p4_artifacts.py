"""Compile the project's P4 programs with p4c and check the committed artifacts against their
sources.

Every v1model program is compiled by p4c-bm2-ss into ``<outdir>/<name>.json`` (bmv2 JSON) and
``<outdir>/<name>.p4info.txtpb`` (P4Info, text format); the TNA program (``p4src/tofino/``) by
the open Tofino compiler into ``bfrt.json``, ``context.json`` and ``resources.json`` (what a
deployment loads and what shows the fit; not ``tofino.bin``, docs/tofino.md).  Beside them,
``<name>.stamp.json`` records the SHA-256 of every source file and every artifact, and the
compiler version that made them.  ``check`` fails when a source or an artifact no longer matches
its stamp, so a P4 change can never land without the compiled program that goes with it.

Usage:  python tools/p4_artifacts.py compile [NAME ...]   (default: the v1model programs)
        python tools/p4_artifacts.py check
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
P4C = "p4c-bm2-ss"
# The open Tofino compiler's driver: p4c with its Tofino backend (bf-p4c where it is installed
# under that name).
TOFINO_P4C = os.environ.get("TOFINO_P4C") or ("bf-p4c" if shutil.which("bf-p4c") else "p4c")
TOFINO_DIR = ROOT / "p4src" / "tofino"
TOFINO_ARTIFACTS = ("bfrt.json", "context.json", "resources.json")


@dataclass(frozen=True)
class Program:
    """One P4 program: its top-level source, the sources it depends on, and where its outputs go."""

    name: str
    main: Path
    sources: tuple[Path, ...]
    outdir: Path
    tofino: bool = False

    @property
    def artifacts(self) -> tuple[Path, ...]:
        if self.tofino:
            return tuple(self.outdir / a for a in TOFINO_ARTIFACTS)
        return (self.json_path, self.p4info_path)

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
    """The project's v1model program (``p4src/`` but ``p4src/tofino/``), its TNA program and
    the small executor test programs."""
    main_sources = tuple(sorted(p for p in (ROOT / "p4src").rglob("*.p4")
                                if TOFINO_DIR not in p.parents))
    found = [Program("sa_atp", ROOT / "p4src" / "sa_atp.p4", main_sources,
                     ROOT / "p4src" / "compiled"),
             Program("sa_atp_tna", TOFINO_DIR / "sa_atp_tna.p4",
                     tuple(sorted(TOFINO_DIR.rglob("*.p4"))), TOFINO_DIR / "compiled", tofino=True)]
    test_dir = ROOT / "tests" / "p4programs"
    for src in sorted(test_dir.glob("*.p4")):
        found.append(Program(src.stem, src, (src,), test_dir / "compiled"))
    return found


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def p4c_version(compiler: str = P4C) -> str:
    out = subprocess.run([compiler, "--version"], capture_output=True, text=True, check=True)
    return (out.stdout + out.stderr).strip().splitlines()[-1]


def run(cmd: list[str]) -> None:
    print("+", " ".join(rel(Path(c)) if c.startswith(str(ROOT)) else c for c in cmd))
    subprocess.run(cmd, check=True, cwd=ROOT)


def compile_program(prog: Program) -> None:
    prog.outdir.mkdir(parents=True, exist_ok=True)
    if prog.tofino:
        compile_tofino(prog)
    else:
        run([P4C, "--arch", "v1model", "--std", "p4-16", "-o", str(prog.json_path),
             "--p4runtime-files", str(prog.p4info_path), str(prog.main)])
    for artifact in prog.artifacts:
        relativise_source_paths(artifact)
    version = p4c_version(TOFINO_P4C if prog.tofino else P4C)
    if prog.tofino:   # the driver's version says nothing of the backend that placed the program
        context = json.loads((prog.outdir / "context.json").read_text())
        version += f", Tofino backend {context['compiler_version'].split()[0]}"
    stamp = {
        "p4c": version,
        "sources": {rel(s): sha256(s) for s in prog.sources},
        "artifacts": {rel(a): sha256(a) for a in prog.artifacts},
    }
    prog.stamp_path.write_text(json.dumps(stamp, indent=1, sort_keys=True) + "\n")


def compile_tofino(prog: Program) -> None:
    """Compile for Tofino 1 into a scratch directory and keep the schema, the context (the
    placement the driver loads) and the resource report, where the driver's manifest says it
    wrote them; the binary stays behind."""
    with tempfile.TemporaryDirectory(prefix="sa_atp_tna-") as out:
        # "unsupported" warnings are errors: the compiled program would not do what the source
        # says (e.g. a parser field assigned twice on one path, which Tofino ORs).
        run([TOFINO_P4C, "--target", "tofino", "--arch", "tna", "--std", "p4-16", "-g",
             "--Werror=unsupported",
             "-o", out, "--bf-rt-schema", f"{out}/bfrt.json", str(prog.main)])
        manifest = json.loads((Path(out) / "manifest.json").read_text())
        [pipe] = manifest["programs"][0]["pipes"]
        files = {"bfrt.json": "bfrt.json", "context.json": pipe["files"]["context"]["path"],
                 "resources.json": next(r["path"] for r in pipe["files"]["resources"]
                                        if r["type"] == "resources")}
        for name, found in files.items():
            shutil.copyfile(Path(out) / found, prog.outdir / name)


def relativise_source_paths(json_path: Path) -> None:
    """p4c records absolute source file names in the JSON's source_info; make them relative to
    the repository so the committed artifact does not depend on where it was compiled."""
    text = json_path.read_text()
    json_path.write_text(text.replace(f'"{ROOT.as_posix()}/', '"'))


def check_program(prog: Program) -> list[str]:
    """Every way in which the committed artifacts of ``prog`` disagree with its sources."""
    if not prog.stamp_path.exists():
        return [f"{prog.name}: no stamp at {rel(prog.stamp_path)}; run `make p4` where p4c is "
                f"installed"]
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
        chosen = [p for p in progs if p.name in args.names or (not args.names and not p.tofino)]
        for compiler in {TOFINO_P4C if p.tofino else P4C for p in chosen}:
            if shutil.which(compiler) is None:
                print(f"error: {compiler} is not on PATH; install p4c (see README, and "
                      f"docs/tofino.md for the Tofino compiler) to recompile", file=sys.stderr)
                return 2
        for prog in chosen:
            compile_program(prog)
        return 0

    problems = [p for prog in progs for p in check_program(prog)]
    if problems:
        print("P4 artifacts are out of date:", *problems, sep="\n  ", file=sys.stderr)
        print("Run `make p4` (or `make tofino`) where the compiler is installed and commit the "
              "compiled artifacts.", file=sys.stderr)
        return 1
    print(f"P4 artifacts match their sources ({len(progs)} programs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

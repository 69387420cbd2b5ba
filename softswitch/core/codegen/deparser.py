"""Deparsers and checksums: ``_DEPARSE<n>(F, V, p)`` updates the checksums, then emits the valid
headers in order and the payload; ``_VERIFY(F, V, p)`` checks the checksums after parsing."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import ProgramError, UnsupportedConstruct
from ..expressions import DATA, Expr, ExprCompiler, store_code, unsigned_code
from ..layout import Field
from .calculations import Calculation

if TYPE_CHECKING:
    from .module import ModuleGenerator

# (JSON node, condition code or None, target field, calculation)
Checksum = tuple[dict, str | None, Field, Calculation]


def prepare_checksums(gen: ModuleGenerator) -> list[Checksum]:
    result = []
    ec = ExprCompiler(gen.layout, None)
    for ck in gen.root.get("checksums", []):
        if ck.get("type", "generic") != "generic":
            raise UnsupportedConstruct(f"checksum of type {ck.get('type')!r}", ck)
        target = gen.layout.field(ck["target"][0], ck["target"][1], ck)
        calc = gen.calculations.get(ck.get("calculation"))
        if calc is None:
            raise ProgramError(f"checksum uses unknown calculation {ck.get('calculation')!r}",
                               ck)
        cond = None
        if ck.get("if_cond") is not None:
            cond = ec.compile_bool(ck["if_cond"], ck)
        result.append((ck, cond, target, calc))
    return result


def gen_checksum_verify(gen: ModuleGenerator, checksums: list[Checksum]) -> None:
    """``_VERIFY(F, V, p) -> bool``: True when a verified checksum does not match (bmv2 skips
    checksums whose target header is invalid or whose condition is false)."""
    src = gen.src
    src.line("def _VERIFY(F, V, p):")
    src.depth += 1
    src.line("_bad = False")
    for ck, cond, target, calc in checksums:
        if not ck.get("verify", True):
            continue
        tests = [] if target.header.metadata else [f"V[{target.header.vindex}]"]
        if cond:
            tests.append(cond)
        src.line(f"if {' and '.join(tests) if tests else 'True'}:")
        src.line(f"    if {calc.gname}(F, V, p) != {unsigned_code(target)}:")
        src.line("        _bad = True")
    src.line("return _bad")
    src.depth -= 1
    src.line()


def gen_deparsers(gen: ModuleGenerator, checksums: list[Checksum]) -> dict[str, str]:
    entries = {}
    for n, dep in enumerate(gen.root.get("deparsers", [])):
        if dep.get("primitives"):
            raise UnsupportedConstruct("method calls in a deparser", dep)
        fname = f"_DEPARSE{n}"
        entries[dep["name"]] = fname
        src = gen.src
        src.line(f"def {fname}(F, V, p):")
        src.depth += 1
        for ck, cond, target, calc in checksums:
            if not ck.get("update", True):
                continue
            value = Expr(f"{calc.gname}(F, V, p)", DATA, None)
            stmt = f"F[{target.index}] = {store_code(target, value)}"
            if cond:
                src.line(f"if {cond}:")
                src.line(f"    {stmt}")
            else:
                src.line(stmt)
        src.line("_o = []")
        for hname in dep.get("order", []):
            h = gen.layout.header(hname, dep)
            codec = gen.codecs.get(h.vindex)
            if codec is None:
                raise UnsupportedConstruct("emitting a metadata header", dep)
            src.line(f"if V[{h.vindex}]:")
            src.line(f"    _o.append({codec.emit_expression()})")
        src.line("_o.append(p.payload)")
        src.line("return b''.join(_o)")
        src.depth -= 1
        src.line()
    return entries

"""Calculations (bmv2's NamedCalculation): a hash over fields, constants and the payload becomes
``_K<id>(F, V, p)``, used by checksums (deparser.py) and ``modify_field_with_hash_based_offset``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import UnsupportedConstruct
from ..expressions import parse_hexstr, unsigned_code
from ..hashes import ALGORITHMS, csum16_int
from ..layout import VALID_FIELD, Header

if TYPE_CHECKING:
    from .module import ModuleGenerator


@dataclass
class Calculation:
    name: str
    algo: str
    gname: str


def gen_calculations(gen: ModuleGenerator) -> None:
    for calc in gen.root.get("calculations", []):
        algo = calc["algo"]
        if algo not in ALGORITHMS:
            raise UnsupportedConstruct(f"hash algorithm {algo!r}", calc)
        info = Calculation(calc["name"], algo, f"_K{calc['id']}")
        gen.calculations[calc["name"]] = info
        gen.constants[f"_H_{algo}"] = ALGORITHMS[algo]
        gen.constants["_csum16_int"] = csum16_int
        _gen_calculation(gen, calc, info)


def _gen_calculation(gen: ModuleGenerator, calc: dict, info: Calculation) -> None:
    # Input bits are concatenated without padding, fields of invalid headers skipped
    # (bmv2 BufBuilder); the last partial byte is zero-filled on the right.
    segments: list[tuple[Header | None, list[tuple[str, int]]]] = []
    with_payload = False
    for item in calc["input"]:
        t = item["type"]
        if with_payload:
            raise UnsupportedConstruct("calculation input after 'payload'", calc)
        if t == "field":
            hname, fname = item["value"]
            header = gen.layout.header(hname, calc)
            if fname == VALID_FIELD:
                terms = [("0" if header.metadata else f"(1 if V[{header.vindex}] else 0)", 1)]
            else:
                f = gen.layout.field(hname, fname, calc)
                terms = [(unsigned_code(f), f.width)]
        elif t == "header":
            header = gen.layout.header(item["value"], calc)
            terms = [(unsigned_code(f), f.width) for f in header.fields]
        elif t == "hexstr":
            width = int(item["bitwidth"])
            value = parse_hexstr(item["value"], calc) & ((1 << width) - 1)
            segments.append((None, [(f"{value:#x}", width)]))
            continue
        elif t == "payload":
            with_payload = True
            continue
        else:
            raise UnsupportedConstruct(f"calculation input of type {t!r}", calc)
        guard = None if header.metadata else header
        if segments and segments[-1][0] is guard and guard is not None:
            segments[-1][1].extend(terms)
        else:
            segments.append((guard, terms))
    src = gen.src
    src.line(f"def {info.gname}(F, V, p):")
    src.depth += 1
    dynamic = any(guard is not None for guard, _ in segments)
    static_bits = 0
    src.line("_a = 0")
    if dynamic:
        src.line("_n = 0")
    for guard, terms in segments:
        width = sum(w for _, w in terms)
        parts, shift = [], width
        for code, w in terms:
            shift -= w
            parts.append(f"({code} << {shift})" if shift else code)
        stmt = f"_a = (_a << {width}) | {' | '.join(parts)}"
        if guard is None:
            src.line(stmt)
            if dynamic:
                src.line(f"_n += {width}")
            static_bits += width
        else:
            src.line(f"if V[{guard.vindex}]:")
            src.line(f"    {stmt}")
            src.line(f"    _n += {width}")
    if info.algo == "csum16" and not with_payload:
        # 16-bit words of the zero-padded input, summed in ones' complement, from the int.
        if dynamic:
            src.line("return _csum16_int(_a << (-_n % 16))")
        else:
            src.line(f"return _csum16_int(_a << {-static_bits % 16})")
    else:
        if dynamic:
            src.line("_pad = -_n % 8")
            src.line("_d = (_a << _pad).to_bytes((_n + _pad) >> 3, 'big')")
        else:
            pad = -static_bits % 8
            src.line(f"_d = (_a << {pad}).to_bytes({(static_bits + pad) // 8}, 'big')")
        if with_payload:
            src.line("_d += p.payload")
        src.line(f"return _H_{info.algo}(_d)")
    src.depth -= 1
    src.line()

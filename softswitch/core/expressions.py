"""Translate bmv2 JSON expressions into Python source.

bmv2 evaluates expressions with unbounded integers and truncates only when a value is stored into a
field or register; Python ints have the same semantics, so every JSON operator maps onto one Python
operator (p4c emits the explicit ``& mask`` / ``two_comp_mod`` that make ``bit<W>``/``int<W>``
arithmetic wrap).  Each compiled expression carries a ``bound``: when known, the value is
guaranteed to lie in ``[0, 2**bound)``, which lets stores skip a redundant mask.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import ProgramError, UnsupportedConstruct
from .layout import VALID_FIELD, Field, Header, Layout

DATA, BOOL, HEADER = "data", "bool", "header"

# Shift amounts up to this many bits are evaluated inline; larger dynamic shifts go through a guard.
_INLINE_SHIFT_BITS = 16


@dataclass(frozen=True)
class Expr:
    code: str
    kind: str
    bound: int | None = None  # value known to be in [0, 2**bound)
    header: Header | None = None  # for HEADER expressions
    const: int | None = None  # for constant DATA expressions
    truth: str | None = None  # DATA that is 0/1 from a boolean: that boolean's code
    shift: tuple[str, str] | None = None  # a dynamic left shift: (value code, amount code)


def parse_hexstr(text: str, node: object = None) -> int:
    """bmv2 ``hexstr``: optional '-' sign, optional '0x' prefix, big-endian hex digits."""
    try:
        return int(text, 16)
    except (TypeError, ValueError):
        raise ProgramError(f"invalid hexstr {text!r}", node) from None


def store_code(f: Field, e: Expr) -> str:
    """Source for the value of ``e`` normalised to field ``f`` (truncated exactly as bmv2 does)."""
    if e.kind != DATA:
        raise ProgramError(f"cannot store a {e.kind} expression into field {f.full_name}")
    return normalize_code(e, f.width, f.signed)


def normalize_code(e: Expr, width: int, signed: bool) -> str:
    if not signed:
        if e.bound is not None and e.bound <= width:
            return e.code
        return f"({e.code} & {(1 << width) - 1:#x})"
    if e.bound is not None and e.bound <= width - 1:
        return e.code
    half = 1 << (width - 1)
    return f"((({e.code} + {half:#x}) & {(1 << width) - 1:#x}) - {half:#x})"


def unsigned_code(f: Field) -> str:
    """Source reading field ``f`` as its unsigned two's-complement bit pattern (for keys and
    hashes)."""
    return f"(F[{f.index}] & {f.mask:#x})" if f.signed else f"F[{f.index}]"


class ExprCompiler:
    """Compiles type-value JSON objects.  ``local_widths`` are the widths of the enclosing action's
    runtime data (``None`` where no action data exists, e.g. in conditionals)."""

    def __init__(self, layout: Layout, local_widths: list[int] | None = None):
        self.layout = layout
        self.local_widths = local_widths

    # -- leaves ---------------------------------------------------------------------------------

    def field_ref(self, value: list, node: object) -> Expr:
        hname, fname = value[0], value[1]
        if fname == VALID_FIELD:
            header = self.layout.header(hname, node)
            # bmv2 keeps a hidden 1-bit field, set only by mark_valid/mark_invalid; metadata
            # headers are never marked, so their hidden field reads 0.
            if header.metadata:
                return Expr("0", DATA, 0, const=0)
            return Expr(f"(1 if V[{header.vindex}] else 0)", DATA, 1, truth=f"V[{header.vindex}]")
        f = self.layout.field(hname, fname, node)
        return Expr(f"F[{f.index}]", DATA, None if f.signed else f.width)

    def const(self, value: int) -> Expr:
        return Expr(repr(value) if -10 < value < 10 else f"{value:#x}" if value >= 0
                    else f"-{-value:#x}", DATA, value.bit_length() if value >= 0 else None,
                    const=value)

    # -- entry point ----------------------------------------------------------------------------

    def compile(self, tv: object, node: object = None) -> Expr:
        """Compile a type-value object (``{"type": ..., "value": ...}``)."""
        if not isinstance(tv, dict) or "type" not in tv:
            raise ProgramError("expected a type-value object", node if tv is None else tv)
        t, v = tv["type"], tv.get("value")
        where = node if node is not None else tv
        if t == "field":
            return self.field_ref(v, where)
        if t == "hexstr":
            return self.const(parse_hexstr(v, where))
        if t == "bool":
            return Expr("True" if v else "False", BOOL)
        if t == "header":
            header = self.layout.header(v, where)
            return Expr(str(header.vindex), HEADER, header=header)
        if t == "local":
            if self.local_widths is None or not 0 <= v < len(self.local_widths):
                raise ProgramError(f"'local' reference {v} outside of an action's runtime data",
                                   where)
            return Expr(f"D[{v}]", DATA, self.local_widths[v])
        if t == "expression":
            if isinstance(v, dict) and "op" in v:
                return self._op(v, where)
            return self.compile(v, where)
        raise UnsupportedConstruct(f"expression operand of type {t!r}", where)

    def compile_bool(self, tv: object, node: object = None) -> str:
        e = self.compile(tv, node)
        if e.kind != BOOL:
            raise ProgramError("expected a boolean expression", node or tv)
        return e.code

    def compile_data(self, tv: object, node: object = None) -> Expr:
        e = self.compile(tv, node)
        if e.kind != DATA:
            raise ProgramError("expected an integral expression", node or tv)
        return e

    # -- operators ------------------------------------------------------------------------------

    def _op(self, v: dict, node: object) -> Expr:
        op = v["op"]
        left, right = v.get("left"), v.get("right")
        if op == "?":
            c = self.compile_bool(v["cond"], node)
            a, b = self.compile(left, node), self.compile(right, node)
            if a.kind != b.kind:
                raise ProgramError("ternary operator branches have different types", node)
            bound = max(a.bound, b.bound) if a.bound is not None and b.bound is not None else None
            return Expr(f"({a.code} if {c} else {b.code})", a.kind, bound, a.header)
        if op in ("and", "or"):
            a, b = self.compile_bool(left, node), self.compile_bool(right, node)
            return Expr(f"({a} {op} {b})", BOOL)
        if op == "not":
            return Expr(f"(not {self.compile_bool(right, node)})", BOOL)
        if op == "valid":
            h = self.compile(right, node)
            if h.kind != HEADER:
                raise ProgramError("'valid' expects a header operand", node)
            return Expr(f"V[{h.code}]", BOOL)
        if op == "d2b":
            e = self.compile_data(right, node)
            if e.truth is not None:  # d2b(b2d(x)) is x
                return Expr(e.truth, BOOL)
            if e.const is not None:
                return Expr("True" if e.const else "False", BOOL)
            return Expr(f"({e.code} != 0)", BOOL)
        if op == "b2d":
            c = self.compile_bool(right, node)
            if c in ("True", "False"):
                return self.const(int(c == "True"))
            return Expr(f"(1 if {c} else 0)", DATA, 1, truth=c)
        if op in ("==", "!="):
            return self._equality(op, left, right, node)
        if op in ("<", "<=", ">", ">="):
            a, b = self.compile_data(left, node), self.compile_data(right, node)
            return Expr(f"({a.code} {op} {b.code})", BOOL)
        if op in ("+", "-") and left is None:
            b = self.compile_data(right, node)
            return b if op == "+" else Expr(f"(-{b.code})", DATA)
        if op == "~":
            return Expr(f"(~{self.compile_data(right, node).code})", DATA)
        if op in ("two_comp_mod", "usat_cast", "sat_cast"):
            return self._cast(op, left, right, node)
        if op in _ARITH:
            return self._arith(op, self.compile_data(left, node), self.compile_data(right, node))
        raise UnsupportedConstruct(f"expression operator {op!r}", node)

    def _equality(self, op: str, left: object, right: object, node: object) -> Expr:
        a, b = self.compile(left, node), self.compile(right, node)
        if a.kind != b.kind:
            raise ProgramError(f"operands of {op!r} have different types", node)
        if a.kind == HEADER:
            code = f"_header_equal(F, V, {a.header.vindex}, {b.header.vindex})"
            if a.header.type_name != b.header.type_name:
                code = "False"
            return Expr(code if op == "==" else f"(not {code})", BOOL)
        return Expr(f"({a.code} {op} {b.code})", BOOL)

    def _cast(self, op: str, left: object, right: object, node: object) -> Expr:
        src = self.compile_data(left, node)
        width = self.compile_data(right, node)
        if width.const is None or width.const < 1:
            raise UnsupportedConstruct(f"{op} with a non-constant width", node)
        w = width.const
        if op == "two_comp_mod":
            if w < 2:
                raise ProgramError("two_comp_mod width must be at least 2", node)
            return Expr(normalize_code(src, w, True), DATA)
        if op == "usat_cast":
            hi = (1 << w) - 1
            return Expr(f"min(max({src.code}, 0), {hi:#x})", DATA, w)
        lo, hi = -(1 << (w - 1)), (1 << (w - 1)) - 1
        return Expr(f"min(max({src.code}, -{-lo:#x}), {hi:#x})", DATA)

    @staticmethod
    def _arith(op: str, a: Expr, b: Expr) -> Expr:
        known = a.bound is not None and b.bound is not None
        if op == "+":
            bound = max(a.bound, b.bound) + 1 if known else None
            return Expr(f"({a.code} + {b.code})", DATA, bound)
        if op == "-":
            return Expr(f"({a.code} - {b.code})", DATA)
        if op == "*":
            return Expr(f"({a.code} * {b.code})", DATA, a.bound + b.bound if known else None)
        if op == "&":
            bounds = [x for x in (a.bound, b.bound) if x is not None]
            bound = min(bounds) if bounds else None
            shifted, mask = (a, b) if a.shift is not None else (b, a)
            if shifted.shift is not None and mask.const is not None and mask.const >= 0:
                # p4c's bit<W> shift, (x << y) & mask: a shift past the mask's width is 0.
                value, amount = shifted.shift
                width = mask.const.bit_length()
                return Expr(f"(({value} << {amount}) & {mask.code} if {amount} < {width} "
                            "else 0)", DATA, bound)
            return Expr(f"({a.code} & {b.code})", DATA, bound)
        if op in ("|", "^"):
            return Expr(f"({a.code} {op} {b.code})", DATA, max(a.bound, b.bound) if known else None)
        if op == ">>":
            return Expr(f"({a.code} >> {b.code})", DATA, a.bound)
        if op == "<<":
            if b.const is not None:
                return Expr(f"({a.code} << {b.const})", DATA,
                            a.bound + b.const if a.bound is not None else None)
            if b.bound is not None and b.bound <= _INLINE_SHIFT_BITS:
                return Expr(f"({a.code} << {b.code})", DATA, shift=(a.code, b.code))
            return Expr(f"_shift_left({a.code}, {b.code})", DATA, shift=(a.code, b.code))
        if op in ("/", "%"):
            if b.const is not None and b.const > 0:
                code = f"({a.code} {'//' if op == '/' else '%'} {b.code})"
            else:
                code = f"{'_divide' if op == '/' else '_modulo'}({a.code}, {b.code})"
            bound = a.bound if op == "/" else (b.bound if b.bound is not None else a.bound)
            return Expr(code, DATA, bound)
        raise AssertionError(op)


_ARITH = {"+", "-", "*", "/", "%", "&", "|", "^", "<<", ">>"}

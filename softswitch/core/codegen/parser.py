"""Parsers: parse states become functions over the packet bytes ``b`` and the offset ``o``; a
parser error is raised as ``_ParserError(code, offset)`` and stored in ``p.parser_error`` with
bmv2's codes (:func:`error_codes`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import ProgramError, UnsupportedConstruct
from ..expressions import DATA, Expr, ExprCompiler, parse_hexstr, store_code, unsigned_code
from ..layout import VALID_FIELD
from .source import MAX_NESTING

if TYPE_CHECKING:
    from .module import ModuleGenerator

CORE_ERRORS = ("NoError", "PacketTooShort", "NoMatch", "StackOutOfBounds", "HeaderTooShort",
               "ParserTimeout", "ParserInvalidArgument")


def error_codes(root: dict) -> dict[str, int]:
    """Error name -> value, completed with the core errors exactly as bmv2's ErrorCodeMap does."""
    codes: dict[str, int] = {}
    for name, value in root.get("errors", []):
        if name in codes or value in codes.values():
            raise ProgramError("invalid errors specification", root.get("errors"))
        codes[name] = value
    next_value = max(codes.values()) + 1 if codes else 0
    for name in CORE_ERRORS:
        if name not in codes:
            codes[name] = next_value
            next_value += 1
    return codes


def gen_parsers(gen: ModuleGenerator) -> dict[str, str]:
    """Returns parser name -> generated entry function name.

    A parse state reached from exactly one other state (statically) is inlined into it, so a
    typical chain of states runs as one function; the other states are functions
    ``_S<id>(F, V, p, b, o) -> (next state function or None, o)``."""
    entries = {}
    for n, parser in enumerate(gen.root.get("parsers", [])):
        fname = f"_PARSE{n}"
        entries[parser["name"]] = fname
        init = parser.get("init_state")
        states = ParserGenerator(gen, parser)
        init_fn = states.generate(init) if init is not None else "None"
        src = gen.src
        src.line(f"def {fname}(F, V, p, b):")
        src.depth += 1
        src.line(f"_st = {init_fn}")
        src.line("_o = 0")
        src.line(f"p.parser_error = {gen.errors['NoError']}")
        src.line("try:")
        src.line("    while _st is not None:")
        src.line("        _st, _o = _st(F, V, p, b, _o)")
        src.line("except _ParserError as _e:")
        src.line("    p.parser_error = _e.code")
        src.line("    _o = _e.offset")
        src.line("p.payload = b[_o:]")
        src.depth -= 1
        src.line()
    return entries


class ParserGenerator:
    """Generates the state functions of one parser, inlining states with a single predecessor."""

    def __init__(self, gen: ModuleGenerator, parser: dict):
        self.gen = gen
        self.states = {s["name"]: s for s in parser.get("parse_states", [])}
        self.ec = ExprCompiler(gen.layout, None)
        self.transitions = {name: self.transition(s, set(self.states))
                            for name, s in self.states.items()}
        self.standalone: set[str] = set()
        indegree = dict.fromkeys(self.states, 0)
        for _, cases, default in self.transitions.values():
            targets = [nxt for _, _, nxt in cases] + [default]
            for t in targets:
                if t is not None:
                    indegree[t] += 1
            if self._dispatch_table(cases):
                self.standalone.update(t for t in targets if t is not None)
        self.standalone.update(n for n, d in indegree.items() if d != 1)

    @staticmethod
    def _dispatch_table(cases) -> bool:
        return all(m is None for _, m, _ in cases) and len(cases) > 3

    def fname(self, name: str) -> str:
        return f"_S{self.states[name]['id']}"

    def generate(self, init: str) -> str:
        if init not in self.states:
            raise ProgramError(f"unknown init_state {init!r}")
        self.standalone.add(init)
        done: set[str] = set()
        while self.standalone - done:
            name = min(self.standalone - done, key=lambda n: self.states[n]["id"])
            done.add(name)
            self.gen.src.line(f"def {self.fname(name)}(F, V, p, b, o):")
            self.gen.src.depth += 1
            self.gen.src.extend(self.state(name, {name}, 1))
            self.gen.src.depth -= 1
            self.gen.src.line()
        return self.fname(init)

    def target(self, name: str | None, path: set[str], nest: int) -> list[str]:
        if name is None:
            return ["return None, o"]
        if name in self.standalone or name in path or nest > MAX_NESTING:
            self.standalone.add(name)
            return [f"return {self.fname(name)}, o"]
        return self.state(name, path | {name}, nest)

    def state(self, name: str, path: set[str], nest: int) -> list[str]:
        lines = []
        for op in self.states[name].get("parser_ops", []):
            lines.extend(self.parser_op(op, self.ec))
        key, cases, default = self.transitions[name]
        if key is None:
            return lines + self.target(default, path, nest)
        lines.append(f"_k = {key}")
        if self._dispatch_table(cases):
            table: dict[int, str] = {}
            for value, _, nxt in cases:
                table.setdefault(value, "None" if nxt is None else self.fname(nxt))
            tname = f"_T{self.states[name]['id']}"
            entries = ", ".join(f"{v:#x}: {n}" for v, n in table.items())
            self.gen.deferred.append(f"{tname} = {{{entries}}}")
            dflt = "None" if default is None else self.fname(default)
            return lines + [f"return {tname}.get(_k, {dflt}), o"]
        for value, mask, nxt in cases:
            test = f"_k == {value:#x}" if mask is None else f"_k & {mask:#x} == {value:#x}"
            lines.append(f"if {test}:")
            lines.extend("    " + x for x in self.target(nxt, path, nest + 1))
        return lines + self.target(default, path, nest)

    def _too_short(self) -> str:
        return f"raise _ParserError({self.gen.errors['PacketTooShort']}, o)"

    def _lookahead(self, tv: dict, node: object) -> tuple[str, int, int]:
        """(expression peeking at the bits, bytes needed, bit width) for a lookahead reference."""
        offset, width = int(tv["value"][0]), int(tv["value"][1])
        byte_off, bit_off = offset // 8, offset % 8
        nbytes = (bit_off + width + 7) // 8
        shift = nbytes * 8 - bit_off - width
        raw = (f"int.from_bytes(b[o + {byte_off}:o + {byte_off + nbytes}]"
               f".ljust({nbytes}, b'\\0'), 'big')")
        code = f"(({raw} >> {shift}) & {(1 << width) - 1:#x})" if shift else \
            f"({raw} & {(1 << width) - 1:#x})"
        return code, (width + 7) // 8, width

    def parser_op(self, op: dict, ec: ExprCompiler) -> list[str]:
        kind = op.get("op")
        params = op.get("parameters", [])
        if kind == "extract":
            if len(params) != 1 or params[0].get("type") != "regular":
                raise UnsupportedConstruct(
                    f"extract into a {params[0].get('type') if params else '?'!r} target "
                    "(header stacks and unions are not supported)", op)
            h = self.gen.layout.header(params[0]["value"], op)
            codec = self.gen.codecs.get(h.vindex)
            if codec is None:
                raise UnsupportedConstruct("extract into a metadata header", op)
            return [f"if len(b) - o < {h.nbytes}:", f"    {self._too_short()}",
                    *codec.extract_lines("b", "o"), f"V[{h.vindex}] = True", f"o += {h.nbytes}"]
        if kind == "set":
            f = self.gen.field_of(params[0], op)
            src = params[1]
            if src.get("type") == "lookahead":
                code, nbytes, width = self._lookahead(src, op)
                return [f"if len(b) - o < {nbytes}:", f"    {self._too_short()}",
                        f"F[{f.index}] = {store_code(f, Expr(code, DATA, width))}"]
            return [f"F[{f.index}] = {store_code(f, self.gen.data_param(ec, src, op))}"]
        if kind == "verify":
            cond = ec.compile_bool(params[0], op)
            if isinstance(params[1], int):
                err = str(params[1])
            else:
                err = ec.compile_data(params[1], op).code
            return [f"if not {cond}:", f"    raise _ParserError({err}, o)"]
        if kind == "primitive":
            return self.gen.primitives.primitive(params[0], ec)
        if kind == "shift":
            n = int(params[0])
            return [f"if len(b) - o < {n}:", f"    {self._too_short()}", f"o += {n}"]
        if kind == "advance":
            amount = self.gen.data_param(ec, params[0], op)
            invalid = f"raise _ParserError({self.gen.errors['ParserInvalidArgument']}, o)"
            return [f"_a = {amount.code}", "if _a < 0 or _a % 8:", f"    {invalid}",
                    "_a >>= 3", "if len(b) - o < _a:", f"    {self._too_short()}", "o += _a"]
        raise UnsupportedConstruct(f"parser operation {kind!r}", op)

    def transition(self, state: dict, states: set[str]
                   ) -> tuple[str | None, list[tuple[int, int | None, str | None]], str | None]:
        """(key expression or None, [(value, mask or None, next)], default next)."""
        def target(name):
            if name is not None and name not in states:
                raise ProgramError(f"unknown next_state {name!r}", state)
            return name

        default = None
        cases: list[tuple[int, int | None, str | None]] = []
        for tr in state.get("transitions", []):
            t = tr.get("type", "hexstr")
            if t == "hexstr" and tr.get("value") == "default":
                t = "default"
            if t == "default":
                default = target(tr.get("next_state"))
            elif t == "hexstr":
                mask = tr.get("mask")
                value = parse_hexstr(tr["value"], tr)
                m = None if mask is None else parse_hexstr(mask, tr)
                cases.append((value if m is None else value & m, m,
                              target(tr.get("next_state"))))
            else:
                raise UnsupportedConstruct(f"parser transition of type {t!r} "
                                           "(value sets are not supported)", state)
        keys = state.get("transition_key", [])
        if not keys or not cases:
            return None, [], default
        terms = []
        widths = []
        for k in keys:
            if k["type"] == "field":
                hname, fname = k["value"]
                if fname == VALID_FIELD:
                    terms.append(ExprCompiler(self.gen.layout).field_ref(k["value"], state).code)
                    widths.append(1)
                    continue
                f = self.gen.layout.field(hname, fname, state)
                terms.append(unsigned_code(f))
                widths.append(f.width)
            elif k["type"] == "lookahead":
                code, _, width = self._lookahead(k, state)
                terms.append(code)
                widths.append(width)
            else:
                raise UnsupportedConstruct(f"transition key element of type {k['type']!r}", state)
        # The key is the concatenation of the byte-padded key elements, as in the JSON values.
        padded = [(w + 7) // 8 * 8 for w in widths]
        parts, shift = [], sum(padded)
        for code, w in zip(terms, padded, strict=True):
            shift -= w
            parts.append(f"({code} << {shift})" if shift else code)
        return " | ".join(parts), cases, default

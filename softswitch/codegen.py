"""Generate one Python module per program: actions, parser, deparser, calculations, table keys and
conditionals become plain functions over the packet header vector (``F``, ``V``) and the packet
instance ``p``.  The module is compiled once per program and executed once per switch, with the
switch's state objects (registers, counters, tables, random source, clock) bound as its globals.

Every construct the generator does not translate raises :class:`UnsupportedConstruct` here, at
load time, naming the JSON node.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .errors import ProgramError, UnsupportedConstruct
from .expressions import (
    DATA,
    Expr,
    ExprCompiler,
    normalize_code,
    parse_hexstr,
    store_code,
    unsigned_code,
)
from .hashes import ALGORITHMS, csum16_int
from .headercodec import HeaderCodec, header_codec
from .layout import VALID_FIELD, Field, Header, Layout

_INDEXED = ("register_read", "register_write", "count")
CORE_ERRORS = ("NoError", "PacketTooShort", "NoMatch", "StackOutOfBounds", "HeaderTooShort",
               "ParserTimeout", "ParserInvalidArgument")


class Source:
    """Indented source text."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.depth = 0

    def line(self, text: str = "") -> None:
        self.lines.append("    " * self.depth + text if text else "")

    def extend(self, lines: list[str]) -> None:
        for text in lines:
            self.line(text)

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


@dataclass
class RegisterInfo:
    name: str
    size: int
    bitwidth: int
    gname: str


@dataclass
class CounterInfo:
    name: str
    size: int
    is_direct: bool
    binding: str | None
    gname: str  # prefix: <gname>_p (packets) and <gname>_b (bytes)


@dataclass
class Calculation:
    name: str
    algo: str
    gname: str


@dataclass
class ActionInfo:
    name: str
    id: int
    params: list[tuple[str, int]]
    fname: str
    node: dict = field(repr=False, default_factory=dict)
    exits: bool = False  # calls exit: the pipeline stops after it


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


class ModuleGenerator:
    """Builds the module source for one bmv2 JSON program."""

    def __init__(self, root: dict, layout: Layout):
        self.root = root
        self.layout = layout
        self.src = Source()
        self.constants: dict[str, object] = {}  # extra globals the module needs
        self.errors = error_codes(root)
        self.codecs: dict[int, HeaderCodec] = {}
        for h in layout.headers:
            if not h.metadata:
                codec = header_codec(h)
                self.codecs[h.vindex] = codec
        self.registers: dict[str, RegisterInfo] = {}
        for n, r in enumerate(root.get("register_arrays", [])):
            self.registers[r["name"]] = RegisterInfo(r["name"], int(r["size"]), int(r["bitwidth"]),
                                                     f"_R{n}")
        self.counters: dict[str, CounterInfo] = {}
        for n, c in enumerate(root.get("counter_arrays", [])):
            self.counters[c["name"]] = CounterInfo(c["name"], int(c.get("size", 0)),
                                                   bool(c.get("is_direct")), c.get("binding"),
                                                   f"_C{n}")
        self.calculations: dict[str, Calculation] = {}
        self.field_lists: dict[int, list[int]] = {}
        self.actions: dict[int, ActionInfo] = {}
        self.action_bodies: dict[int, list[str]] = {}  # for inlining (see controlflow.py)
        self.deferred: list[str] = []  # module-level statements emitted after all functions
        self._index_mode: str | None = None  # see _hoist_index

    # -- helpers --------------------------------------------------------------------------------

    def zeros(self, n: int) -> str:
        name = f"_Z{n}"
        self.constants[name] = (0,) * n
        return name

    def field_of(self, tv: dict, node: object) -> Field:
        """A writable field parameter (``{"type": "field", ...}``)."""
        if tv.get("type") != "field":
            raise UnsupportedConstruct(f"destination of type {tv.get('type')!r}", node)
        hname, fname = tv["value"]
        if fname == VALID_FIELD:
            raise ProgramError("cannot write the hidden $valid$ field", node)
        return self.layout.field(hname, fname, node)

    def header_of(self, tv: dict, node: object) -> Header:
        if tv.get("type") != "header":
            raise UnsupportedConstruct(f"header parameter of type {tv.get('type')!r}", node)
        return self.layout.header(tv["value"], node)

    @staticmethod
    def data_param(ec: ExprCompiler, tv: dict, node: object) -> Expr:
        t = tv.get("type")
        if t == "runtime_data":
            widths = ec.local_widths
            if widths is None or not 0 <= tv["value"] < len(widths):
                raise ProgramError(f"invalid runtime_data reference {tv['value']}", node)
            return Expr(f"D[{tv['value']}]", DATA, widths[tv["value"]])
        if t in ("field", "hexstr", "expression", "local"):
            return ec.compile_data(tv, node)
        raise UnsupportedConstruct(f"primitive argument of type {t!r}", node)

    @staticmethod
    def const_param(tv: dict, node: object) -> int:
        if tv.get("type") != "hexstr":
            raise UnsupportedConstruct(f"non-constant {tv.get('type')!r} where bmv2 needs a "
                                       "constant", node)
        return parse_hexstr(tv["value"], node)

    # -- calculations ---------------------------------------------------------------------------

    def gen_calculations(self) -> None:
        for calc in self.root.get("calculations", []):
            algo = calc["algo"]
            if algo not in ALGORITHMS:
                raise UnsupportedConstruct(f"hash algorithm {algo!r}", calc)
            info = Calculation(calc["name"], algo, f"_K{calc['id']}")
            self.calculations[calc["name"]] = info
            self.constants[f"_H_{algo}"] = ALGORITHMS[algo]
            self.constants["_csum16_int"] = csum16_int
            self._gen_calculation(calc, info)

    def _gen_calculation(self, calc: dict, info: Calculation) -> None:
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
                header = self.layout.header(hname, calc)
                if fname == VALID_FIELD:
                    terms = [("0" if header.metadata else f"(1 if V[{header.vindex}] else 0)", 1)]
                else:
                    f = self.layout.field(hname, fname, calc)
                    terms = [(unsigned_code(f), f.width)]
            elif t == "header":
                header = self.layout.header(item["value"], calc)
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
        src = self.src
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

    # -- field lists ----------------------------------------------------------------------------

    def gen_field_lists(self) -> None:
        for fl in self.root.get("field_lists", []):
            indices = []
            for elem in fl.get("elements", []):
                if elem["type"] == "field":
                    indices.append(self.layout.field(*elem["value"], fl).index)
                elif elem["type"] != "hexstr":  # constants are never copied between PHVs
                    raise UnsupportedConstruct(f"field list element of type {elem['type']!r}", fl)
            self.field_lists[int(fl["id"])] = indices

    # -- actions and primitives -----------------------------------------------------------------

    def gen_actions(self) -> None:
        for act in self.root.get("actions", []):
            params = [(rd["name"], int(rd["bitwidth"])) for rd in act.get("runtime_data", [])]
            info = ActionInfo(act["name"], int(act["id"]), params, f"_A{act['id']}", act)
            if info.id in self.actions:
                raise ProgramError(f"duplicate action id {info.id}", act)
            self.actions[info.id] = info
            ec = ExprCompiler(self.layout, [w for _, w in params])
            body = self.primitive_block(act.get("primitives", []), ec, act)
            self.action_bodies[info.id] = body
            info.exits = any(p.get("op") == "exit" for p in act.get("primitives", []))
            self.src.line(f"def {info.fname}(F, V, p, D):")
            self.src.depth += 1
            self.src.extend(body or ["pass"])
            self.src.depth -= 1
            self.src.line()

    def primitive_block(self, primitives: list[dict], ec: ExprCompiler, owner: object) -> list[str]:
        """Statements for a list of primitive calls; ``_jump``/``_jump_if_zero`` (which p4c uses
        for ``if`` inside actions, always jumping forward) become skip-to guards."""
        targets = set()
        for idx, prim in enumerate(primitives):
            if prim.get("op") in ("_jump", "_jump_if_zero"):
                target = self.const_param(prim["parameters"][-1], prim)
                if target <= idx:
                    raise UnsupportedConstruct("backward jump in an action", prim)
                if target > len(primitives):
                    raise ProgramError(f"jump target {target} is past the end of the action", prim)
                targets.add(target)
        if not targets:
            out = []
            for prim in primitives:
                out.extend(self.primitive(prim, ec))
            hoisted = self._hoist_index(primitives, ec, out)
            return out if hoisted is None else hoisted
        # Blocks start at index 0 and at every jump target; a block runs unless a taken jump
        # skipped past its start.
        out = ["_skip = 0"]
        for idx, prim in enumerate(primitives):
            if idx == 0 or idx in targets:
                out.append(f"if _skip <= {idx}:")
            op = prim.get("op")
            if op == "_jump":
                out.append(f"    _skip = {self.const_param(prim['parameters'][0], prim)}")
            elif op == "_jump_if_zero":
                cond = self.data_param(ec, prim["parameters"][0], prim)
                target = self.const_param(prim["parameters"][1], prim)
                out.append(f"    if {cond.code} == 0:")
                out.append(f"        _skip = {target}")
            else:
                out.extend("    " + s for s in self.primitive(prim, ec))
            if op in ("_jump", "_jump_if_zero"):
                nxt = idx + 1
                if nxt < len(primitives) and nxt not in targets:
                    out.append(f"if _skip <= {nxt}:")
        return out

    def _hoist_index(self, primitives: list[dict], ec: ExprCompiler, lines: list[str]
                     ) -> list[str] | None:
        """When every register/counter access of a straight-line action uses the same index
        (the usual per-lane pattern) and the action does not change it, compute and bounds-check
        the index once: one version of the action for an index in range, one for out of range
        (where each access is skipped and logged, as bmv2 does)."""
        indexed = [p for p in primitives if p.get("op") in _INDEXED]
        if len(indexed) < 2:
            return None
        binds, sizes = set(), set()
        for prim in indexed:
            params = prim["parameters"]
            kind = prim["op"]
            target = params[1] if kind == "register_read" else params[0]
            array = self.registers.get(target.get("value")) if kind != "count" else \
                self.counters.get(target.get("value"))
            if array is None:
                return None
            binds.add(self._index(ec, prim, params[2] if kind == "register_read" else params[1]))
            sizes.add(array.size)
        if len(binds) != 1 or len(sizes) != 1:
            return None
        bind = binds.pop()
        read = {int(i) for i in re.findall(r"F\[(\d+)\]", bind)}
        for m in re.finditer(r"^\s*F\[(\d+)(?::(\d+))?\] =", "\n".join(lines), re.M):
            first = int(m.group(1))
            last = int(m.group(2)) - 1 if m.group(2) else first
            if any(first <= i <= last for i in read):
                return None
        versions = {}
        for mode in ("in", "out"):
            self._index_mode = mode
            try:
                versions[mode] = [x for prim in primitives for x in self.primitive(prim, ec)]
            finally:
                self._index_mode = None
        return [bind, f"if _i < {sizes.pop()}:", *("    " + x for x in versions["in"]),
                "else:", *("    " + x for x in versions["out"])]

    def primitive(self, prim: dict, ec: ExprCompiler) -> list[str]:
        op = prim.get("op")
        params = prim.get("parameters", [])
        gen = getattr(self, "_p_" + str(op), None)
        if gen is None:
            raise UnsupportedConstruct(f"primitive {op!r}", prim)
        expected = gen.__code__.co_argcount - 3  # self, ec, prim
        if len(params) != expected:
            raise ProgramError(f"primitive {op!r} expects {expected} parameters, got "
                               f"{len(params)}", prim)
        lines = gen(ec, prim, *params)
        return lines or ["pass"]

    def _p_assign(self, ec, prim, dst, src):
        f = self.field_of(dst, prim)
        return [f"F[{f.index}] = {store_code(f, self.data_param(ec, src, prim))}"]

    def _p_assign_header(self, ec, prim, dst, src):
        d, s = self.header_of(dst, prim), self.header_of(src, prim)
        if d.type_name != s.type_name:
            raise ProgramError("assign_header between different header types", prim)
        copy = (f"F[{d.fields[0].index}:{d.fields[-1].index + 1}] = "
                f"F[{s.fields[0].index}:{s.fields[-1].index + 1}]") if d.fields else "pass"
        lines = [f"if V[{s.vindex}]:", f"    {copy}"]
        if not d.metadata:
            lines += [f"    V[{d.vindex}] = True", "else:", f"    V[{d.vindex}] = False"]
        return lines

    def _p_add_header(self, ec, prim, hdr):
        h = self.header_of(hdr, prim)
        if h.metadata:  # a metadata header is always valid: bmv2 does nothing
            return ["pass"]
        lines = [f"if not V[{h.vindex}]:"]
        if h.fields:
            lines.append(f"    F[{h.fields[0].index}:{h.fields[-1].index + 1}] = "
                         f"{self.zeros(len(h.fields))}")
        lines += [f"    V[{h.vindex}] = True", f"    p.length += {h.nbytes}"]
        return lines

    def _p_remove_header(self, ec, prim, hdr):
        h = self.header_of(hdr, prim)
        if h.metadata:
            return [f"p.length -= {h.nbytes}"]
        return [f"if V[{h.vindex}]:", f"    p.length -= {h.nbytes}", f"    V[{h.vindex}] = False"]

    def _p_mark_to_drop(self, ec, prim, hdr):
        h = self.header_of(hdr, prim)
        names = {f.name: f for f in h.fields}
        if "egress_spec" not in names:
            raise ProgramError(f"mark_to_drop: header {h.name!r} has no egress_spec field", prim)
        spec = names["egress_spec"]
        lines = [f"F[{spec.index}] = {normalize_code(Expr('_DROP_PORT', DATA), spec.width, spec.signed)}"]
        if "mcast_grp" in names:
            lines.append(f"F[{names['mcast_grp'].index}] = 0")
        return lines

    def _p_exit(self, ec, prim):
        return ["p.exit = True"]

    def _clone(self, ec, prim, session, field_list):
        s = self.data_param(ec, session, prim)
        fl = self.const_param(field_list, prim)
        self.check_field_list(fl, prim)
        return [f"p.clone_session = ({s.code} & 0xffff) | _MIRROR_SESSION_VALID",
                f"p.clone_field_list = {fl & 0xFFFF}"]

    def _p_clone_ingress_pkt_to_egress(self, ec, prim, session, field_list):
        return self._clone(ec, prim, session, field_list)

    def _p_clone_egress_pkt_to_egress(self, ec, prim, session, field_list):
        return self._clone(ec, prim, session, field_list)

    def check_field_list(self, fl: int, prim: dict) -> None:
        if fl and fl not in self.field_lists:
            raise ProgramError(f"unknown field list id {fl}", prim)

    def _p_resubmit(self, ec, prim, field_list):
        fl = self.const_param(field_list, prim)
        self.check_field_list(fl, prim)
        return [f"p.resubmit = {fl & 0xFFFF}"]

    def _p_recirculate(self, ec, prim, field_list):
        fl = self.const_param(field_list, prim)
        self.check_field_list(fl, prim)
        return [f"p.recirculate = {fl & 0xFFFF}"]

    def _p_truncate(self, ec, prim, length):
        n = self.data_param(ec, length, prim)
        return [f"_l = {n.code}", "if _l < p.truncated_length:", "    p.truncated_length = _l"]

    def _p_modify_field_rng_uniform(self, ec, prim, dst, lo, hi):
        f = self.field_of(dst, prim)
        a, b = self.data_param(ec, lo, prim), self.data_param(ec, hi, prim)
        value = Expr("_randint(_lo, _hi)", DATA, 64)
        return [f"_lo = {a.code} & 0xffffffffffffffff", f"_hi = {b.code} & 0xffffffffffffffff",
                "if _lo <= _hi:", f"    F[{f.index}] = {store_code(f, value)}"]

    def _p_modify_field_with_hash_based_offset(self, ec, prim, dst, base, calc, size):
        f = self.field_of(dst, prim)
        if calc.get("type") != "calculation" or calc["value"] not in self.calculations:
            raise ProgramError("modify_field_with_hash_based_offset needs a known calculation",
                               prim)
        c = self.calculations[calc["value"]]
        b, s = self.data_param(ec, base, prim), self.data_param(ec, size, prim)
        if s.const is not None:
            modulus = str(s.const or 1)
        else:
            modulus = f"({s.code} or 1)"
        value = Expr(f"(({c.gname}(F, V, p) % {modulus}) + {b.code})", DATA)
        return [f"F[{f.index}] = {store_code(f, value)}"]

    def _index(self, ec, prim, idx) -> str:
        """Statement binding ``_i`` to an index converted as bmv2's ``Data::get_uint()`` does."""
        e = self.data_param(ec, idx, prim)
        if e.bound is not None and e.bound <= 32:
            return f"_i = {e.code}"
        return f"_i = {e.code} & 0xffffffff"

    def _indexed(self, ec, prim, idx, kind: str, name: str, size: int,
                 body: list[str]) -> list[str]:
        """``body`` (which uses ``_i``) guarded by bmv2's bounds check on the index."""
        oob = f"_out_of_bounds({kind!r}, {name!r}, _i, {size})"
        if self._index_mode == "in":  # inside _hoist_index's checked block
            return body
        if self._index_mode == "out":
            return [oob]
        return [self._index(ec, prim, idx), f"if _i < {size}:", *("    " + b for b in body),
                "else:", "    " + oob]

    def _register(self, tv, prim) -> RegisterInfo:
        if tv.get("type") != "register_array" or tv["value"] not in self.registers:
            raise ProgramError("expected a known register_array parameter", prim)
        return self.registers[tv["value"]]

    def _p_register_read(self, ec, prim, dst, reg, idx):
        f = self.field_of(dst, prim)
        r = self._register(reg, prim)
        value = Expr(f"{r.gname}[_i]", DATA, r.bitwidth)
        return self._indexed(ec, prim, idx, "register", r.name, r.size,
                             [f"F[{f.index}] = {store_code(f, value)}"])

    def _p_register_write(self, ec, prim, reg, idx, src):
        r = self._register(reg, prim)
        value = normalize_code(self.data_param(ec, src, prim), r.bitwidth, False)
        return self._indexed(ec, prim, idx, "register", r.name, r.size,
                             [f"{r.gname}[_i] = {value}"])

    def _p_count(self, ec, prim, counter, idx):
        if counter.get("type") != "counter_array" or counter["value"] not in self.counters:
            raise ProgramError("expected a known counter_array parameter", prim)
        c = self.counters[counter["value"]]
        if c.is_direct:
            raise UnsupportedConstruct("count() on a direct counter", prim)
        return self._indexed(ec, prim, idx, "counter", c.name, c.size,
                             [f"{c.gname}_p[_i] += 1", f"{c.gname}_b[_i] += p.ingress_length"])

    def _p_log_msg(self, ec, prim, fmt, values):
        if fmt.get("type") != "string" or values.get("type") != "parameters_vector":
            raise UnsupportedConstruct("log_msg with unexpected argument types", prim)
        items = values.get("value") or []
        if isinstance(items, dict):  # p4c emits {} for log_msg without data
            items = []
        codes = [self.data_param(ec, v, prim).code for v in items]
        tup = "(" + "".join(c + ", " for c in codes) + ")"
        return [f"_log_msg({fmt['value']!r}, {tup})"]

    def _assert(self, ec, prim, cond, kind):
        e = ec.compile(cond, prim)
        test = f"{e.code} == 0" if e.kind == DATA else f"not {e.code}"
        info = prim.get("source_info") or {}
        where = f"{info.get('source_fragment', '?')} at {info.get('filename', '?')}:" \
                f"{info.get('line', '?')}"
        return [f"if {test}:", f"    _assertion_failed({kind!r}, {where!r})"]

    def _p_assert(self, ec, prim, cond):
        return self._assert(ec, prim, cond, "Assert")

    def _p_assume(self, ec, prim, cond):
        return self._assert(ec, prim, cond, "Assume")

    # -- parser ---------------------------------------------------------------------------------

    def gen_parsers(self) -> dict[str, str]:
        """Returns parser name -> generated entry function name.

        A parse state reached from exactly one other state (statically) is inlined into it, so a
        typical chain of states runs as one function; the other states are functions
        ``_S<id>(F, V, p, b, o) -> (next state function or None, o)``."""
        entries = {}
        for n, parser in enumerate(self.root.get("parsers", [])):
            fname = f"_PARSE{n}"
            entries[parser["name"]] = fname
            init = parser.get("init_state")
            emitter = _ParserEmitter(self, parser)
            init_fn = emitter.generate(init) if init is not None else "None"
            src = self.src
            src.line(f"def {fname}(F, V, p, b):")
            src.depth += 1
            src.line(f"_st = {init_fn}")
            src.line("_o = 0")
            src.line(f"p.parser_error = {self.errors['NoError']}")
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

    def _too_short(self) -> str:
        return f"raise _ParserError({self.errors['PacketTooShort']}, o)"

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
            h = self.layout.header(params[0]["value"], op)
            codec = self.codecs.get(h.vindex)
            if codec is None:
                raise UnsupportedConstruct("extract into a metadata header", op)
            return [f"if len(b) - o < {h.nbytes}:", f"    {self._too_short()}",
                    *codec.extract_lines("b", "o"), f"V[{h.vindex}] = True", f"o += {h.nbytes}"]
        if kind == "set":
            f = self.field_of(params[0], op)
            src = params[1]
            if src.get("type") == "lookahead":
                code, nbytes, width = self._lookahead(src, op)
                return [f"if len(b) - o < {nbytes}:", f"    {self._too_short()}",
                        f"F[{f.index}] = {store_code(f, Expr(code, DATA, width))}"]
            return [f"F[{f.index}] = {store_code(f, self.data_param(ec, src, op))}"]
        if kind == "verify":
            cond = ec.compile_bool(params[0], op)
            if isinstance(params[1], int):
                err = str(params[1])
            else:
                err = ec.compile_data(params[1], op).code
            return [f"if not {cond}:", f"    raise _ParserError({err}, o)"]
        if kind == "primitive":
            return self.primitive(params[0], ec)
        if kind == "shift":
            n = int(params[0])
            return [f"if len(b) - o < {n}:", f"    {self._too_short()}", f"o += {n}"]
        if kind == "advance":
            amount = self.data_param(ec, params[0], op)
            invalid = f"raise _ParserError({self.errors['ParserInvalidArgument']}, o)"
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
                    terms.append(ExprCompiler(self.layout).field_ref(k["value"], state).code)
                    widths.append(1)
                    continue
                f = self.layout.field(hname, fname, state)
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

    # -- deparser and checksums -----------------------------------------------------------------

    def gen_deparsers(self, checksums: list[dict]) -> dict[str, str]:
        entries = {}
        for n, dep in enumerate(self.root.get("deparsers", [])):
            if dep.get("primitives"):
                raise UnsupportedConstruct("method calls in a deparser", dep)
            fname = f"_DEPARSE{n}"
            entries[dep["name"]] = fname
            src = self.src
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
                h = self.layout.header(hname, dep)
                codec = self.codecs.get(h.vindex)
                if codec is None:
                    raise UnsupportedConstruct("emitting a metadata header", dep)
                src.line(f"if V[{h.vindex}]:")
                src.line(f"    _o.append({codec.emit_expression()})")
            src.line("_o.append(p.payload)")
            src.line("return b''.join(_o)")
            src.depth -= 1
            src.line()
        return entries

    def prepare_checksums(self) -> list[tuple[dict, str | None, Field, Calculation]]:
        result = []
        ec = ExprCompiler(self.layout, None)
        for ck in self.root.get("checksums", []):
            if ck.get("type", "generic") != "generic":
                raise UnsupportedConstruct(f"checksum of type {ck.get('type')!r}", ck)
            target = self.layout.field(ck["target"][0], ck["target"][1], ck)
            calc = self.calculations.get(ck.get("calculation"))
            if calc is None:
                raise ProgramError(f"checksum uses unknown calculation {ck.get('calculation')!r}",
                                   ck)
            cond = None
            if ck.get("if_cond") is not None:
                cond = ec.compile_bool(ck["if_cond"], ck)
            result.append((ck, cond, target, calc))
        return result

    def gen_checksum_verify(self, checksums) -> None:
        """``_VERIFY(F, V, p) -> bool``: True when a verified checksum does not match (bmv2 skips
        checksums whose target header is invalid or whose condition is false)."""
        src = self.src
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

    # -- tables ---------------------------------------------------------------------------------

    @staticmethod
    def table_key_code(keys: list[tuple[Field, int | None]]) -> str:
        """The table key as one int: key elements (unsigned, masked) concatenated MSB first."""
        parts, shift = [], sum(f.width for f, _ in keys)
        for f, mask in keys:
            shift -= f.width
            code = unsigned_code(f)
            if mask is not None:
                code = f"({code} & {mask:#x})"
            parts.append(f"({code} << {shift})" if shift else code)
        return " | ".join(parts) if parts else "0"

    # -- module ---------------------------------------------------------------------------------

    def finish(self) -> str:
        for stmt in self.deferred:
            self.src.line(stmt)
        return self.src.text()


MAX_NESTING = 40  # deeper inlining would hit Python's limit on nested blocks


class _ParserEmitter:
    """Generates the state functions of one parser, inlining states with a single predecessor."""

    def __init__(self, gen: ModuleGenerator, parser: dict):
        self.gen = gen
        self.states = {s["name"]: s for s in parser.get("parse_states", [])}
        self.ec = ExprCompiler(gen.layout, None)
        self.transitions = {name: gen.transition(s, set(self.states))
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
            lines.extend(self.gen.parser_op(op, self.ec))
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

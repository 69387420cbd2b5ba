"""Actions and the primitives they call (bmv2 keeps these in actions.cpp and primitives): each
action becomes ``_A<id>(F, V, p, D)`` with ``D`` its action data, and its statements are kept for
the control flow to inline (controlflow.py).  Primitive ``op`` is translated by ``_p_<op>``, whose
parameters after ``ec, prim`` are the primitive's, in order; their number is checked.

Here are the primitives no target owns: bmv2's core ones (``assign``, ``assign_header``,
``exit``, the jumps, ``log_msg``, ``assert``, ``assume``), the header validity changes p4c emits
for every architecture (``add_header``, ``remove_header``) and the accesses to the JSON's register
and counter arrays.  A target translates its own primitives in a subclass, which its
:class:`~softswitch.core.program.Architecture` names (v1model's: ``softswitch/v1model``)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import ProgramError, UnsupportedConstruct
from ..expressions import DATA, Expr, ExprCompiler, normalize_code, store_code
from ..layout import Header

if TYPE_CHECKING:
    from .module import ModuleGenerator

_INDEXED = ("register_read", "register_write", "count")


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
class ActionInfo:
    name: str
    id: int
    params: list[tuple[str, int]]
    fname: str
    node: dict = field(repr=False, default_factory=dict)
    exits: bool = False  # calls exit: the pipeline stops after it


class PrimitiveGenerator:
    """Translates the actions of one program, with the program-wide objects of ``gen``."""

    def __init__(self, gen: ModuleGenerator):
        self.gen = gen
        self._index_mode: str | None = None  # see _hoist_index

    def zeros(self, n: int) -> str:
        name = f"_Z{n}"
        self.gen.constants[name] = (0,) * n
        return name

    def header_of(self, tv: dict, node: object) -> Header:
        if tv.get("type") != "header":
            raise UnsupportedConstruct(f"header parameter of type {tv.get('type')!r}", node)
        return self.gen.layout.header(tv["value"], node)

    def gen_actions(self) -> None:
        for act in self.gen.root.get("actions", []):
            params = [(rd["name"], int(rd["bitwidth"])) for rd in act.get("runtime_data", [])]
            info = ActionInfo(act["name"], int(act["id"]), params, f"_A{act['id']}", act)
            if info.id in self.gen.actions:
                raise ProgramError(f"duplicate action id {info.id}", act)
            self.gen.actions[info.id] = info
            ec = ExprCompiler(self.gen.layout, [w for _, w in params])
            body = self.primitive_block(act.get("primitives", []), ec, act)
            self.gen.action_bodies[info.id] = body
            info.exits = any(p.get("op") == "exit" for p in act.get("primitives", []))
            src = self.gen.src
            src.line(f"def {info.fname}(F, V, p, D):")
            src.depth += 1
            src.extend(body or ["pass"])
            src.depth -= 1
            src.line()

    def primitive_block(self, primitives: list[dict], ec: ExprCompiler, owner: object) -> list[str]:
        """Statements for a list of primitive calls; ``_jump``/``_jump_if_zero`` (which p4c uses
        for ``if`` inside actions, always jumping forward) become skip-to guards."""
        targets = set()
        for idx, prim in enumerate(primitives):
            if prim.get("op") in ("_jump", "_jump_if_zero"):
                target = self.gen.const_param(prim["parameters"][-1], prim)
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
                out.append(f"    _skip = {self.gen.const_param(prim['parameters'][0], prim)}")
            elif op == "_jump_if_zero":
                cond = self.gen.data_param(ec, prim["parameters"][0], prim)
                target = self.gen.const_param(prim["parameters"][1], prim)
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
            array = self.gen.registers.get(target.get("value")) if kind != "count" else \
                self.gen.counters.get(target.get("value"))
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
        f = self.gen.field_of(dst, prim)
        return [f"F[{f.index}] = {store_code(f, self.gen.data_param(ec, src, prim))}"]

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

    def _p_exit(self, ec, prim):
        return ["p.exit = True"]

    def _index(self, ec, prim, idx) -> str:
        """Statement binding ``_i`` to an index converted as bmv2's ``Data::get_uint()`` does."""
        e = self.gen.data_param(ec, idx, prim)
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
        if tv.get("type") != "register_array" or tv["value"] not in self.gen.registers:
            raise ProgramError("expected a known register_array parameter", prim)
        return self.gen.registers[tv["value"]]

    def _p_register_read(self, ec, prim, dst, reg, idx):
        f = self.gen.field_of(dst, prim)
        r = self._register(reg, prim)
        value = Expr(f"{r.gname}[_i]", DATA, r.bitwidth)
        return self._indexed(ec, prim, idx, "register", r.name, r.size,
                             [f"F[{f.index}] = {store_code(f, value)}"])

    def _p_register_write(self, ec, prim, reg, idx, src):
        r = self._register(reg, prim)
        value = normalize_code(self.gen.data_param(ec, src, prim), r.bitwidth, False)
        return self._indexed(ec, prim, idx, "register", r.name, r.size,
                             [f"{r.gname}[_i] = {value}"])

    def _p_count(self, ec, prim, counter, idx):
        if counter.get("type") != "counter_array" or counter["value"] not in self.gen.counters:
            raise ProgramError("expected a known counter_array parameter", prim)
        c = self.gen.counters[counter["value"]]
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
        codes = [self.gen.data_param(ec, v, prim).code for v in items]
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

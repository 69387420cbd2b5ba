"""The generated module of one program, assembled from its parts: calculations, actions, parsers,
checksum verification and deparsers (this package's sibling modules), then the control flow
(controlflow.py).  :class:`ModuleGenerator` holds what the parts share: the program-wide objects
and the source text."""

from __future__ import annotations

from ..errors import ProgramError, UnsupportedConstruct
from ..expressions import DATA, Expr, ExprCompiler, parse_hexstr
from ..headercodec import HeaderCodec, header_codec
from ..layout import VALID_FIELD, Field, Layout
from .calculations import Calculation, gen_calculations
from .deparser import gen_checksum_verify, gen_deparsers, prepare_checksums
from .parser import error_codes, gen_parsers
from .primitives import ActionInfo, CounterInfo, PrimitiveGenerator, RegisterInfo
from .source import Source


class ModuleGenerator:
    """Builds the module source for one bmv2 JSON program."""

    def __init__(self, root: dict, layout: Layout,
                 primitives: type[PrimitiveGenerator] = PrimitiveGenerator):
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
        self.field_lists: dict[int, list[int]] = {}
        for fl in root.get("field_lists", []):
            indices = []
            for elem in fl.get("elements", []):
                if elem["type"] == "field":
                    indices.append(layout.field(*elem["value"], fl).index)
                elif elem["type"] != "hexstr":  # constants are never copied between PHVs
                    raise UnsupportedConstruct(f"field list element of type {elem['type']!r}", fl)
            self.field_lists[int(fl["id"])] = indices
        self.calculations: dict[str, Calculation] = {}
        self.actions: dict[int, ActionInfo] = {}
        self.action_bodies: dict[int, list[str]] = {}  # for inlining (see controlflow.py)
        self.deferred: list[str] = []  # module-level statements emitted after all functions
        self.primitives = primitives(self)

    def generate(self) -> tuple[dict[str, str], dict[str, str]]:
        """Emit every function but the control flow's; returns the parser and the deparser entry
        functions by name."""
        gen_calculations(self)
        checksums = prepare_checksums(self)
        self.primitives.gen_actions()
        parsers = gen_parsers(self)
        gen_checksum_verify(self, checksums)
        return parsers, gen_deparsers(self, checksums)

    def finish(self) -> str:
        for stmt in self.deferred:
            self.src.line(stmt)
        return self.src.text()

    # -- operands shared by primitives and parser operations ------------------------------------

    def field_of(self, tv: dict, node: object) -> Field:
        """A writable field parameter (``{"type": "field", ...}``)."""
        if tv.get("type") != "field":
            raise UnsupportedConstruct(f"destination of type {tv.get('type')!r}", node)
        hname, fname = tv["value"]
        if fname == VALID_FIELD:
            raise ProgramError("cannot write the hidden $valid$ field", node)
        return self.layout.field(hname, fname, node)

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

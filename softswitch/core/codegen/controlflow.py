"""Generate the ingress and egress control flow.

bmv2 walks a pipeline node by node, each node (table or conditional) naming the next.  Here every
*join point* of a pipeline graph becomes one Python function and every node with a single static
predecessor is inlined where it is reached: a conditional becomes ``if``/``else``, one of p4c's
keyless tables with a const default action (how p4c compiles a plain action call) becomes the
action's code, and any other table becomes its lookup and action call.  A node function returns
the next join-point function, or None at the end of the pipeline; the switch calls them in turn.
The behaviour is bmv2's, including ``exit``: the pipeline stops after the action that called it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import ProgramError
from ..expressions import ExprCompiler, unsigned_code
from ..layout import Field
from .source import MAX_NESTING

if TYPE_CHECKING:
    from ..program import TableSpec
    from .module import ModuleGenerator


class ControlFlowGenerator:
    def __init__(self, gen: ModuleGenerator, pipelines: list[dict], tables: dict[str, TableSpec]):
        self.gen = gen
        self.tables = tables
        self.conditionals: dict[str, dict] = {}
        self.inits: dict[str, str | None] = {}
        for pipe in pipelines:
            self.inits[pipe["name"]] = pipe.get("init_table")
            for c in pipe.get("conditionals", []):
                self.conditionals[c["name"]] = c
        self.ec = ExprCompiler(gen.layout, None)
        self.names: dict[str, str] = {}  # standalone node -> function name
        self.standalone: set[str] = set()
        self.dynamic: set[str] = set()  # tables whose next node depends on the action run
        indegree: dict[str, int] = {}
        for name in list(tables) + list(self.conditionals):
            targets, static = self.successors(name)
            if not static:
                self.dynamic.add(name)
                self.standalone.update(t for t in targets if t is not None)
            for t in targets:
                if t is not None:
                    if t not in tables and t not in self.conditionals:
                        raise ProgramError(f"control flow refers to unknown node {t!r}")
                    indegree[t] = indegree.get(t, 0) + 1
        for name in list(tables) + list(self.conditionals):
            if indegree.get(name, 0) != 1:
                self.standalone.add(name)
        for pipe, init in self.inits.items():
            if init is not None:
                if init not in tables and init not in self.conditionals:
                    raise ProgramError(f"pipeline {pipe!r} starts at unknown node {init!r}")
                self.standalone.add(init)

    @staticmethod
    def const_action(spec: TableSpec) -> int | None:
        """The action a keyless table with a const default entry always runs."""
        d = spec.default_entry
        if not spec.keys and d is not None and d.entry_const:
            return d.action_id
        return None

    def successors(self, name: str) -> tuple[list[str | None], bool]:
        """The nodes that can follow ``name``, and whether code can branch to them statically."""
        if name in self.conditionals:
            c = self.conditionals[name]
            return [c.get("true_next"), c.get("false_next")], True
        spec = self.tables[name]
        const = self.const_action(spec)
        if spec.next_by_action is None:
            return ([spec.next_miss] if const is not None else
                    [spec.next_hit, spec.next_miss]), True
        if const is not None:
            return [spec.next_by_action[const]], True
        targets = set(spec.next_by_action.values())
        if spec.default_entry is None:
            targets.add(spec.base_default_next)
        return list(targets), len(targets) == 1

    def fname(self, name: str) -> str:
        if name not in self.names:
            self.names[name] = f"_NODE{len(self.names)}"
        return self.names[name]

    def generate(self) -> tuple[dict[str, str | None], dict[str, str]]:
        """Emit the node functions; returns (pipeline -> first function name, standalone node ->
        function name)."""
        done: set[str] = set()
        order = list(self.tables) + list(self.conditionals)
        while self.standalone - done:
            name = next(n for n in order if n in self.standalone and n not in done)
            done.add(name)
            src = self.gen.src
            src.line(f"def {self.fname(name)}(F, V, p):")
            src.depth += 1
            src.extend(self.node(name, {name}, 1))
            src.depth -= 1
            src.line()
        inits = {pipe: None if init is None else self.fname(init)
                 for pipe, init in self.inits.items()}
        return inits, dict(self.names)

    def edge(self, target: str | None, path: set[str], nest: int) -> list[str]:
        if target is None:
            return ["return None"]
        if target in self.standalone or target in path or nest > MAX_NESTING:
            self.standalone.add(target)
            return [f"return {self.fname(target)}"]
        return self.node(target, path | {target}, nest)

    def node(self, name: str, path: set[str], nest: int) -> list[str]:
        if name in self.conditionals:
            c = self.conditionals[name]
            test = self.ec.compile_bool(c["expression"], c)
            return [f"if {test}:",
                    *("    " + x for x in self.edge(c.get("true_next"), path, nest + 1)),
                    "else:",
                    *("    " + x for x in self.edge(c.get("false_next"), path, nest + 1))]
        spec = self.tables[name]
        const = self.const_action(spec)
        if const is not None:
            return self.inline_action(spec, const) + self.edge(self.successors(name)[0][0],
                                                               path, nest)
        exits = any(self.gen.actions[aid].exits for aid in spec.action_ids)
        call = ["_e.fn(F, V, p, _e.data)"] + (["if p.exit:", "    return None"] if exits else [])
        count = ["_e.packets += 1", "_e.bytes += p.ingress_length"] \
            if spec.direct_counter is not None else []
        tid = spec.id
        if not spec.keys:  # keyless: the default entry, which the control plane may change
            lines = [f"_e = _TABLE{tid}.default"] + call
            targets, static = self.successors(name)
            return lines + (self.edge(targets[0], path, nest) if static else
                            ["return _e.next"])
        key = table_key_code([(k.field, k.mask) for k in spec.keys])
        lines = [f"_e = _LOOKUP{tid}({key})"]
        if spec.next_by_action is None:  # hit/miss branches
            return lines + ["if _e is None:", f"    _e = _TABLE{tid}.default",
                            *("    " + x for x in call),
                            *("    " + x for x in self.edge(spec.next_miss, path, nest + 1)),
                            "else:",
                            *("    " + x for x in count + call),
                            *("    " + x for x in self.edge(spec.next_hit, path, nest + 1))]
        lines += ["if _e is None:", f"    _e = _TABLE{tid}.default"]
        if count:
            lines += ["else:", *("    " + x for x in count)]
        lines += call
        targets, static = self.successors(name)
        return lines + (self.edge(targets[0], path, nest) if static else ["return _e.next"])

    def inline_action(self, spec: TableSpec, action_id: int) -> list[str]:
        info = self.gen.actions[action_id]
        lines = []
        if info.params:
            data = spec.default_entry.data
            lines.append(f"D = {data!r}")
        lines += self.gen.action_bodies[action_id]
        if info.exits:
            lines += ["if p.exit:", "    return None"]
        return lines


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

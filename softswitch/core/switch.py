"""The objects one loaded program runs with, as every target has them (bmv2's ``Switch`` base
class and its ``P4Objects``): the generated module executed with the program's tables, register
and counter arrays and the packet replication engine bound as its globals, one lock for all of
them, and the clock.  A target's switch is a subclass that takes packets through them in the
order of its architecture (``softswitch/v1model/switch.py``: simple_switch's)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from .layout import Layout
from .pre import PacketReplicationEngine
from .program import Program
from .runtime import RUNTIME_HELPERS
from .stateful import CounterArray, DirectCounter, RegisterArray
from .tables import MatchTable


class Switch:
    """``program``'s runtime objects; ``target_globals`` are the names the target's primitives
    use in generated code, with their values for this switch."""

    def __init__(self, program: Program, target_globals: dict):
        self.program = program
        self.lock = threading.RLock()
        self._start = time.monotonic()

        ns: dict = dict(RUNTIME_HELPERS)
        ns.update(program.constants)
        ns.update(target_globals)
        ns["_header_equal"] = _header_equal(program.layout)
        for codec in program.codecs.values():
            codec.bind(ns)

        self.registers: dict[str, RegisterArray] = {}
        for info in program.registers.values():
            reg = RegisterArray(info.name, info.size, info.bitwidth, self.lock)
            self.registers[info.name] = reg
            ns[info.gname] = reg.values
        self.counters: dict[str, CounterArray | DirectCounter] = {}
        for info in program.counters.values():
            if info.is_direct:
                continue
            ctr = CounterArray(info.name, info.size, self.lock)
            self.counters[info.name] = ctr
            ns[info.gname + "_p"] = ctr.packets
            ns[info.gname + "_b"] = ctr.bytes

        exec(program.code, ns)  # noqa: S102 -- our own generated module
        self.namespace = ns

        self.tables: dict[str, MatchTable] = {
            name: MatchTable(spec, program, ns, self.lock) for name, spec in program.tables.items()}
        for table in self.tables.values():
            ns[f"_TABLE{table.spec.id}"] = table
            ns[f"_LOOKUP{table.spec.id}"] = table.lookup
        nodes = {name: ns[fname] for name, fname in program.node_functions.items()}
        for table in self.tables.values():
            table.resolve(nodes)
        for info in program.counters.values():
            if info.is_direct:
                t = self.tables.get(info.binding or "")
                if t is None:
                    continue
                self.counters[info.name] = DirectCounter(info.name, t.name, t.counter,
                                                         t.set_counter, t.reset_counters)
        self.pre = PacketReplicationEngine(self.lock)

    def now_us(self) -> int:
        return int((time.monotonic() - self._start) * 1e6)

    @staticmethod
    def run(node, F, V, p) -> None:
        """Run a pipeline from its first node function (``program.pipelines``) to its end or to
        an ``exit``."""
        while node is not None:
            if p.exit:
                break
            node = node(F, V, p)

    def reset_state(self) -> None:
        """Clear every table entry, register, counter and PRE entry (bmv2's reset_state)."""
        with self.lock:
            for t in self.tables.values():
                t.reset()
                t.reset_counters()
            for r in self.registers.values():
                r.reset()
            for c in self.counters.values():
                c.reset()
            self.pre.reset()


def _header_equal(layout: Layout) -> Callable:
    """``_header_equal(F, V, a, b)``: whether two headers are both valid with equal fields."""
    spans = {h.vindex: (h.fields[0].index if h.fields else 0,
                        h.fields[-1].index + 1 if h.fields else 0)
             for h in layout.headers}

    def header_equal(F, V, a, b):
        if not (V[a] and V[b]):
            return False
        (a0, a1), (b0, b1) = spans[a], spans[b]
        return F[a0:a1] == F[b0:b1]

    return header_equal

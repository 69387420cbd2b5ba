"""The TNA program (p4src/tofino/) read as text: its controls with their tables, actions,
registers, RegisterActions, counters and instances, the ingress parser's value sets, and the
BF Runtime names they get. Regular expressions and brace matching suffice because the program
keeps one layout (tools/tna_codegen.py writes part of it); what it cannot read it refuses."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ROOT / "p4src" / "tofino"
PIPE = "pipe"
TOP = ("SaAtpIngress", "SaAtpEgress")


@dataclass
class Table:
    name: str
    keys: list[tuple[str, str]]          # (expression, match kind)
    actions: list[str]
    const_entries: list[tuple[tuple[str, ...], str]]   # (key values as written, action call)
    default: str
    default_is_const: bool


@dataclass
class Control:
    name: str
    body: str
    tables: dict[str, Table] = field(default_factory=dict)
    actions: dict[str, tuple[list[tuple[str, str]], str]] = field(default_factory=dict)
    registers: dict[str, tuple[str, str]] = field(default_factory=dict)   # name: (type, size)
    register_actions: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    counters: dict[str, str] = field(default_factory=dict)                 # name: size
    instances: dict[str, str] = field(default_factory=dict)               # name: control type
    directions: list[str] = field(default_factory=list)  # each parameter's: in, out, inout


def strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def braced(text: str, start: int) -> tuple[str, int]:
    """The text between the brace at or after ``start`` and its match, and the end."""
    open_at = text.index("{", start)
    depth = 0
    for i in range(open_at, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[open_at + 1:i], i + 1
    raise ValueError("unbalanced braces")


@cache
def program_text() -> str:
    return "\n".join(strip_comments(p.read_text()) for p in sorted(SOURCES.rglob("*.p4")))


@cache
def controls() -> dict[str, Control]:
    return parse_controls(program_text())


def parse_controls(text: str) -> dict[str, Control]:
    """Every control of ``text`` (comments stripped) by name."""
    found = {}
    for m in re.finditer(r"^control\s+(\w+)\s*\(([^)]*)\)", text, re.M):
        body, _ = braced(text, m.end())
        directions = [p.split()[0] for p in m.group(2).split(",")]
        found[m.group(1)] = _read_control(Control(m.group(1), body, directions=directions))
    return found


TYPE_ARGS = r"<((?:[^<>]|<[^<>]*>)*)>"   # type arguments, one level of nesting


def _read_control(c: Control) -> Control:
    body = c.body
    for m in re.finditer(rf"\bRegister{TYPE_ARGS}\(([^)]*)\)\s+(\w+);", body):
        c.registers[m.group(3)] = (re.split(r",\s*(?![^<]*>)", m.group(1))[0].strip(),
                                   m.group(2).split(",")[0].strip())
    for m in re.finditer(rf"\bRegisterAction{TYPE_ARGS}\((\w+)\)\s+(\w+)\s*=", body):
        inner, _ = braced(body, m.end())
        c.register_actions[m.group(3)] = (m.group(2), m.group(1), inner)
    for m in re.finditer(rf"\bCounter{TYPE_ARGS}\(([^,]+),[^)]*\)\s+(\w+);", body):
        c.counters[m.group(3)] = m.group(2).strip()
    for m in re.finditer(r"^\s*([A-Z]\w*)\([^)]*\)\s+(\w+);", body, re.M):
        if m.group(1) not in ("Register", "Counter", "Random", "Checksum", "Resubmit"):
            c.instances[m.group(2)] = m.group(1)
    for m in re.finditer(r"\baction\s+(\w+)\s*\(([^)]*)\)", body):
        params = [tuple(p.split()[-2:]) for p in m.group(2).split(",") if p.strip()]
        inner, _ = braced(body, m.end())
        c.actions[m.group(1)] = ([(t, n) for t, n in params], inner)
    for m in re.finditer(r"\btable\s+(\w+)\s*\{", body):
        inner, _ = braced(body, m.end() - 1)
        c.tables[m.group(1)] = _read_table(m.group(1), inner)
    return c


def _read_table(name: str, body: str) -> Table:
    key_body = braced(body, body.index("key"))[0] if "key" in body else ""
    # A header's validity is a key as BF Runtime names it (`hdr.x.isValid()` -> `hdr.x.$valid`).
    keys = [(re.sub(r"\.isValid\(\)$", ".$valid", k), kind) for k, kind in
            re.findall(r"([\w.$\[\]:]+(?:\(\))?)\s*:\s*(\w+)\s*;", key_body)]
    actions_body = braced(body, body.index("actions"))[0]
    actions = [a.split()[-1] for a in actions_body.replace(";", " ; ").split(";")
               if a.strip()]
    entries = []
    if "const entries" in body:
        entries_body = braced(body, body.index("const entries"))[0]
        for m in re.finditer(r"(\([^)]*\)|[\w]+)\s*:\s*(\w+\([^)]*\))\s*;", entries_body):
            values = tuple(v.strip() for v in m.group(1).strip("()").split(","))
            entries.append((values, m.group(2)))
    default = re.search(r"(const\s+)?default_action\s*=\s*(\w+\([^)]*\))", body)
    return Table(name, keys, actions, entries, default.group(2) if default else "NoAction()",
                 bool(default and default.group(1)))


def instance_paths() -> dict[str, str]:
    """Every control instance under the two top controls: path -> control type."""
    paths = {}

    def walk(path: str, control: str) -> None:
        paths[path] = control
        for name, sub in controls()[control].instances.items():
            if sub in controls():
                walk(f"{path}.{name}", sub)

    for top in TOP:
        walk(top, top)
    return paths


def value_sets() -> dict[str, str]:
    """The ingress parser's value sets: BF Runtime name -> size."""
    text = program_text()
    parser = re.search(r"parser\s+(SaAtpIngressParser)\s*\(", text)
    body, _ = braced(text, parser.end())
    return {f"{PIPE}.{parser.group(1)}.{m.group(2)}": m.group(1)
            for m in re.finditer(r"value_set<[^>]+>\((\d+)\)\s+(\w+);", body)}


def constants() -> dict[str, int]:
    """Every ``const bit<N> NAME = value;`` and numeric ``#define`` of the program."""
    text = program_text()
    values = {n: int(v, 0) for n, v in re.findall(
        r"const\s+bit<\d+>\s+(\w+)\s*=\s*(0x[0-9A-Fa-f]+|\d+)\s*;", text)}
    values.update({n: int(v, 0) for n, v in re.findall(
        r"#define\s+(\w+)\s+(0x[0-9A-Fa-f]+|\d+)\b", text)})
    return values

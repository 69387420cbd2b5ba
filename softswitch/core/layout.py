"""Packet header vector layout: every field of every header instance gets a slot in one flat list.

Per packet the switch keeps two lists: ``F`` (field values, one int per field) and ``V`` (header
validity, one bool per header instance).  Generated code addresses both with constant indices.
Field values are always kept normalised exactly as bmv2 stores them: an unsigned ``bit<W>`` field
holds a value in ``[0, 2**W)``, a signed ``int<W>`` field a value in ``[-2**(W-1), 2**(W-1))``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .errors import ProgramError, UnsupportedConstruct

VALID_FIELD = "$valid$"


@dataclass
class Field:
    header: Header = field(repr=False)
    name: str
    width: int
    signed: bool
    index: int  # slot in F

    @property
    def full_name(self) -> str:
        return f"{self.header.name}.{self.name}"

    @property
    def mask(self) -> int:
        return (1 << self.width) - 1


@dataclass
class Header:
    name: str
    json_id: int
    type_name: str
    metadata: bool
    vindex: int  # slot in V
    fields: list[Field] = field(default_factory=list)
    node: dict | None = None

    @property
    def nbytes(self) -> int:
        return sum(f.width for f in self.fields) // 8


class Layout:
    """Header instances and their fields, laid out in ``F``/``V`` in JSON declaration order."""

    def __init__(self, root: dict):
        types: dict[str, dict] = {}
        for ht in root.get("header_types", []):
            types[ht["name"]] = ht
        self.headers: list[Header] = []
        self.by_name: dict[str, Header] = {}
        self.fields: list[Field] = []
        for hnode in root.get("headers", []):
            tname = hnode["header_type"]
            if tname not in types:
                raise ProgramError(f"unknown header type {tname!r}", hnode)
            header = Header(hnode["name"], hnode["id"], tname, bool(hnode.get("metadata")),
                            len(self.headers), node=hnode)
            for fnode in types[tname]["fields"]:
                self._add_field(header, fnode, types[tname])
            if not header.metadata and sum(f.width for f in header.fields) % 8:
                raise ProgramError(f"header {header.name!r} is not a whole number of bytes", hnode)
            self.headers.append(header)
            self.by_name[header.name] = header
        self.by_id = {h.json_id: h for h in self.headers}
        self.aliases: dict[str, tuple[str, str]] = {}
        for alias, target in root.get("field_aliases", []):
            self.aliases[alias] = (target[0], target[1])

    def _add_field(self, header: Header, fnode: list, tnode: dict) -> None:
        name, width = fnode[0], fnode[1]
        if width == "*":
            raise UnsupportedConstruct("variable-length (varbit) field", tnode,
                                       f"field {name!r} of header type {tnode['name']!r}")
        signed = bool(fnode[2]) if len(fnode) > 2 else False
        if len(fnode) > 3 and fnode[3]:
            raise UnsupportedConstruct("saturating field", tnode, f"field {name!r}")
        if signed and width < 2:
            raise ProgramError(f"signed field {name!r} must be at least 2 bits wide", tnode)
        f = Field(header, name, int(width), signed, len(self.fields))
        header.fields.append(f)
        self.fields.append(f)

    def header(self, name: str, node: object = None) -> Header:
        try:
            return self.by_name[name]
        except KeyError:
            raise ProgramError(f"unknown header instance {name!r}", node) from None

    def field(self, header_name: str, field_name: str, node: object = None) -> Field:
        """Resolve ``header.field``; ``$valid$`` is not a slot and must be handled by the caller."""
        header = self.header(header_name, node)
        for f in header.fields:
            if f.name == field_name:
                return f
        raise ProgramError(f"header {header_name!r} has no field {field_name!r}", node)

    def find(self, dotted: str) -> Field | None:
        """Resolve a target-level name such as ``intrinsic_metadata.mcast_grp`` (aliases first)."""
        if dotted in self.aliases:
            hname, fname = self.aliases[dotted]
            return self.field(hname, fname)
        hname, _, fname = dotted.rpartition(".")
        header = self.by_name.get(hname)
        if header is None:
            return None
        for f in header.fields:
            if f.name == fname:
                return f
        return None

    def templates(self) -> tuple[list[int], list[bool]]:
        """Initial ``F`` and ``V`` for a new packet: all fields zero, metadata valid."""
        return [0] * len(self.fields), [h.metadata for h in self.headers]

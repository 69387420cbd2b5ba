"""Generate the code that moves a header between packet bytes and the field list.

A header is cut into byte-aligned chunks (a run of fields whose widths add up to whole bytes).  A
chunk made of one 8/16/32/64-bit field is a single ``struct`` item; any other chunk is read as a few
``struct`` items that are glued into one int and split with shifts and masks.  One precompiled
``struct.Struct`` therefore (un)packs the whole header in a single call, and a header whose fields
are all aligned 8/16/32/64-bit fields becomes a single slice assignment ``F[a:b] = unpack(...)``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .layout import Field, Header

_DIRECT = {8: "B", 16: "H", 32: "I", 64: "Q"}
_PART_SIZES = ((8, "Q"), (4, "I"), (2, "H"), (1, "B"))


@dataclass
class _Chunk:
    fields: list[Field]
    nbits: int
    codes: str  # struct codes for this chunk

    @property
    def direct(self) -> bool:
        return len(self.fields) == 1 and self.fields[0].width in _DIRECT


def _chunks(header: Header) -> list[_Chunk]:
    chunks, current, bits = [], [], 0
    for f in header.fields:
        current.append(f)
        bits += f.width
        if bits % 8 == 0:
            chunks.append(_make_chunk(current, bits))
            current, bits = [], 0
    if current:
        raise ValueError(f"header {header.name} is not byte-aligned")
    return chunks


def _make_chunk(fields: list[Field], nbits: int) -> _Chunk:
    if len(fields) == 1 and fields[0].width in _DIRECT:
        code = _DIRECT[fields[0].width]
        return _Chunk(list(fields), nbits, code.lower() if fields[0].signed else code)
    codes, remaining = "", nbits // 8
    for size, code in _PART_SIZES:
        while remaining >= size:
            codes += code
            remaining -= size
    return _Chunk(list(fields), nbits, codes)


def _part_sizes(codes: str) -> list[int]:
    return [struct.calcsize("!" + c) * 8 for c in codes]


@dataclass
class HeaderCodec:
    """Struct format and generated source for one header instance."""

    header: Header
    fmt: str

    @property
    def unpack_name(self) -> str:
        return f"_U{self.header.vindex}"

    @property
    def pack_name(self) -> str:
        return f"_P{self.header.vindex}"

    def bind(self, namespace: dict) -> None:
        s = struct.Struct(self.fmt)
        namespace[self.unpack_name] = s.unpack_from
        namespace[self.pack_name] = s.pack

    def extract_lines(self, buf: str, offset: str) -> list[str]:
        """Statements that set every field of the header from ``buf[offset:]``."""
        chunks = _chunks(self.header)
        fields = self.header.fields
        if all(c.direct for c in chunks) and _contiguous(fields):
            return [f"F[{fields[0].index}:{fields[-1].index + 1}] = "
                    f"{self.unpack_name}({buf}, {offset})"]
        lines = [f"_t = {self.unpack_name}({buf}, {offset})"]
        item = 0
        for chunk in chunks:
            if chunk.direct:
                lines.append(f"F[{chunk.fields[0].index}] = _t[{item}]")
                item += 1
                continue
            sizes = _part_sizes(chunk.codes)
            terms, shift = [], chunk.nbits
            for size in sizes:
                shift -= size
                terms.append(f"(_t[{item}] << {shift})" if shift else f"_t[{item}]")
                item += 1
            whole = " | ".join(terms)
            if len(chunk.fields) == 1:
                lines.append(f"F[{chunk.fields[0].index}] = {_from_bits(chunk.fields[0], whole)}")
                continue
            lines.append(f"_x = {whole}")
            shift = chunk.nbits
            for f in chunk.fields:
                shift -= f.width
                bits = f"((_x >> {shift}) & {f.mask:#x})" if shift else f"(_x & {f.mask:#x})"
                lines.append(f"F[{f.index}] = {_from_bits(f, bits)}")
        return lines

    def emit_expression(self) -> str:
        """An expression evaluating to the header's bytes (fields as currently in ``F``)."""
        chunks = _chunks(self.header)
        fields = self.header.fields
        if all(c.direct for c in chunks) and _contiguous(fields):
            return f"{self.pack_name}(*F[{fields[0].index}:{fields[-1].index + 1}])"
        args = []
        for n, chunk in enumerate(chunks):
            if chunk.direct:
                args.append(f"F[{chunk.fields[0].index}]")
                continue
            terms, shift = [], chunk.nbits
            for f in chunk.fields:
                shift -= f.width
                value = f"(F[{f.index}] & {f.mask:#x})" if f.signed else f"F[{f.index}]"
                terms.append(f"({value} << {shift})" if shift else value)
            whole = " | ".join(terms)
            sizes = _part_sizes(chunk.codes)
            if len(sizes) == 1:
                args.append(f"({whole})")
                continue
            var = f"_c{n}"
            shift = chunk.nbits
            for i, size in enumerate(sizes):
                shift -= size
                src = f"({var} := ({whole}))" if i == 0 else var
                part = f"({src} >> {shift})" if shift else src
                args.append(f"({part} & {(1 << size) - 1:#x})")
        return f"{self.pack_name}({', '.join(args)})"


def _from_bits(f: Field, bits: str) -> str:
    """Interpret an unsigned bit pattern as the field's value (two's complement if signed)."""
    if not f.signed:
        return bits
    half = 1 << (f.width - 1)
    return f"(({bits} ^ {half:#x}) - {half:#x})"


def _contiguous(fields: list[Field]) -> bool:
    return all(b.index == a.index + 1 for a, b in zip(fields, fields[1:], strict=False))


def header_codec(header: Header) -> HeaderCodec:
    return HeaderCodec(header, "!" + "".join(c.codes for c in _chunks(header)))

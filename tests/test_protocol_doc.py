"""docs/protocol.md must say what the code does: its tables of ops, flags, bounce reasons, drop
reasons, slot states and management ops, the counter and table names it cites, the header layout
and the quantization error bound are checked against protocol.constants, the codec, the P4Info and
the quantizer."""

import re
from pathlib import Path

import numpy as np
import pytest

from control_plane.controller import Pipeline
from host_lib.engine.quantize import BlockQuantizer, qbits
from protocol import constants as P
from protocol.codec import FRAME_DTYPE

DOC = (Path(__file__).resolve().parent.parent / "docs" / "protocol.md").read_text()


def section(heading: str) -> str:
    """The text of the section whose heading starts with ``heading``, up to the next heading of
    the same or a higher level."""
    match = re.search(rf"^(#+) {re.escape(heading)}.*$", DOC, re.M)
    assert match, f"no section {heading!r} in docs/protocol.md"
    level = len(match.group(1))
    rest = DOC[match.end():]
    end = re.search(rf"^#{{1,{level}}} ", rest, re.M)
    return rest[:end.start()] if end else rest


def table(heading: str) -> list[list[str]]:
    """The rows of the first table in a section, cells stripped of spaces and backquotes."""
    lines = section(heading).splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append(line)
    return [[c.strip().strip("`") for c in row.strip("|").split("|")] for row in rows[2:]]


def numbered(heading: str) -> dict[str, int]:
    """name -> number from a table whose first two columns are a number and a name."""
    return {name: int(number, 0) for number, name, *_ in table(heading)}


def test_packet_type_table_matches_the_ops():
    assert numbered("3. Packet types") == {op.name: op.value for op in P.Op}


def test_bounce_reason_table_matches():
    assert numbered("2.2 Bounce reasons") == {b.name: b.value for b in P.Bounce if b.value}


def test_flag_table_matches():
    flags = {name: int(bit, 0) for bit, name, *_ in table("2.1 Flags") if name != "—"}
    assert flags == {f.name: f.value for f in P.Flag}


def test_drop_reason_table_matches():
    assert numbered("8.1 Drop reasons") == {r.name: r.value for r in P.DropReason if r.value}


def test_management_ops_match():
    ops = numbered("10. Management path")
    assert ops == {"MGMT_READ_AGGREGATOR": P.MGMT_READ_AGGREGATOR,
                   "MGMT_CLEAR_AGGREGATOR": P.MGMT_CLEAR_AGGREGATOR}


def test_slot_states_match():
    states = dict(re.findall(r"`(EMPTY|AGGREGATING|COMPLETE|TAKEN)` (\d)", section("4.1 ")))
    assert {k: int(v) for k, v in states.items()} == {s.name: s.value for s in P.SlotState}


def test_header_table_matches_the_codec_layout():
    header_start = P.ETH_LEN + P.IPV4_LEN + P.UDP_LEN
    offsets = {name: off - header_start for name, (_, off) in FRAME_DTYPE.fields.items()
               if off >= header_start}
    rows = {row[1]: int(row[0]) for row in table("2. The SA-ATP header")}
    # version and op share byte 0 (ver_op in the codec)
    assert rows.pop("version") == rows.pop("op") == offsets.pop("ver_op")
    assert rows == offsets
    assert f"{P.HEADER_LEN} bytes" in DOC and f"UDP destination port {P.UDP_PORT}" in DOC


def test_every_counter_and_table_the_doc_names_exists_in_the_program():
    p4info, _, _ = Pipeline().load()
    counters = [row[0] for row in table("8. Counters")]
    assert len(counters) == 6
    for name in counters:
        p4info.counter(name)  # raises for an unknown name
    for name in re.findall(r"`(SaAtp\w+\.\w+\.\w+)`", section("9. Drop simulator")):
        p4info.table(name)


@pytest.mark.parametrize("n", [2, 8, 32])
def test_the_stated_quantization_bound_holds_and_is_reached(n):
    rng = np.random.default_rng(n)
    q = BlockQuantizer(n)
    e = 0
    scales = np.full(4, e + P.EXP_BIAS, np.uint16)
    step = 2.0 ** (e - qbits(n))
    # Values exactly half a step above an odd grid point: round-half-even rounds every one of
    # them up, so the n errors add up.
    odd = 2 * rng.integers(0, 2**21, (n, 4 * P.LANES)) + 1  # odd + 0.5 fits in 24 bits
    x = ((odd + 0.5) * step).astype(np.float32)
    assert np.all(x.astype(np.float64) == (odd + 0.5) * step)  # exactly representable
    sums = np.zeros((4, P.LANES), np.int64)
    for w in range(n):
        lanes, exps = q.quantize(x[w], scales)
        sums += lanes.astype(np.int64)
    out = q.dequantize(sums.astype(np.int32), scales, np.full(4, e + P.EXP_BIAS, np.uint16),
                       x.shape[1], 1.0)
    error = np.abs(out.astype(np.float64) - x.astype(np.float64).sum(axis=0))
    bound = n * 2.0 ** (e - qbits(n) - 1)  # the formula docs/protocol.md states
    assert np.allclose(q.error_bound(scales), bound)
    half_ulp = np.spacing(np.abs(out)).astype(np.float64) / 2
    assert np.all(error <= bound + half_ulp)
    assert error.max() >= 0.9 * bound


def test_the_doc_example_of_the_bound_is_the_quantizers():
    example = re.search(r"For 8 workers and a block maximum of 1\.0 \(E = 0, j = (\d+)\) that is\s+"
                        r"2\^(-\d+)", section("5. Quantization"))
    assert example, "the worked example of the bound is missing"
    assert int(example.group(1)) == qbits(8)
    bound = BlockQuantizer(8).error_bound(np.array([P.EXP_BIAS], np.uint16))[0]
    assert bound == 2.0 ** int(example.group(2))

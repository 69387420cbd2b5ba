"""protocol.constants must equal both P4 programs' constants (docs/protocol.md): the v1model
program's constants.p4 is written by hand and checked here; the TNA program's protocol.p4 is
generated from protocol.constants by tools/tna_codegen.py and checked to be up to date."""

import re
import struct
from pathlib import Path

import pytest

from protocol import constants as P
from protocol.codec import HEADER_STRUCT
from tools import tna_codegen

ROOT = Path(__file__).resolve().parent.parent
CONSTANTS = ROOT / "p4src" / "include" / "constants.p4"
TNA_PROTOCOL = ROOT / "p4src" / "tofino" / "include" / "protocol.p4"
PROGRAMS = {"v1model": CONSTANTS, "tna": TNA_PROTOCOL}


def p4_constants(path: Path = CONSTANTS) -> dict[str, int]:
    text = path.read_text()
    values = {name: int(value, 0) for name, value in
              re.findall(r"const\s+bit<\d+>\s+(\w+)\s*=\s*(0x[0-9A-Fa-f]+|\d+)\s*;", text)}
    values.update({name: int(value, 0) for name, value in
                   re.findall(r"#define\s+(\w+)\s+(0x[0-9A-Fa-f]+|\d+)\b", text)})
    return values


@pytest.mark.parametrize("program", PROGRAMS)
def test_every_enum_member_matches_its_p4_constant(program):
    p4 = p4_constants(PROGRAMS[program])
    prefixes = {P.Op: "OP_", P.Flag: "FLAG_", P.Bounce: "BOUNCE_", P.SlotState: "SLOT_",
                P.DropReason: "DROP_"}
    for enum_type, prefix in prefixes.items():
        for member in enum_type:
            if member.name == "NONE" and enum_type is P.Bounce:
                continue  # 0 = not a bounce; no P4 constant needed
            assert p4[prefix + member.name] == member.value, f"{prefix}{member.name}"
        host_names = {m.name for m in enum_type}
        p4_names = {k[len(prefix):] for k in p4 if k.startswith(prefix)}
        assert p4_names <= host_names | {"NONE"}, f"P4 has {prefix}* the host lacks"


@pytest.mark.parametrize("program", PROGRAMS)
def test_scalars_match(program):
    p4 = p4_constants(PROGRAMS[program])
    assert p4["SA_ATP_UDP_PORT"] == P.UDP_PORT
    assert p4["SA_ATP_VERSION"] == P.VERSION
    assert p4["NUM_SLOTS"] == P.NUM_SLOTS
    assert p4["NUM_AGGREGATORS"] == P.NUM_AGGREGATORS
    assert p4["MAX_JOBS"] == P.MAX_JOBS
    assert p4["STATS_SIZE"] == P.MAX_JOBS * P.STATS_PER_JOB
    assert p4["FLOOD_GROUP"] == P.FLOOD_GROUP
    assert p4["ETHERTYPE_IPV4"] == P.ETHERTYPE_IPV4
    assert p4["IP_PROTO_UDP"] == P.IP_PROTO_UDP
    assert p4["MGMT_READ_AGGREGATOR"] == P.MGMT_READ_AGGREGATOR
    assert p4["MGMT_CLEAR_AGGREGATOR"] == P.MGMT_CLEAR_AGGREGATOR


def test_the_v1model_cpu_port_is_the_controllers():
    """The TNA program learns its CPU port from the controller (a parser value set)."""
    assert p4_constants()["CPU_PORT"] == P.CPU_PORT


def test_every_shared_p4_constant_has_a_python_mirror():
    """A constant added to constants.p4 must be mirrored here (or listed as P4-internal)."""
    p4_internal = {"STATS_SIZE", "MAX_WORKER_ENTRIES", "INSTANCE_TYPE_REPLICATION", "MGMT_OPCODES"}
    p4_internal |= {k for k in p4_constants() if k.startswith(("LANES_", "RESPOND_"))}
    renamed = {"SA_ATP_UDP_PORT": "UDP_PORT", "SA_ATP_VERSION": "VERSION"}
    enum_prefixes = ("OP_", "FLAG_", "BOUNCE_", "SLOT_", "DROP_")
    for name in p4_constants():
        if name in p4_internal or name.startswith(enum_prefixes):
            continue
        assert hasattr(P, renamed.get(name, name)), f"{name} has no mirror in protocol.constants"


def test_header_lane_count_matches():
    lanes = (CONSTANTS.parent / "lanes.p4").read_text()
    macro = lanes[lanes.index("#define LANES(F)"):lanes.index("#endif")]
    assert re.findall(r"F\((\d\d)\)", macro) == [f"{i:02d}" for i in range(P.LANES)]
    tna = TNA_PROTOCOL.read_text()
    tna_lanes = tna[tna.index("header lanes_h"):]
    tna_lanes = tna_lanes[:tna_lanes.index("}")]
    assert re.findall(r"bit<32> v(\d\d);", tna_lanes) == [f"{i:02d}" for i in range(P.LANES)]


def header_type(text: str, name: str) -> list[tuple[str, int]]:
    body = text[text.index(f"header {name} {{"):]
    body = body[:body.index("}")]
    return [(field, int(bits)) for bits, field in re.findall(r"bit<(\d+)>\s+(\w+);", body)]


@pytest.mark.parametrize("path", [CONSTANTS.parent / "headers.p4", TNA_PROTOCOL],
                         ids=["v1model", "tna"])
def test_the_sa_atp_header_type_is_the_shared_layout(path):
    assert header_type(path.read_text(), "sa_atp_h") == list(P.HEADER_FIELDS)


def test_the_shared_layout_is_the_codecs():
    assert sum(bits for _, bits in P.HEADER_FIELDS) == 8 * P.HEADER_LEN
    byte_fields = [bits // 8 for _, bits in P.HEADER_FIELDS[2:]]  # version and op share a byte
    sizes = [struct.calcsize("!" + c) for c in HEADER_STRUCT.format.lstrip("!")]
    assert sizes == [1] + byte_fields


def test_the_generated_tna_sources_are_up_to_date():
    assert tna_codegen.stale() == [], "run python tools/tna_codegen.py write"

"""protocol.constants must equal the P4 program's constants (docs/protocol.md)."""

import re
from pathlib import Path

from protocol import constants as P

CONSTANTS = Path(__file__).resolve().parent.parent / "p4src" / "include" / "constants.p4"


def p4_constants() -> dict[str, int]:
    text = CONSTANTS.read_text()
    values = {name: int(value, 0) for name, value in
              re.findall(r"const\s+bit<\d+>\s+(\w+)\s*=\s*(0x[0-9A-Fa-f]+|\d+)\s*;", text)}
    values.update({name: int(value, 0) for name, value in
                   re.findall(r"#define\s+(\w+)\s+(0x[0-9A-Fa-f]+|\d+)\b", text)})
    return values


def test_every_enum_member_matches_its_p4_constant():
    p4 = p4_constants()
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


def test_scalars_match():
    p4 = p4_constants()
    assert p4["SA_ATP_UDP_PORT"] == P.UDP_PORT
    assert p4["SA_ATP_VERSION"] == P.VERSION
    assert p4["NUM_SLOTS"] == P.NUM_SLOTS
    assert p4["NUM_AGGREGATORS"] == P.NUM_AGGREGATORS
    assert p4["MAX_JOBS"] == P.MAX_JOBS
    assert p4["STATS_SIZE"] == P.MAX_JOBS * P.STATS_PER_JOB
    assert p4["FLOOD_GROUP"] == P.FLOOD_GROUP
    assert p4["ETHERTYPE_IPV4"] == P.ETHERTYPE_IPV4
    assert p4["IP_PROTO_UDP"] == P.IP_PROTO_UDP
    assert p4["CPU_PORT"] == P.CPU_PORT
    assert p4["MGMT_READ_AGGREGATOR"] == P.MGMT_READ_AGGREGATOR
    assert p4["MGMT_CLEAR_AGGREGATOR"] == P.MGMT_CLEAR_AGGREGATOR


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

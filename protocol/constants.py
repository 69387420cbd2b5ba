"""SA-ATP protocol constants, mirrored from ``p4src/include/constants.p4``.

docs/protocol.md is the contract; ``tests/test_protocol_constants.py`` checks that every value
here equals the P4 program's, so every constant the P4 program shares with Python lives here.
"""

from __future__ import annotations

import enum

ETHERTYPE_IPV4 = 0x0800
IP_PROTO_UDP = 17
UDP_PORT = 0x5A7A  # 23162
VERSION = 2
LANES = 64  # K: int32 values per packet

ETH_LEN = 14
IPV4_LEN = 20
UDP_LEN = 8
HEADER_LEN = 26  # the SA-ATP header
# The SA-ATP header field by field, (name, bits) in wire order (docs/protocol.md §2): the codec,
# the v1model header type and the generated TNA header type all follow it (the constants test).
HEADER_FIELDS = (("version", 4), ("op", 4), ("flags", 8), ("job", 16), ("slot", 16),
                 ("worker", 8), ("reason", 8), ("chunk", 32), ("bitmap", 32), ("count", 8),
                 ("fanin", 8), ("scale", 16), ("exp", 16), ("run", 32))
PAYLOAD_LEN = 4 * LANES
FRAME_LEN = ETH_LEN + IPV4_LEN + UDP_LEN + HEADER_LEN + PAYLOAD_LEN  # 324
LANES_OFFSET = FRAME_LEN - PAYLOAD_LEN  # 68: lanes are 4-byte aligned in a frame buffer

MAX_WORKERS = 32  # bitmaps are 32 bits wide
EXP_BIAS = 0x8000  # scale and exp fields carry exponent + EXP_BIAS
EXP_NONE = 0  # exp of an all-zero block; scale 0 means raw int32 lanes
EXP_NONFINITE = 0xFFFF  # exp of a block holding NaN or +-Inf


class Op(enum.IntEnum):
    DATA = 1
    RESULT = 2
    BOUNCE = 3
    TAKEOVER = 4
    PARTIAL = 5
    HELPER_DATA = 6
    HELPER_RESULT = 7


HOST_OPS = frozenset({Op.DATA, Op.TAKEOVER, Op.HELPER_DATA, Op.HELPER_RESULT})


class Flag(enum.IntFlag):
    SET = 0x01
    RETX = 0x02
    COPY = 0x04
    HELPER = 0x08
    PROBE = 0x10


KNOWN_FLAGS = int(Flag.SET | Flag.RETX | Flag.COPY | Flag.HELPER | Flag.PROBE)


class Bounce(enum.IntEnum):
    NONE = 0
    PENDING = 1
    STALE = 2
    TAKEN = 3
    NOT_HELD = 4
    SCALE_MISMATCH = 5
    OLD_RUN = 6


class SlotState(enum.IntEnum):
    EMPTY = 0
    AGGREGATING = 1
    COMPLETE = 2
    TAKEN = 3


class DropReason(enum.IntEnum):
    NONE = 0
    MALFORMED = 1
    BAD_OP = 2
    UNKNOWN_JOB = 3
    UNREGISTERED = 4
    SLOT_RANGE = 5
    NOT_EXPECTED = 6
    SIM = 7
    NO_REPLICA = 8
    SPOOFED = 9
    NO_FLOOD = 10


# Switch resources (p4src/include/constants.p4).
NUM_SLOTS = 4096
NUM_AGGREGATORS = 2 * NUM_SLOTS
MAX_JOBS = 256
STATS_PER_JOB = 16
FLOOD_GROUP = 1
# A pool aggregator's lane holder (docs/protocol.md §4.6): the holding aggregator's index + 1,
# with this bit while its chunk is aggregating.
POOL_HELD = 0x8000

# The controller's port (simple_switch_grpc --cpu-port) and the management ops it sends there
# (docs/protocol.md §10).
CPU_PORT = 255
MGMT_READ_AGGREGATOR = 1
MGMT_CLEAR_AGGREGATOR = 2

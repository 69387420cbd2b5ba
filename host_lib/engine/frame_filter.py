"""Which received frames a worker accepts (docs/protocol.md §11, the threat model).

Everything a worker may act on comes from the switch: results, bounces and partials, and the
contributions peers send to a helper, which the switch forwards after checking their sender. So a
worker accepts a frame only if it is a well-formed SA-ATP frame (IPv4, UDP, this protocol version, a
known op, no reserved flag: :func:`protocol.codec.well_formed`), sent from the switch's address and
port to this worker's address and port, for this worker's job and run. Every other frame is dropped
and counted by reason, on every link type, before any of its fields is trusted: a forged or
misdelivered result can never reach a sum, and a frame left over from an earlier run of the job can
never match a chunk of this one.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from protocol import constants as P
from protocol.codec import FRAME_DTYPE, KNOWN_OPS, Endpoint, field_offset, well_formed

# The reasons a frame is refused, in the order they are checked (each frame counts once).
NOT_SA_ATP = "not_sa_atp"  # not a well-formed SA-ATP header (protocol.codec.well_formed)
NOT_FROM_SWITCH = "not_from_switch"  # source MAC, IPv4 address or UDP port not the switch's
NOT_FOR_US = "not_for_us"  # destination MAC, IPv4 address or UDP port not this worker's
OTHER_JOB = "other_job"
OTHER_RUN = "other_run"
REASONS = (NOT_SA_ATP, NOT_FROM_SWITCH, NOT_FOR_US, OTHER_JOB, OTHER_RUN)


def _field(name: str, size: int) -> slice:
    """The bytes of an address field in a frame."""
    return slice(field_offset(name), field_offset(name) + size)


class FrameFilter:
    """The acceptance rule for one worker of one job run, applied to a batch of frames."""

    def __init__(self, switch: Endpoint, local: Endpoint, job: int, run: int):
        self.job, self.run = job, run
        self._src_mac = np.frombuffer(switch.mac_raw, np.uint8)
        self._dst_mac = np.frombuffer(local.mac_raw, np.uint8)
        self._src_ip = np.frombuffer(switch.ip_raw, np.uint8)
        self._dst_ip = np.frombuffer(local.ip_raw, np.uint8)
        self._src_port, self._dst_port = switch.port, local.port
        self.template, self.mask = self._expected_bytes(switch, local)

    def _expected_bytes(self, switch: Endpoint, local: Endpoint) -> tuple[np.ndarray, np.ndarray]:
        """Every byte the rule checks, as (value, mask) over a frame's headers: a frame is
        accepted exactly when ``row & mask == value``."""
        value, mask = np.zeros(1, FRAME_DTYPE), np.zeros(1, FRAME_DTYPE)
        expected = {"eth_dst": local.mac_raw, "eth_src": switch.mac_raw,
                    "eth_type": P.ETHERTYPE_IPV4, "ip_ver_ihl": 0x45,
                    "ip_proto": P.IP_PROTO_UDP, "ip_src": switch.ip_raw, "ip_dst": local.ip_raw,
                    "udp_sport": switch.port, "udp_dport": local.port,
                    "ver_op": P.VERSION << 4, "job": self.job, "run": self.run}
        for name, v in expected.items():
            size = FRAME_DTYPE.fields[name][0].itemsize
            value[name] = v
            mask[name] = b"\xff" * size if isinstance(v, bytes) else (1 << 8 * size) - 1
        mask["ver_op"] = 0xF0  # the version nibble only (the op: ``KNOWN_OPS``)
        mask["flags"] = 0xFF ^ P.KNOWN_FLAGS  # no reserved flag
        width = P.LANES_OFFSET
        return (value.view(np.uint8)[:width].copy(), mask.view(np.uint8)[:width].copy())

    def accept(self, frames: np.ndarray, raw: np.ndarray, rejected: Counter) -> np.ndarray:
        """A mask of the frames to act on; the others are counted in ``rejected`` by reason.
        ``frames`` is the batch as FRAME_DTYPE records, ``raw`` the same bytes as rows."""
        head = raw[:, :len(self.mask)]
        ok = ((head & self.mask) == self.template).all(1) & KNOWN_OPS[frames["ver_op"] & 0xF]
        if ok.all():  # the usual batch: one comparison of every checked byte, one of the op
            return ok
        checks = (
            (NOT_SA_ATP, well_formed(frames)),
            (NOT_FROM_SWITCH, (raw[:, _field("eth_src", 6)] == self._src_mac).all(1)
             & (raw[:, _field("ip_src", 4)] == self._src_ip).all(1)
             & (frames["udp_sport"] == self._src_port)),
            (NOT_FOR_US, (raw[:, _field("eth_dst", 6)] == self._dst_mac).all(1)
             & (raw[:, _field("ip_dst", 4)] == self._dst_ip).all(1)
             & (frames["udp_dport"] == self._dst_port)),
            (OTHER_JOB, frames["job"] == self.job),
            (OTHER_RUN, frames["run"] == self.run),
        )
        ok = np.ones(len(frames), bool)
        for reason, passed in checks:
            refused = ok & ~passed
            if refused.any():
                rejected[reason] += int(refused.sum())
                ok &= passed
        return ok

"""Per-packet state and the helper functions that generated code calls (what every target's
packets have; a target keeps its own per-packet state in a subclass of :class:`Packet`)."""

from __future__ import annotations

import logging

from .errors import PacketDropped

log = logging.getLogger("softswitch")


class Packet:
    """One packet instance on its way through the switch.

    ``F``/``V`` are the packet header vector (see :mod:`softswitch.core.layout`); the other slots
    are what the generated code and the tables read and write outside of the PHV.
    """

    __slots__ = ("F", "V", "frame", "payload", "ingress_port", "ingress_length", "length",
                 "egress_port", "exit", "parser_error")

    def __init__(self, F: list, V: list, frame: bytes, ingress_port: int, ingress_length: int):
        self.F = F
        self.V = V
        self.frame = frame  # the bytes this instance entered the parser with
        self.payload = frame  # what follows the parsed headers (set by the parser)
        self.ingress_port = ingress_port
        self.ingress_length = ingress_length  # bytes counted by counters
        self.length = ingress_length  # its length now: added and removed headers change it
        self.egress_port = 0
        self.exit = False
        self.parser_error = 0


class ParserError(Exception):
    """Raised by generated parser code: the error code for parser_error, and how many bytes
    had been consumed (the headers extracted before the error stay parsed, as in bmv2)."""

    def __init__(self, code: int, offset: int):
        super().__init__(code, offset)
        self.code = code
        self.offset = offset


def shift_left(value: int, amount: int) -> int:
    if amount < 0 or amount > 1 << 20:
        raise PacketDropped(f"shift amount {amount} is out of range")
    return value << amount


def divide(a: int, b: int) -> int:
    if b == 0:
        raise PacketDropped("division by zero")
    return a // b


def modulo(a: int, b: int) -> int:
    if b == 0:
        raise PacketDropped("modulo by zero")
    return a % b


def out_of_bounds(kind: str, name: str, index: int, size: int) -> None:
    log.error("Attempted to access %s '%s' with size %d at out-of-bounds index %d; "
              "nothing was updated", kind, name, size, index)


def assertion_failed(kind: str, where: str) -> None:
    # bmv2 calls std::abort() here; a switch process should not die for one packet, so the packet
    # is dropped and the failure is logged loudly instead.
    log.error("%s error: %s failed; packet dropped", kind, where)
    raise PacketDropped(f"{kind} failed: {where}")


def log_msg(fmt: str, values: tuple) -> None:
    """bmv2's log_msg: each unescaped '{}' is replaced by the next value, in decimal."""
    out, i, n = [], 0, 0
    while i < len(fmt):
        if fmt.startswith("\\{", i) or fmt.startswith("\\}", i):
            out.append(fmt[i + 1])
            i += 2
        elif fmt.startswith("{}", i) and n < len(values):
            out.append(str(values[n]))
            n += 1
            i += 2
        else:
            out.append(fmt[i])
            i += 1
    log.info("%s", "".join(out))


RUNTIME_HELPERS = {
    "_ParserError": ParserError,
    "_shift_left": shift_left,
    "_divide": divide,
    "_modulo": modulo,
    "_out_of_bounds": out_of_bounds,
    "_assertion_failed": assertion_failed,
    "_log_msg": log_msg,
}

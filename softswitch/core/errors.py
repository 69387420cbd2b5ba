"""Exceptions raised by the software switch."""

from __future__ import annotations


def describe_node(node: object) -> str:
    """A short human-readable locator for a bmv2 JSON node: its name, id and P4 source position."""
    if not isinstance(node, dict):
        return repr(node)[:120]
    parts = []
    for key in ("name", "id", "op", "type"):
        if key in node and not isinstance(node[key], (dict, list)):
            parts.append(f"{key}={node[key]!r}")
    info = node.get("source_info")
    if isinstance(info, dict):
        where = f"{info.get('filename', '?')}:{info.get('line', '?')}"
        fragment = info.get("source_fragment")
        parts.append(f"source={where}" + (f" ({fragment!r})" if fragment else ""))
    return ", ".join(parts) if parts else repr(node)[:120]


class SoftSwitchError(Exception):
    """Base class of every error raised by this package."""


class ProgramError(SoftSwitchError):
    """The bmv2 JSON is malformed or inconsistent (bmv2 would refuse to load it too)."""

    def __init__(self, message: str, node: object = None):
        self.node = node
        if node is not None:
            message = f"{message} [{describe_node(node)}]"
        super().__init__(message)


class UnsupportedConstruct(ProgramError):
    """The bmv2 JSON uses a construct this target does not execute; raised at load time."""

    def __init__(self, construct: str, node: object = None, detail: str = ""):
        self.construct = construct
        message = f"unsupported construct: {construct}"
        if detail:
            message += f": {detail}"
        super().__init__(message, node)


class TableError(SoftSwitchError):
    """A control-plane table operation was refused. ``code`` names the reason, as bmv2 does."""

    def __init__(self, code: str, message: str):
        self.code = code
        super().__init__(message)


class StateError(SoftSwitchError):
    """A control-plane operation on a register, counter or the PRE was refused."""


class PacketDropped(SoftSwitchError):
    """Raised inside packet processing when bmv2 would abort the packet (e.g. a failed assert)."""

"""The text of the generated module."""

from __future__ import annotations

MAX_NESTING = 40  # deeper inlining would hit Python's limit on nested blocks


class Source:
    """Indented source text."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.depth = 0

    def line(self, text: str = "") -> None:
        self.lines.append("    " * self.depth + text if text else "")

    def extend(self, lines: list[str]) -> None:
        for text in lines:
            self.line(text)

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"

"""The fenced code blocks of a Markdown document, read as CommonMark reads them.

Shared by doc-snippets.py (the ```swift blocks) and doc-transcripts.py (every other block), so the two checks
cannot disagree on where a block starts, where it ends or what its lines are.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")


@dataclass(frozen=True)
class Fence:
    """One fenced block."""

    line: int  # 1-based line of the opening fence
    info: str  # the info string, stripped: `swift`, `console`, ``
    lines: list[str]  # the code lines, each less up to the fence's own indentation
    before: str  # the nearest non-blank line before the fence (a marker comment, say); '' when there is none

    @property
    def language(self) -> str:
        """The info string's first word."""
        return (self.info.split() or [""])[0]


def fenced_blocks(text: str) -> list[Fence]:
    """Every fenced block of `text`, in order. A fence may be indented (in a list item); it is closed by a fence
    of the same character, at least as long, with no info string, or by the end of the document."""
    found: list[Fence] = []
    lines = text.split("\n")
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        fence, indent = opening["fence"], len(opening["indent"])
        previous = index - 1
        while previous >= 0 and not lines[previous].strip():
            previous -= 1
        before = lines[previous] if previous >= 0 else ""
        start = index
        body: list[str] = []
        index += 1
        while index < len(lines):
            closing = FENCE.match(lines[index])
            if closing and closing["fence"][0] == fence[0] and len(closing["fence"]) >= len(fence) and not closing["info"].strip():
                break
            line = lines[index]
            body.append(line[min(indent, len(line) - len(line.lstrip(" "))):])
            index += 1
        index += 1
        found.append(Fence(start + 1, opening["info"].strip(), body, before))
    return found

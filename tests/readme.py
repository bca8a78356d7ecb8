"""The README's parts that tests run or check: its sections, fenced code blocks, links and the commands' expected
output (the comment after a command)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"

_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
_LINK = re.compile(r"\]\(([^)\s]+)\)")


@dataclass(frozen=True)
class Block:
    language: str
    text: str


@dataclass(frozen=True)
class Command:
    """One logical line of a shell block (continuations joined) and the output its comment expects."""

    line: str
    expected: str | None


def section(title: str, text: str | None = None) -> str:
    """The text under a ``## title`` heading, up to the next heading of that level."""
    text = README.read_text() if text is None else text
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, f"the README has no section {title!r}"
    return match.group(1)


def blocks(text: str) -> list[Block]:
    return [Block(match.group(1), match.group(2)) for match in _FENCE.finditer(text)]


def links(text: str) -> list[str]:
    return _LINK.findall(text)


def commands(block: Block) -> list[Command]:
    """A shell block's commands. A comment is the output expected, with ``...`` for what it leaves out."""
    joined = block.text.replace("\\\n", " ")
    found = []
    for line in joined.splitlines():
        code, _, comment = line.partition("  # ")
        if code.strip():
            found.append(Command(code.strip(), comment.strip() or None))
    return found


def shows(output: str, expected: str) -> bool:
    """Whether ``output`` holds the pieces of ``expected`` around its ``...``, in order, blanks aside."""
    squeezed = "".join(output.split())
    position = 0
    for piece in expected.split("..."):
        piece = "".join(piece.split())
        found = squeezed.find(piece, position)
        if found < 0:
            return False
        position = found + len(piece)
    return True

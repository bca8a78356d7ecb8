"""How much memory reading and indexing a graph takes, before it is done: from the first bytes of its text and
its size (``estimate``), or exactly once it is parsed (``build_bytes``).

The costs are peak resident memory over a process that has the readers and the build compiled, measured by
``benchmarks/bench_hardening.py`` (CPU build, 2 cores; ``benchmarks/results/hardening.md``). Random graphs of
2-4M edges: 106-124 bytes an edge for edge lists and integer JSON (the parse's spans and arrays included), 43
for ``.gra``; about 170 bytes a node; and the text itself, which edge lists scan through two more arrays of
their size. Edge lists with one-byte names ("0 1" lines) are the extreme: 28x their text. Update the constants
with the readers or the build.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .readers import guess_format

__all__ = ["BuildEstimate", "estimate", "build_bytes", "SAMPLE_BYTES"]

# How much of the (decompressed) text the estimate reads.
SAMPLE_BYTES = 1 << 20

_BYTES_PER_EDGE = {"gra": 45, "edgelist": 115, "json": 115}
_BYTES_PER_NODE = 170
# The text held while parsing, times this: edge lists keep two arrays of spans over it.
_TEXT_FACTOR = {"gra": 1.5, "edgelist": 3.5, "json": 1.5}
_EDGE_LINE = re.compile(rb"^[ \t]*([^#%\s,]+)[ \t,]+([^\s,]+)", re.MULTILINE)
_JSON_NAME = re.compile(rb'-?\d+|"(?:[^"\\]|\\.)*"')
_GRA_COUNT = re.compile(rb"\A\s*graph_for_greach\s*\n\s*(\d{1,18})\s*\n")
_TOKEN = re.compile(rb"[^\s#:]+")


@dataclass(frozen=True)
class BuildEstimate:
    """What a graph of ``text_bytes`` will likely hold, and the memory its read and build need."""

    format: str
    text_bytes: int
    edges: int
    nodes: int
    bytes: int


def build_bytes(format: str, text_bytes: int, nodes: int, edges: int) -> int:
    """Peak memory of reading a text of ``text_bytes`` and indexing its ``nodes`` and ``edges`` entries."""
    factor = _TEXT_FACTOR.get(format, _TEXT_FACTOR["edgelist"])
    per_edge = _BYTES_PER_EDGE.get(format, _BYTES_PER_EDGE["edgelist"])
    return int(factor * text_bytes) + per_edge * edges + _BYTES_PER_NODE * nodes


def estimate(sample: bytes, text_bytes: int, format: str | None = None) -> BuildEstimate:
    """The edges and nodes of a graph whose text is ``text_bytes`` long and begins with ``sample``, and the
    memory its build needs. Edges are counted in the sample and scaled to the whole text; nodes are the
    sample's distinct names scaled the same way, at most as many as the edges (a ``.gra`` file says how many),
    which is more than most graphs have. A text unlike its beginning can need more: the build's own limit
    catches that."""
    chosen = format or guess_format(sample)
    scale = max(text_bytes / max(len(sample), 1), 1.0)
    if chosen == "gra":
        header = _GRA_COUNT.match(sample)
        body = sample[header.end() :] if header else sample
        sample_edges = max(len(_TOKEN.findall(body)) - body.count(b"\n"), 0)
        edges = max(round(sample_edges * scale), 1)
        nodes = int(header.group(1)) if header else edges
    else:
        if chosen == "json":
            names = _JSON_NAME.findall(sample)
            sample_edges = len(names) // 2
        else:
            pairs = _EDGE_LINE.findall(sample)
            names = [name for pair in pairs for name in pair]
            sample_edges = len(pairs)
        edges = max(round(sample_edges * scale), 1)
        nodes = max(min(round(len(set(names)) * scale), edges), 1)
    return BuildEstimate(chosen, text_bytes, edges, nodes, build_bytes(chosen, text_bytes, nodes, edges))

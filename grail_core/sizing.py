"""How much memory reading and indexing a graph takes, before it is done: from the first bytes of its text and
its size (``estimate``), or exactly once it is parsed (``build_bytes``).

The costs per edge and per byte of text are each format's, in the format table (``grail_core.formats``);
the cost per node is here. They are peak resident memory over a process that has the readers and the build
compiled, measured by ``benchmarks/bench_hardening.py`` (``benchmarks/results/hardening-memory.md``): update them with
the readers or the build.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .formats import FORMAT_TABLE
from .readers import guess_format

__all__ = ["BuildEstimate", "estimate", "build_bytes", "SAMPLE_BYTES"]

# How much of the (decompressed) text the estimate reads.
SAMPLE_BYTES = 1 << 20

_BYTES_PER_NODE = 170
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
    row = FORMAT_TABLE.get(format, FORMAT_TABLE["edgelist"])
    return int(row.text_factor * text_bytes) + row.bytes_per_edge * edges + _BYTES_PER_NODE * nodes


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

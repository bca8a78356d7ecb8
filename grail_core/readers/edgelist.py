"""Edge lists: one edge per line, two node names separated by whitespace, tabs or commas.

Lines starting with ``#`` or ``%`` are comments, columns after the second (weights) are ignored, a
header line (``source,target`` and the like) is recognised, names may be integers or any strings.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..byteops import parse_decimal
from ..errors import GraphFormatError
from ..names import MAX_NAME_BYTES, NameTokens, intern_integers, intern_strings
from ._numeric import CARRIAGE_RETURN, COMMA, NEWLINE, SPACE, TAB, grow
from .graph_input import GraphInput

HASH = 35
PERCENT = 37
QUOTE = 34
MINUS = 45
PLUS = 43

HEADER_WORDS = frozenset(
    {
        "source",
        "target",
        "src",
        "dst",
        "from",
        "to",
        "u",
        "v",
        "node1",
        "node2",
        "head",
        "tail",
        "from_node",
        "to_node",
        "source_id",
        "target_id",
        "start",
        "end",
        "parent",
        "child",
        "id1",
        "id2",
    }
)


@njit(inline="always")
def _is_separator(c):
    return c == SPACE or c == TAB or c == COMMA or c == CARRIAGE_RETURN


@njit(nogil=True, cache=True)
def _scan(buf):
    """Byte spans of the first two tokens of every non-comment line; (spans, lines, count, bad line)."""
    spans = np.empty((max(16, buf.size // 16), 4), dtype=np.int64)
    lines = np.empty(spans.shape[0], dtype=np.int64)
    count = 0
    i = 0
    line = 0
    while i < buf.size:
        line += 1
        while i < buf.size and _is_separator(buf[i]):
            i += 1
        if i >= buf.size:
            break
        if buf[i] == NEWLINE:
            i += 1
            continue
        if buf[i] == HASH or buf[i] == PERCENT:
            while i < buf.size and buf[i] != NEWLINE:
                i += 1
            i += 1
            continue
        found = 0
        starts = np.empty(2, dtype=np.int64)
        ends = np.empty(2, dtype=np.int64)
        while i < buf.size and buf[i] != NEWLINE:
            if _is_separator(buf[i]):
                i += 1
                continue
            start = i
            while i < buf.size and buf[i] != NEWLINE and not _is_separator(buf[i]):
                i += 1
            if found < 2:
                end = i
                if end - start >= 2 and buf[start] == QUOTE and buf[end - 1] == QUOTE:
                    start += 1
                    end -= 1
                starts[found] = start
                ends[found] = end
            found += 1
        i += 1
        if found < 2:
            return spans, lines, count, line
        if count == spans.shape[0]:
            bigger = np.empty((2 * count, 4), dtype=np.int64)
            bigger[:count] = spans[:count]
            spans = bigger
            lines = grow(lines, count)
        spans[count, 0] = starts[0]
        spans[count, 1] = ends[0]
        spans[count, 2] = starts[1]
        spans[count, 3] = ends[1]
        lines[count] = line
        count += 1
    return spans, lines, count, 0


@njit(nogil=True, cache=True)
def _integers(buf, starts, ends, values):
    """Parse every span as a signed decimal int64; returns the index of the first that is not, or -1."""
    for k in range(starts.size):
        value, ok = parse_decimal(buf, starts[k], ends[k])
        if not ok:
            return k
        values[k] = value
    return -1


def _token(buf: np.ndarray, start: int, end: int) -> str:
    return bytes(buf[start:end]).decode("utf-8", errors="replace")


def parse_edgelist(
    data: bytes | memoryview, header: bool | None = None, max_name_bytes: int = MAX_NAME_BYTES
) -> GraphInput:
    """Parse an edge list; ``header`` None recognises a header line by itself; string names longer than
    ``max_name_bytes`` are refused."""
    buf = np.frombuffer(data, dtype=np.uint8)
    spans, lines, count, bad_line = _scan(buf)
    if bad_line:
        raise GraphFormatError("malformed line: expected two node names (source and target)", line=int(bad_line))
    if count == 0:
        raise GraphFormatError("empty graph: the edge list has no edges")
    spans, lines = spans[:count], lines[:count]
    starts = np.concatenate([spans[:, 0], spans[:, 2]])
    ends = np.concatenate([spans[:, 1], spans[:, 3]])
    values = np.empty(starts.size, dtype=np.int64)
    first_bad = _integers(buf, starts, ends, values)
    first_row = {int(first_bad) % count} if first_bad >= 0 else set()
    if header is None:
        words = {
            _token(buf, int(starts[0]), int(ends[0])).lower(),
            _token(buf, int(starts[count]), int(ends[count])).lower(),
        }
        header = words <= HEADER_WORDS or (
            count > 1
            and first_row == {0}
            and _integers(
                buf,
                np.delete(starts, [0, count]),
                np.delete(ends, [0, count]),
                np.empty(starts.size - 2, dtype=np.int64),
            )
            < 0
        )
    if header:
        if count == 1:
            raise GraphFormatError("empty graph: the edge list has a header but no edges")
        keep = np.ones(starts.size, dtype=np.bool_)
        keep[[0, count]] = False
        starts, ends, values, lines = starts[keep], ends[keep], values[keep], lines[1:]
        count -= 1
        first_bad = _integers(buf, starts, ends, values)
    if first_bad < 0:
        names, ids = intern_integers(values)
    else:
        # Sources first, then targets: token k is on the line of edge k % count.
        names, ids = intern_strings(
            NameTokens(buf, starts, ends), lines=lambda k: int(lines[k % count]), max_name_bytes=max_name_bytes
        )
    return GraphInput(
        num_nodes=names.size,
        src=ids[:count],
        dst=ids[count:],
        names=names,
        format="edgelist",
    )

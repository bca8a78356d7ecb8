"""The GRAIL ``.gra`` format: a header line, the node count n, then line i = ``i: children... #``.

Lists may be unsorted and repeat a child; line i must describe node i (GRAIL itself reads the
lines by position, so a line out of place would silently build a different graph).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..errors import GraphFormatError
from ..formats import ReadOptions
from ..names import NodeNames
from ._numeric import CARRIAGE_RETURN, MAX_ID, NEWLINE, SPACE, TAB, grow, is_digit
from .graph_input import GraphInput
from .source import InputSource

HEADER = b"graph_for_greach"
COLON = 58
HASH = 35

(OK, BAD_HEADER, BAD_COUNT, BAD_LINE, WRONG_ID, OUT_OF_RANGE, BAD_TOKEN, TOO_FEW, TOO_MANY, EMPTY) = range(10)


@njit(inline="always")
def _skip_blanks(buf, i):
    while i < buf.size and (buf[i] == SPACE or buf[i] == TAB or buf[i] == CARRIAGE_RETURN):
        i += 1
    return i


@njit(nogil=True, cache=True)
def _parse(buf, header):
    """Returns (src, dst, edge count, n, error code, error line, error value)."""
    src = np.empty(max(16, buf.size // 8), dtype=np.int64)
    dst = np.empty(src.size, dtype=np.int64)
    count = 0
    i = 0
    # Line 1: the header.
    while i < buf.size and buf[i] != NEWLINE:
        i += 1
    end = i
    while end > 0 and (buf[end - 1] == CARRIAGE_RETURN or buf[end - 1] == SPACE):
        end -= 1
    if end != header.size:
        return src, dst, 0, 0, BAD_HEADER, 1, 0
    for k in range(header.size):
        if buf[k] != header[k]:
            return src, dst, 0, 0, BAD_HEADER, 1, 0
    i += 1
    # Line 2: the node count.
    i = _skip_blanks(buf, i)
    if i >= buf.size or not is_digit(buf[i]):
        return src, dst, 0, 0, BAD_COUNT, 2, 0
    n = 0
    while i < buf.size and is_digit(buf[i]):
        n = n * 10 + (buf[i] - 48)
        if n > MAX_ID:
            return src, dst, 0, 0, BAD_COUNT, 2, 0
        i += 1
    i = _skip_blanks(buf, i)
    if i < buf.size and buf[i] != NEWLINE:
        return src, dst, 0, 0, BAD_COUNT, 2, 0
    i += 1
    if n == 0:
        return src, dst, 0, 0, EMPTY, 2, 0
    for node in range(n):
        line = node + 3
        if i >= buf.size:
            return src, dst, 0, n, TOO_FEW, line, node
        i = _skip_blanks(buf, i)
        if i >= buf.size or not is_digit(buf[i]):
            return src, dst, 0, n, BAD_LINE, line, 0
        label = 0
        while i < buf.size and is_digit(buf[i]):
            label = label * 10 + (buf[i] - 48)
            if label > MAX_ID:
                break
            i += 1
        i = _skip_blanks(buf, i)
        if i >= buf.size or buf[i] != COLON:
            return src, dst, 0, n, BAD_LINE, line, 0
        if label != node:
            return src, dst, 0, n, WRONG_ID, line, label
        i += 1
        ended = False
        while True:
            i = _skip_blanks(buf, i)
            if i >= buf.size or buf[i] == NEWLINE:
                break
            c = buf[i]
            if c == HASH:
                if ended:
                    return src, dst, 0, n, BAD_LINE, line, 0
                ended = True
                i += 1
                continue
            if ended or not is_digit(c):
                return src, dst, 0, n, BAD_TOKEN, line, 0
            target = 0
            while i < buf.size and is_digit(buf[i]):
                target = target * 10 + (buf[i] - 48)
                if target > MAX_ID:
                    break
                i += 1
            if i < buf.size and not (
                buf[i] == SPACE or buf[i] == TAB or buf[i] == CARRIAGE_RETURN or buf[i] == NEWLINE or buf[i] == HASH
            ):
                return src, dst, 0, n, BAD_TOKEN, line, 0
            if target >= n:
                return src, dst, 0, n, OUT_OF_RANGE, line, target
            if count == src.size:
                src = grow(src, count)
                dst = grow(dst, count)
            src[count] = node
            dst[count] = target
            count += 1
        i += 1
    # Only blank lines may follow the n adjacency lines.
    line = n + 3
    while i < buf.size:
        c = buf[i]
        if c == NEWLINE:
            line += 1
        elif not (c == SPACE or c == TAB or c == CARRIAGE_RETURN):
            return src, dst, 0, n, TOO_MANY, line, 0
        i += 1
    return src, dst, count, n, OK, 0, 0


def _message(code: int, n: int, value: int) -> str:
    return {
        BAD_HEADER: f"expected the header line {HEADER.decode()!r}",
        BAD_COUNT: "expected the number of nodes (a non-negative integer) on line 2",
        BAD_LINE: "malformed adjacency line: expected 'i: child child ... #'",
        WRONG_ID: f"adjacency line describes node {value}, but lines must list nodes in order",
        OUT_OF_RANGE: f"node id {value} out of range: the header declares {n} nodes (ids 0..{n - 1})",
        BAD_TOKEN: "malformed node id: expected a non-negative integer",
        TOO_FEW: f"the header declares {n} nodes but the file has only {value} adjacency lines",
        TOO_MANY: f"the header declares {n} nodes but the file has more adjacency lines",
        EMPTY: "empty graph: the header declares 0 nodes",
    }[code]


def parse_gra(data: bytes | memoryview) -> GraphInput:
    """Parse a whole ``.gra`` file's bytes."""
    buf = np.frombuffer(data, dtype=np.uint8)
    src, dst, count, n, code, line, value = _parse(buf, np.frombuffer(HEADER, dtype=np.uint8))
    if code != OK:
        raise GraphFormatError(_message(code, n, value), line=line)
    return GraphInput(
        num_nodes=n, src=src[:count].copy(), dst=dst[:count].copy(), names=NodeNames.identity(n), format="gra"
    )


def read(source: InputSource, options: ReadOptions, max_name_bytes: int) -> GraphInput:
    """The format table's reader (``grail_core.formats``)."""
    return parse_gra(source.read_all())

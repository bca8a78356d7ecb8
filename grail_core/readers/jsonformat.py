"""JSON graphs: ``{"edges": [[u, v], ...], "nodes": [...]}``; ``nodes`` lists extra (isolated) nodes.

Documents whose names are all integers are scanned straight into arrays (no Python object per edge);
anything else goes through the ``json`` module, which also words the errors.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from numba import njit

from ..errors import GraphFormatError
from ..names import NodeNames, sorted_unique_ids
from ._numeric import CARRIAGE_RETURN, COMMA, NEWLINE, SPACE, TAB, grow, is_digit
from .graph_input import GraphInput

QUOTE, COLON, MINUS = 34, 58, 45
OPEN_ARRAY, CLOSE_ARRAY, OPEN_OBJECT, CLOSE_OBJECT = 91, 93, 123, 125
EDGES_KEY = np.frombuffer(b"edges", dtype=np.uint8)
NODES_KEY = np.frombuffer(b"nodes", dtype=np.uint8)


@njit(inline="always")
def _skip_space(buf, i):
    while i < buf.size and (buf[i] == SPACE or buf[i] == TAB or buf[i] == NEWLINE or buf[i] == CARRIAGE_RETURN):
        i += 1
    return i


@njit(inline="always")
def _integer(buf, i):
    """(value, next position, ok) for an integer token followed by a delimiter."""
    negative = i < buf.size and buf[i] == MINUS
    if negative:
        i += 1
    start = i
    value = 0
    while i < buf.size and is_digit(buf[i]) and i - start < 18:
        value = value * 10 + (buf[i] - 48)
        i += 1
    ok = i > start and i < buf.size and not is_digit(buf[i]) and buf[i] != 46 and buf[i] != 101 and buf[i] != 69
    return (-value if negative else value), i, ok


@njit(inline="always")
def _key_is(buf, start, end, key):
    if end - start != key.size:
        return False
    for k in range(key.size):
        if buf[start + k] != key[k]:
            return False
    return True


@njit(nogil=True, cache=True)
def _scan_integer_document(buf, edges_key, nodes_key):
    """Flat [u0, v0, u1, v1, ...] edge ends and node names, or ok=False when the fast path does not apply."""
    ends = np.empty(max(16, buf.size // 8), dtype=np.int64)
    nodes = np.empty(16, dtype=np.int64)
    count = 0
    node_count = 0
    seen_edges = False
    i = _skip_space(buf, 0)
    if i >= buf.size or buf[i] != OPEN_OBJECT:
        return ends, 0, nodes, 0, False
    i = _skip_space(buf, i + 1)
    if i < buf.size and buf[i] == CLOSE_OBJECT:
        return ends, 0, nodes, 0, False
    while True:
        if i >= buf.size or buf[i] != QUOTE:
            return ends, 0, nodes, 0, False
        start = i + 1
        i = start
        while i < buf.size and buf[i] != QUOTE and buf[i] != 92:
            i += 1
        if i >= buf.size or buf[i] != QUOTE:
            return ends, 0, nodes, 0, False
        is_edges = _key_is(buf, start, i, edges_key)
        if not is_edges and not _key_is(buf, start, i, nodes_key):
            return ends, 0, nodes, 0, False
        i = _skip_space(buf, i + 1)
        if i >= buf.size or buf[i] != COLON:
            return ends, 0, nodes, 0, False
        i = _skip_space(buf, i + 1)
        if i >= buf.size or buf[i] != OPEN_ARRAY:
            return ends, 0, nodes, 0, False
        i = _skip_space(buf, i + 1)
        seen_edges |= is_edges
        if i < buf.size and buf[i] == CLOSE_ARRAY:
            i += 1
        else:
            while True:
                if is_edges:
                    if i >= buf.size or buf[i] != OPEN_ARRAY:
                        return ends, 0, nodes, 0, False
                    for position in range(2):
                        i = _skip_space(buf, i + 1)
                        value, i, ok = _integer(buf, i)
                        if not ok:
                            return ends, 0, nodes, 0, False
                        if count == ends.size:
                            ends = grow(ends, count)
                        ends[count] = value
                        count += 1
                        i = _skip_space(buf, i)
                        if i >= buf.size or buf[i] != (COMMA if position == 0 else CLOSE_ARRAY):
                            return ends, 0, nodes, 0, False
                    i += 1
                else:
                    value, i, ok = _integer(buf, i)
                    if not ok:
                        return ends, 0, nodes, 0, False
                    if node_count == nodes.size:
                        nodes = grow(nodes, node_count)
                    nodes[node_count] = value
                    node_count += 1
                i = _skip_space(buf, i)
                if i < buf.size and buf[i] == COMMA:
                    i = _skip_space(buf, i + 1)
                    continue
                if i < buf.size and buf[i] == CLOSE_ARRAY:
                    i += 1
                    break
                return ends, 0, nodes, 0, False
        i = _skip_space(buf, i)
        if i < buf.size and buf[i] == COMMA:
            i = _skip_space(buf, i + 1)
            continue
        if i < buf.size and buf[i] == CLOSE_OBJECT:
            i = _skip_space(buf, i + 1)
            return ends, count, nodes, node_count, seen_edges and i == buf.size and count + node_count > 0
        return ends, 0, nodes, 0, False


def _name_kind(value: Any) -> str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return "int"
    if isinstance(value, str):
        return "str"
    return None


def _graph(values: np.ndarray, num_edges: int) -> GraphInput:
    names, ids = sorted_unique_ids(values)
    return GraphInput(
        num_nodes=int(names.size),
        src=ids[0 : 2 * num_edges : 2],
        dst=ids[1 : 2 * num_edges : 2],
        names=NodeNames.from_sorted(names),
        format="json",
    )


def parse_json(data: bytes | memoryview) -> GraphInput:
    """Parse a JSON graph document; names must be all integers or all strings."""
    ends, count, nodes, node_count, ok = _scan_integer_document(
        np.frombuffer(data, dtype=np.uint8), EDGES_KEY, NODES_KEY
    )
    if ok:
        return _graph(np.concatenate([ends[:count], nodes[:node_count]]), count // 2)
    try:
        document = json.loads(bytes(data))
    except json.JSONDecodeError as error:
        raise GraphFormatError(f"invalid JSON: {error.msg}", line=error.lineno) from None
    except UnicodeDecodeError as error:
        raise GraphFormatError(f"invalid JSON: not UTF-8 ({error})") from None
    if not isinstance(document, dict) or "edges" not in document:
        raise GraphFormatError('JSON graph must be an object with an "edges" list')
    edges = document["edges"]
    nodes = document.get("nodes", [])
    if not isinstance(edges, list) or not isinstance(nodes, list):
        raise GraphFormatError('"edges" and "nodes" must be lists')
    kinds: set[str] = set()
    flat: list[Any] = []
    for position, edge in enumerate(edges):
        if not (isinstance(edge, list) and len(edge) == 2):
            raise GraphFormatError(f"edge {position} must be a pair [source, target], got {edge!r}")
        flat.extend(edge)
    flat.extend(nodes)
    for value in flat:
        kind = _name_kind(value)
        if kind is None:
            raise GraphFormatError(f"node names must be integers or strings, got {value!r}")
        kinds.add(kind)
    if len(kinds) > 1:
        raise GraphFormatError("node names must be all integers or all strings, not a mix")
    if not flat:
        raise GraphFormatError("empty graph: no edges and no nodes")
    return _graph(np.array(flat, dtype=np.int64 if kinds == {"int"} else str), len(edges))

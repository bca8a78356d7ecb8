"""JSON graphs: ``{"edges": [[u, v], ...], "nodes": [...]}``, ``nodes`` listing extra (isolated) nodes; and
networkx's node-link documents (``node_link_data``): ``{"nodes": [{"id": ..}, ...], "links"`` (or ``"edges"``)
``: [{"source": .., "target": ..}, ...], "directed": ..}``, whose edges run both ways where ``directed`` is false.

Documents whose names are all integers are scanned straight into arrays (no Python object per edge);
anything else goes through the ``json`` module, which also words the errors.
"""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np
from numba import njit

from ..errors import GraphFormatError
from ..formats import ReadOptions
from ..names import MAX_NAME_BYTES, NameTokens, NodeNames, intern_integers, intern_strings
from ._numeric import CARRIAGE_RETURN, COMMA, NEWLINE, SPACE, TAB, grow, is_digit
from .graph_input import GraphInput
from .source import InputSource

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


def _graph(names: NodeNames, ids: np.ndarray, num_edges: int) -> GraphInput:
    return GraphInput(
        num_nodes=names.size, src=ids[0 : 2 * num_edges : 2], dst=ids[1 : 2 * num_edges : 2], names=names, format="json"
    )


# A JSON string token as written: quotes around anything but quotes and backslashes, or escapes.
_STRING_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)


def _line_of_name(data: bytes | memoryview, name: str) -> int | None:
    """The line of the first string token that decodes to ``name`` (for messages; the error path only). A
    token is never shorter than its UTF-8, so only tokens that long are decoded."""
    raw = bytes(data)
    size = len(name.encode("utf-8", "surrogatepass"))
    for match in _STRING_TOKEN.finditer(raw):
        if match.end() - match.start() - 2 >= size and json.loads(match.group()) == name:
            return raw.count(b"\n", 0, match.start()) + 1
    return None


def _where(position: int, num_edges: int) -> str:
    if position < 2 * num_edges:
        return f"edge {position // 2} ({'source' if position % 2 == 0 else 'target'})"
    return f"nodes[{position - 2 * num_edges}]"


def _check_names(data: bytes | memoryview, flat: list[str], num_edges: int, max_name_bytes: int) -> None:
    """What the interner would refuse, worded with the edge and the line: empty, too long, not Unicode."""
    for position, name in enumerate(flat):
        if name.isascii() and 0 < len(name) <= max_name_bytes:
            continue
        try:
            size = len(name.encode("utf-8"))
        except UnicodeEncodeError:
            problem = f"{name[:40]!r} is not valid Unicode (it holds a lone surrogate)"
        else:
            if size and size <= max_name_bytes:
                continue
            problem = "is empty" if not size else f"{name[:40]!r}... is longer than the limit of {max_name_bytes} bytes"
        raise GraphFormatError(f"the name of {_where(position, num_edges)} {problem}", line=_line_of_name(data, name))


def parse_json(data: bytes | memoryview, max_name_bytes: int = MAX_NAME_BYTES) -> GraphInput:
    """Parse a JSON graph document; names must be all integers or all strings."""
    ends, count, nodes, node_count, ok = _scan_integer_document(
        np.frombuffer(data, dtype=np.uint8), EDGES_KEY, NODES_KEY
    )
    if ok:
        return _graph(*intern_integers(np.concatenate([ends[:count], nodes[:node_count]])), count // 2)
    try:
        document = json.loads(bytes(data))
    except json.JSONDecodeError as error:
        raise GraphFormatError(f"invalid JSON: {error.msg}", line=error.lineno) from None
    except UnicodeDecodeError as error:
        raise GraphFormatError(f"invalid JSON: not UTF-8 ({error})") from None
    flat, num_edges, both_ways = _ends_and_nodes(document)
    kinds: set[str] = set()
    for value in flat:
        kind = _name_kind(value)
        if kind is None:
            raise GraphFormatError(f"node names must be integers or strings, got {value!r}")
        kinds.add(kind)
    if len(kinds) > 1:
        raise GraphFormatError("node names must be all integers or all strings, not a mix")
    if not flat:
        raise GraphFormatError("empty graph: no edges and no nodes")
    if kinds == {"str"}:
        _check_names(data, flat, num_edges, max_name_bytes)
        names, ids = intern_strings(NameTokens.from_strings(flat), max_name_bytes=max_name_bytes)
    else:
        outside = next((value for value in flat if not -(2**63) <= value < 2**63), None)
        if outside is not None:
            raise GraphFormatError(f"node name {outside} is outside the range of 64-bit integers")
        names, ids = intern_integers(np.array(flat, dtype=np.int64))
    graph = _graph(names, ids, num_edges)
    if both_ways:
        src, dst = np.concatenate([graph.src, graph.dst]), np.concatenate([graph.dst, graph.src])
        graph = GraphInput(num_nodes=graph.num_nodes, src=src, dst=dst, names=graph.names, format="json")
    return graph


def _ends_and_nodes(document: Any) -> tuple[list[Any], int, bool]:
    """[source 0, target 0, source 1, ...] + the nodes' names, the number of edges, and whether they run both
    ways: from ``{"edges": [[u, v], ...], "nodes": [...]}``, or from networkx's node-link documents
    (``{"nodes": [{"id": ..}], "links" or "edges": [{"source": .., "target": ..}], "directed": ..}``)."""
    if not isinstance(document, dict) or not ({"edges", "links"} & document.keys()):
        raise GraphFormatError('JSON graph must be an object with an "edges" list (or node-link "links")')
    if "edges" in document and "links" in document:
        raise GraphFormatError('a JSON graph has "edges" or "links", not both')
    edges = document.get("links", document.get("edges"))
    nodes = document.get("nodes", [])
    if not isinstance(edges, list) or not isinstance(nodes, list):
        raise GraphFormatError('"edges" ("links") and "nodes" must be lists')
    node_link = "links" in document or any(isinstance(item, dict) for item in (edges[:1] + nodes[:1]))
    flat: list[Any] = []
    if not node_link:
        for position, edge in enumerate(edges):
            if not (isinstance(edge, list) and len(edge) == 2):
                raise GraphFormatError(f"edge {position} must be a pair [source, target], got {edge!r}")
            flat.extend(edge)
        return flat + nodes, len(edges), False
    for position, edge in enumerate(edges):
        if not (isinstance(edge, dict) and "source" in edge and "target" in edge):
            raise GraphFormatError(f'edge {position} must be an object with "source" and "target", got {edge!r}')
        flat.append(edge["source"])
        flat.append(edge["target"])
    for position, node in enumerate(nodes):
        if not (isinstance(node, dict) and "id" in node):
            raise GraphFormatError(f'nodes[{position}] must be an object with an "id", got {node!r}')
        flat.append(node["id"])
    directed = document.get("directed", True)
    if not isinstance(directed, bool):
        raise GraphFormatError(f'"directed" must be true or false, got {directed!r}')
    return flat, len(edges), not directed


def read(source: InputSource, options: ReadOptions, max_name_bytes: int) -> GraphInput:
    """The format table's reader (``grail_core.formats``)."""
    return parse_json(source.read_all(), max_name_bytes)

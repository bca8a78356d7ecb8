"""JSON graphs: ``{"edges": [[u, v], ...], "nodes": [...]}``; ``nodes`` lists extra (isolated) nodes."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from ..errors import GraphFormatError
from ..names import NodeNames, sorted_unique_ids
from .graph_input import GraphInput


def _name_kind(value: Any) -> str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return "int"
    if isinstance(value, str):
        return "str"
    return None


def parse_json(data: bytes | memoryview) -> GraphInput:
    """Parse a JSON graph document; names must be all integers or all strings."""
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
    values = np.array(flat, dtype=np.int64 if kinds == {"int"} else str)
    names, ids = sorted_unique_ids(values)
    m = len(edges)
    return GraphInput(
        num_nodes=int(names.size), src=ids[0:2 * m:2], dst=ids[1:2 * m:2], names=NodeNames.from_sorted(names), format="json"
    )

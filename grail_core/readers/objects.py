"""Graphs that are already Python objects: networkx graphs, scipy sparse matrices, pandas data frames.

None of those libraries is needed by grail_core: each function takes the object it is given and uses only
its methods (networkx, scipy and pandas are optional extras: ``pip install grail-reachability[inputs]``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import GraphFormatError, InvalidParameterError
from ..names import MAX_NAME_BYTES, NodeNames
from .columns import ColumnSpec, choose_columns
from .graph_input import GraphInput
from .sink import EdgeSink
from .tables import read_arrow_columns

__all__ = ["graph_from_networkx", "graph_from_scipy", "graph_from_pandas"]


def _python_name(node: Any) -> Any:
    """A node as a name: Python and numpy integers and strings; anything else is no name."""
    if isinstance(node, (bool, np.bool_)):
        raise GraphFormatError(f"node names must be integers or strings, got {node!r}")
    if isinstance(node, np.integer):
        return int(node)
    if isinstance(node, (int, str)):
        return node
    raise GraphFormatError(f"node names must be integers or strings, got {node!r} ({type(node).__name__})")


def graph_from_networkx(graph: Any, max_name_bytes: int = MAX_NAME_BYTES) -> GraphInput:
    """Every node of a networkx graph (isolated ones too) and its edges; an undirected graph's edges run both
    ways. Names are the nodes themselves: all integers or all strings."""
    if not hasattr(graph, "is_directed") or not hasattr(graph, "nodes"):
        raise InvalidParameterError(f"expected a networkx graph, got {type(graph).__name__}")
    nodes = [_python_name(node) for node in graph.nodes]
    if not nodes:
        raise GraphFormatError("empty graph: no nodes")
    sink = EdgeSink(max_name_bytes)
    ids = sink.add_nodes(nodes)
    index = dict(zip(graph.nodes, ids.tolist(), strict=True))
    count = graph.number_of_edges()
    edges = np.fromiter((index[end] for edge in graph.edges() for end in edge), dtype=np.int64, count=2 * count)
    src, dst = edges[0::2], edges[1::2]
    sink.add_id_edges(src, dst)
    if not graph.is_directed():
        sink.add_id_edges(dst, src)
    return sink.finish("networkx")


def graph_from_scipy(matrix: Any) -> GraphInput:
    """The graph of a square adjacency matrix: nodes 0..n-1, an edge i -> j for every stored entry (i, j) of a
    scipy sparse matrix or array (explicit zeros too, as scipy.sparse.csgraph reads them), or for every
    nonzero entry of a dense numpy array."""
    shape = getattr(matrix, "shape", None)
    if shape is None or len(shape) != 2:
        raise InvalidParameterError(f"expected a 2-D matrix, got {type(matrix).__name__}")
    if shape[0] != shape[1]:
        raise InvalidParameterError(f"an adjacency matrix is square; this one is {shape[0]} x {shape[1]}")
    if shape[0] == 0:
        raise InvalidParameterError("empty graph: a 0 x 0 matrix")
    if hasattr(matrix, "tocoo"):
        coordinates = matrix.tocoo()
        src, dst = coordinates.row, coordinates.col
    else:
        src, dst = np.nonzero(np.asarray(matrix))
    n = int(shape[0])
    return GraphInput(n, src.astype(np.int64), dst.astype(np.int64), NodeNames.identity(n), "scipy")


def graph_from_pandas(
    frame: Any, source: ColumnSpec = None, target: ColumnSpec = None, max_name_bytes: int = MAX_NAME_BYTES
) -> GraphInput:
    """The edges of a data frame's two columns, chosen as in an edge list's header (``source=``/``target=``:
    a column label or a 0-based position; else recognised by their names). Integer columns give integer
    names, string columns (and categorical ones of strings) string names; a missing value is an error."""
    import pyarrow as pa

    columns = getattr(frame, "columns", None)
    if columns is None:
        raise InvalidParameterError(f"expected a pandas DataFrame, got {type(frame).__name__}")
    labels = list(columns)
    names = [str(label) for label in labels]

    def spec(value: ColumnSpec) -> ColumnSpec:
        # A label first (labels may be integers), then a position.
        matches = [i for i, label in enumerate(labels) if label == value and type(label) is type(value)]
        return matches[0] if len(matches) == 1 else value

    chosen = choose_columns(names, len(names), spec(source), spec(target), parameters=("source", "target"))

    def batches(_: list[str]) -> Any:
        table = pa.Table.from_pandas(frame.iloc[:, list(chosen)], preserve_index=False)
        return table.to_batches(1 << 20)

    try:
        return read_arrow_columns(names, batches, chosen[0], chosen[1], max_name_bytes, "pandas")
    except (pa.ArrowInvalid, pa.ArrowTypeError) as error:
        raise GraphFormatError(f"the columns hold values that are no node names: {error}") from None

"""Adjacency lists as networkx writes them (``write_adjlist``): each line a node, then all its successors.

Names are separated by spaces or tabs; lines starting with ``#`` are comments (networkx's header among them). A
node alone on its line has no successors but is a node. A file holds no word on direction: it is read as
directed (networkx writes each edge of an undirected graph once; write such a graph as an edge list of both
directions, or read it with networkx and use ``ReachabilityIndex.from_networkx``).

The lines stream through pyarrow's CSV reader whole, after the same pass that readies edge lists (comments
blanked, blanks between names made one tab), and pyarrow's ``split_pattern`` cuts them into names.
"""

from __future__ import annotations

import numpy as np

from ..formats import ReadOptions
from ..names import MAX_NAME_BYTES
from .edgelist import BOM, SNIFF_BYTES, Dialect, iter_batches, rows_to_lines, with_restarts
from .graph_input import GraphInput
from .sink import EdgeSink, LineOf
from .source import InputSource

__all__ = ["read_adjlist", "read"]


def _token_lines(line_of: LineOf, offsets: np.ndarray) -> LineOf:
    """The line of name k of a batch whose line i holds names ``offsets[i]:offsets[i + 1]``."""
    return lambda k: line_of(int(np.searchsorted(offsets, k, "right")) - 1)


def read_adjlist(source: InputSource, max_name_bytes: int = MAX_NAME_BYTES) -> GraphInput:
    import pyarrow.compute as pc

    head, _ = source.head(SNIFF_BYTES)
    dialect = Dialect(
        delimiter=None,
        quoted=False,
        columns=1,
        header=None,
        source=0,
        target=0,
        comments=True,
        data_offset=len(BOM) if head.startswith(BOM) else 0,
        data_line=1,
        edge_data=False,
        lines=True,
        what="adjacency list",
    )

    def read(block_bytes: int, strings: bool) -> GraphInput:
        sink = EdgeSink(max_name_bytes, strings=strings)
        for first_row, batch in iter_batches(source, dialect, block_bytes):
            lists = pc.split_pattern(batch.column(0), pattern="\t")
            offsets = np.asarray(lists.offsets, dtype=np.int64)
            offsets -= offsets[0]
            ids = sink.add_nodes(lists.flatten(), _token_lines(rows_to_lines(source, dialect, first_row), offsets))
            counts = np.diff(offsets)
            successor = np.ones(ids.size, dtype=np.bool_)
            successor[offsets[:-1]] = False
            sink.add_id_edges(np.repeat(ids[offsets[:-1]], counts - 1), ids[successor])
        return sink.finish("adjlist")

    return with_restarts(read)


def read(source: InputSource, options: ReadOptions, max_name_bytes: int) -> GraphInput:
    """The format table's reader (``grail_core.formats``)."""
    return read_adjlist(source, max_name_bytes)

"""Matrix Market coordinate files (``scipy.io.mmwrite``, the SuiteSparse collection) as adjacency matrices.

The size line ``n n entries`` declares the nodes 1..n, named by those integers as in the file (scipy's row i
is node i + 1); every entry ``i j`` is an edge i -> j, explicit zeros included (as scipy.sparse.csgraph reads
stored entries). ``symmetric``, ``skew-symmetric`` and ``hermitian`` matrices store one triangle: each entry
is an edge both ways. Fields ``pattern``, ``integer``, ``real`` and ``complex`` are read; the values are not
used. The entries stream through pyarrow's CSV reader like an edge list's.
"""

from __future__ import annotations

import numpy as np

from ..errors import GraphFormatError
from ..formats import ReadOptions
from .edgelist import SNIFF_BYTES, Dialect, iter_batches, rows_to_lines, with_restarts
from .graph_input import GraphInput
from .sink import EdgeSink, parse_integers
from .source import InputSource

__all__ = ["read_mtx", "read"]

_FIELDS = {"pattern": 2, "integer": 3, "real": 3, "double": 3, "complex": 4}
_SYMMETRIES = {"general": False, "symmetric": True, "skew-symmetric": True, "hermitian": True}
# Ids are int64; more declared nodes than this is a size line gone wrong, not a graph.
MAX_NODES = 2**31 - 1


def _header(head: bytes, complete: bool) -> tuple[int, int, bool, int, int, int]:
    """(nodes, entries, both ways, fields per entry, where the entries start, their first line)."""
    lines = head.split(b"\n")
    if not complete:
        lines.pop()
    banner = lines[0].decode("ascii", "replace").split()
    if len(banner) != 5 or banner[0].lower() != "%%matrixmarket":
        raise GraphFormatError("expected the banner '%%MatrixMarket matrix coordinate <field> <symmetry>'", line=1)
    kind, layout, field, symmetry = (word.lower() for word in banner[1:])
    if kind != "matrix":
        raise GraphFormatError(f"a Matrix Market {kind!r} is not a graph: expected a matrix", line=1)
    if layout != "coordinate":
        raise GraphFormatError(
            "dense ('array') Matrix Market files are not read: write the matrix sparse, e.g. "
            "scipy.io.mmwrite(path, scipy.sparse.coo_array(matrix))",
            line=1,
        )
    if field not in _FIELDS or symmetry not in _SYMMETRIES:
        raise GraphFormatError(f"unknown Matrix Market field or symmetry: {field!r} {symmetry!r}", line=1)
    offset = len(lines[0]) + 1
    for number, line in enumerate(lines[1:], start=2):
        offset += len(line) + 1
        text = line.strip()
        if not text or text.startswith(b"%"):
            continue
        size = text.split()
        if len(size) != 3 or not all(word.isdigit() for word in size):
            raise GraphFormatError("expected the size line 'rows columns entries'", line=number)
        rows, columns, entries = map(int, size)
        if rows != columns:
            raise GraphFormatError(f"a graph's adjacency matrix is square; this one is {rows} x {columns}", line=number)
        if rows > MAX_NODES:
            raise GraphFormatError(f"the size line declares {rows} nodes, more than {MAX_NODES}", line=number)
        if rows == 0:
            raise GraphFormatError("empty graph: the size line declares 0 nodes", line=number)
        return rows, entries, _SYMMETRIES[symmetry], _FIELDS[field], offset, number + 1
    raise GraphFormatError("no size line after the banner and comments")


def read_mtx(source: InputSource) -> GraphInput:
    head, complete = source.head(SNIFF_BYTES)
    nodes, entries, both_ways, fields, offset, first_line = _header(head, complete)
    dialect = Dialect(
        delimiter=None,
        quoted=False,
        columns=fields,
        header=None,
        source=0,
        target=1,
        comments=True,
        data_offset=offset,
        data_line=first_line,
        edge_data=False,
        what="Matrix Market file",
    )

    def read(block_bytes: int, strings: bool) -> GraphInput:
        sink = EdgeSink()
        sink.add_nodes(np.arange(1, nodes + 1, dtype=np.int64))  # node k is id k - 1
        seen = 0
        for first_row, batch in iter_batches(source, dialect, block_bytes):
            line_of = rows_to_lines(source, dialect, first_row)
            ends = []
            for column in batch.columns:
                values, bad = parse_integers(column)
                if bad is None and values.size and (values.min() < 1 or values.max() > nodes):
                    bad = int(np.flatnonzero((values < 1) | (values > nodes))[0])
                if bad is not None:
                    raise GraphFormatError(f"expected row and column indices from 1 to {nodes}", line=line_of(bad))
                ends.append(values - 1)
            seen += batch.num_rows
            if seen > entries:
                raise GraphFormatError(
                    f"the size line declares {entries} entries, but there are more", line=line_of(entries - first_row)
                )
            sink.add_id_edges(ends[0], ends[1])
            if both_ways:
                sink.add_id_edges(ends[1], ends[0])
        if seen < entries:
            raise GraphFormatError(f"the size line declares {entries} entries, but there are only {seen}")
        return sink.finish("mtx")

    return with_restarts(read)


def read(source: InputSource, options: ReadOptions, max_name_bytes: int) -> GraphInput:
    """The format table's reader (``grail_core.formats``)."""
    return read_mtx(source)

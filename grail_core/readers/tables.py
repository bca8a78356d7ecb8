"""Parquet files and Arrow IPC files and streams (Feather): tables with a column of sources and one of targets.

The columns are chosen by name like an edge list's header (``columns.choose_columns``; pandas' index column,
``__index_level_0__``, is never an end), and read a record batch (Parquet: a row group) at a time, only those
two columns: integer columns give integer names, string and binary ones (dictionary-encoded too) string names.
A null is an error naming its row.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from ..errors import GraphFormatError
from ..formats import ReadOptions
from ..names import MAX_NAME_BYTES
from .columns import ColumnSpec, choose_columns, is_index_name
from .graph_input import GraphInput
from .sink import EdgeSink
from .source import InputSource

__all__ = ["read_table", "read_arrow_columns", "read"]

# Rows handed to the sink at a time.
BATCH_ROWS = 1 << 20


def _parquet(source: InputSource) -> tuple[Any, Any]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        file = pq.ParquetFile(source.arrow_input())
    except (pa.ArrowException, OSError) as error:
        raise GraphFormatError(f"not a readable Parquet file: {error}") from None
    return file.schema_arrow, lambda columns: file.iter_batches(batch_size=BATCH_ROWS, columns=columns)


def _arrow(source: InputSource) -> tuple[Any, Any]:
    import pyarrow as pa
    import pyarrow.feather as feather
    import pyarrow.ipc as ipc

    data = source.arrow_input()
    # pyarrow reports malformed IPC bytes as OSError as well as ArrowException.
    try:
        reader = ipc.open_file(data)
    except (pa.ArrowException, OSError):
        pass
    else:

        def file_batches(columns: list[str]) -> Iterator[Any]:
            for i in range(reader.num_record_batches):
                yield reader.get_batch(i).select(columns)

        return reader.schema, file_batches
    try:
        data.seek(0)
        stream = ipc.open_stream(data)
    except (pa.ArrowException, OSError):
        pass
    else:

        def stream_batches(columns: list[str]) -> Iterator[Any]:
            for batch in stream:
                yield batch.select(columns)

        return stream.schema, stream_batches
    try:
        data.seek(0)
        table = feather.read_table(data)  # Feather version 1
    except (pa.ArrowException, OSError) as error:
        raise GraphFormatError(f"not a readable Arrow IPC file or stream, nor Feather: {error}") from None
    return table.schema, lambda columns: table.select(columns).to_batches(BATCH_ROWS)


def read_arrow_columns(
    names: list[str],
    batches: Any,
    source_column: ColumnSpec,
    target_column: ColumnSpec,
    max_name_bytes: int,
    format: str,
) -> GraphInput:
    """The graph of a table with columns ``names``; ``batches(columns)`` yields record batches of those."""
    skip_first = len(names) >= 3 and is_index_name(names[0]) and source_column is None and target_column is None
    source, target = choose_columns(names, len(names), source_column, target_column, skip_first=skip_first)
    if len(set(names)) != len(names):
        duplicated = {names[source], names[target]} & {name for name in names if names.count(name) > 1}
        if duplicated:
            raise GraphFormatError(f"the table has several columns named {duplicated.pop()!r}")
    sink = EdgeSink(max_name_bytes)
    row = 0
    for batch in _checked(batches([names[source], names[target]]), format):
        for role, column in zip(("source", "target"), batch.columns, strict=True):
            if column.null_count:
                first = row + int(np.flatnonzero(np.asarray(column.is_null()))[0])
                name = names[source if role == "source" else target]
                raise GraphFormatError(f"row {first}: the {role} ({name!r}) is null")
        sink.add_edges(batch.column(0), batch.column(1))
        row += batch.num_rows
    if row == 0:
        raise GraphFormatError("empty graph: the table has no rows")
    return sink.finish(format)


def _checked(batches: Iterator[Any], format: str) -> Iterator[Any]:
    """The batches, a corrupt one reported as the upload's fault (pyarrow raises OSError for bad bytes)."""
    import pyarrow as pa

    iterator = iter(batches)
    while True:
        try:
            batch = next(iterator)
        except StopIteration:
            return
        except (pa.ArrowException, OSError) as error:
            raise GraphFormatError(f"the {format} data is corrupt: {error}") from None
        yield batch


def read_table(
    source: InputSource,
    format: str,
    source_column: ColumnSpec = None,
    target_column: ColumnSpec = None,
    max_name_bytes: int = MAX_NAME_BYTES,
) -> GraphInput:
    schema, batches = _parquet(source) if format == "parquet" else _arrow(source)
    return read_arrow_columns(list(schema.names), batches, source_column, target_column, max_name_bytes, format)


def read(source: InputSource, options: ReadOptions, max_name_bytes: int) -> GraphInput:
    """The format table's reader of Parquet and Arrow (``grail_core.formats``)."""
    assert options.format is not None
    return read_table(source, options.format, options.source_column, options.target_column, max_name_bytes)

"""Graph readers: every format users export graphs in, plain or gzip-compressed, into ``GraphInput``.

The formats, and how each is known and read, are one table: ``grail_core.formats.FORMAT_TABLE`` (each row
names its reader here: a module's ``read(source, options, max_name_bytes)``). GEXF and DOT are recognised
and refused with a message that names these.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from ..errors import GraphFormatError, InvalidParameterError
from ..formats import FORMAT_TABLE, FORMATS, REFUSED, ReadOptions, detect_format, format_of_name, refusal
from ..names import MAX_NAME_BYTES
from . import adjlist, edgelist, gra, graphml, jsonformat, mtx, tables  # noqa: F401  (the table's readers)
from .columns import ColumnSpec
from .edgelist import SNIFF_BYTES
from .graph_input import GraphInput
from .source import GraphSource, InputSource, ReadProgress

__all__ = [
    "FORMATS",
    "REFUSED",
    "GraphInput",
    "GraphSource",
    "ReadOptions",
    "read_graph",
    "read_with",
    "guess_format",
    "format_of_name",
    "detect_format",
]


def guess_format(data: bytes, filename: str | None = None) -> str:
    """The format of a text that begins with ``data``: what its content says where it has a signature, else
    the file name's suffix (``.gz`` aside), else an edge list."""
    detected = detect_format(data[:SNIFF_BYTES])
    if detected is not None:
        return detected
    return (format_of_name(filename) if filename else None) or "edgelist"


def read_graph(
    source: GraphSource,
    format: str | None = None,
    *,
    header: bool | None = None,
    source_column: ColumnSpec = None,
    target_column: ColumnSpec = None,
    max_bytes: int | None = None,
    max_name_bytes: int = MAX_NAME_BYTES,
) -> GraphInput:
    """Read a graph from a path, bytes or a binary file object; gzip input is recognised by its magic bytes.

    ``format`` is one of ``FORMATS`` or None to tell from the content and the file name. For edge lists,
    Parquet and Arrow: ``source_column`` and ``target_column`` choose the columns (a name or a 0-based
    position; default: recognised by their names), and for edge lists ``header`` says whether the first row
    names the columns (None: recognised). ``max_bytes`` caps the size of the (decompressed) input, raising
    InputTooLargeError beyond it; a node name longer than ``max_name_bytes`` (UTF-8) is a GraphFormatError
    naming its line.
    """
    options = ReadOptions(format, header, source_column, target_column)
    return read_with(source, options, max_bytes=max_bytes, max_name_bytes=max_name_bytes)


def read_with(
    source: GraphSource,
    options: ReadOptions,
    *,
    max_bytes: int | None = None,
    max_name_bytes: int = MAX_NAME_BYTES,
    progress: ReadProgress | None = None,
) -> GraphInput:
    """``read_graph`` with its reading options as one object; ``progress(fraction)`` is told how much of a file
    (a path) has been read, as it goes."""
    options.check()  # an unknown or refused format, or options it does not take
    if isinstance(max_name_bytes, bool) or not isinstance(max_name_bytes, int) or max_name_bytes < 1:
        raise InvalidParameterError(f"max_name_bytes must be a positive integer, got {max_name_bytes!r}")
    if options.header is not None and not isinstance(options.header, bool):
        raise InvalidParameterError(f"header must be True, False or None, got {options.header!r}")
    input_source = InputSource(source, max_bytes, progress)
    head, complete = input_source.head(SNIFF_BYTES)
    if complete and not head.strip():
        raise GraphFormatError("empty graph: the input is empty")
    detected = detect_format(head)
    format = options.format
    if format is None:
        format = guess_format(head, input_source.name)
    elif format in ("edgelist", "adjlist") and detected is not None:
        # A signature of another format: reading it as lines of names would build a different graph.
        if detected in REFUSED:
            raise GraphFormatError(refusal(detected))
        raise GraphFormatError(f"this looks like a {detected} file, not an {format}: read it as format={detected}")
    if format in REFUSED:
        raise GraphFormatError(refusal(format))
    options = options.as_format(format)
    return _reader(format)(input_source, options, max_name_bytes)


def _reader(format: str) -> Any:
    module, function = FORMAT_TABLE[format].reader.split(":")
    return getattr(import_module(f".{module}", __name__), function)

"""Graph readers: ``.gra``, edge lists and JSON, plain or gzip-compressed, into ``GraphInput``."""

from __future__ import annotations

import gzip
import io
import os
import zlib
from typing import BinaryIO

from ..errors import GraphFormatError, InputTooLargeError, InvalidParameterError
from ..names import MAX_NAME_BYTES
from .edgelist import parse_edgelist
from .gra import parse_gra
from .graph_input import GraphInput
from .jsonformat import parse_json

__all__ = ["FORMATS", "GraphInput", "read_graph", "guess_format"]

FORMATS = ("gra", "edgelist", "json")
_SUFFIXES = {
    ".gra": "gra",
    ".json": "json",
    ".csv": "edgelist",
    ".tsv": "edgelist",
    ".txt": "edgelist",
    ".edges": "edgelist",
    ".el": "edgelist",
    ".edgelist": "edgelist",
}

GraphSource = str | os.PathLike[str] | bytes | bytearray | memoryview | BinaryIO


def _load(source: GraphSource) -> tuple[bytes, str | None]:
    if isinstance(source, (bytes, bytearray, memoryview)):
        return bytes(source), None
    if isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as handle:
            return handle.read(), os.fspath(source)
    return source.read(), getattr(source, "name", None)


def _decompress(data: bytes, max_bytes: int | None) -> bytes:
    if data[:2] != b"\x1f\x8b":
        return data
    limit = -1 if max_bytes is None else max_bytes + 1
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as stream:
            # Read one byte past the limit: a small gzip body must not expand into unbounded memory.
            data = stream.read(limit)
    except (OSError, EOFError, zlib.error) as error:
        raise GraphFormatError(f"corrupt gzip data: {error}") from None
    if max_bytes is not None and len(data) > max_bytes:
        raise InputTooLargeError(f"the graph decompresses to more than {max_bytes} bytes")
    return data


def guess_format(data: bytes, filename: str | None = None) -> str:
    """The format named by the file suffix (``.gz`` aside), else recognised from the content."""
    if filename:
        name = filename.lower().removesuffix(".gz")
        for suffix, format_name in _SUFFIXES.items():
            if name.endswith(suffix):
                return format_name
    head = data[:4096].lstrip()
    if head.startswith(b"graph_for_greach"):
        return "gra"
    if head.startswith(b"{"):
        return "json"
    return "edgelist"


def read_graph(
    source: GraphSource,
    format: str | None = None,
    *,
    header: bool | None = None,
    max_bytes: int | None = None,
    max_name_bytes: int = MAX_NAME_BYTES,
) -> GraphInput:
    """Read a graph from a path, bytes or a binary file object; gzip input is recognised by its magic bytes.

    ``format`` is one of ``FORMATS`` or None to guess; ``header`` applies to edge lists (None: detect);
    ``max_bytes`` caps the size of the (decompressed) text, raising InputTooLargeError beyond it;
    a node name longer than ``max_name_bytes`` (UTF-8) is a GraphFormatError naming its line.
    """
    if format is not None and format not in FORMATS:
        raise InvalidParameterError(f"unknown graph format {format!r}; choose one of {', '.join(FORMATS)}")
    if isinstance(max_name_bytes, bool) or not isinstance(max_name_bytes, int) or max_name_bytes < 1:
        raise InvalidParameterError(f"max_name_bytes must be a positive integer, got {max_name_bytes!r}")
    raw, filename = _load(source)
    data = _decompress(raw, max_bytes)
    if max_bytes is not None and len(data) > max_bytes:
        raise InputTooLargeError(f"the graph is larger than {max_bytes} bytes")
    if not data.strip():
        raise GraphFormatError("empty graph: the input is empty")
    chosen = format or guess_format(data, filename)
    if chosen == "gra":
        return parse_gra(data)
    if chosen == "json":
        return parse_json(data, max_name_bytes)
    return parse_edgelist(data, header=header, max_name_bytes=max_name_bytes)

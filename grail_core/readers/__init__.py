"""Graph readers: every format users export graphs in, plain or gzip-compressed, into ``GraphInput``.

========  ==========================================================================================
format    what it reads
========  ==========================================================================================
gra       GRAIL's ``graph_for_greach`` files
edgelist  CSV, TSV and other delimited text, or names separated by spaces (``edgelist.py``)
json      ``{"edges": [[u, v], ...], "nodes": [...]}`` and networkx's node-link documents
parquet   Parquet tables (two columns of names)
arrow     Arrow IPC files and streams, Feather
graphml   GraphML (``graphml.py``)
mtx       Matrix Market coordinate files (``mtx.py``)
adjlist   networkx's adjacency lists: a node, then its successors (``adjlist.py``)
========  ==========================================================================================

GEXF and DOT are recognised and refused with a message that names these.
"""

from __future__ import annotations

import re

from ..errors import GraphFormatError, InvalidParameterError
from ..format_names import FORMATS, REFUSED
from ..names import MAX_NAME_BYTES
from .adjlist import read_adjlist
from .columns import ColumnSpec
from .edgelist import BOM, SNIFF_BYTES, read_edgelist
from .gra import parse_gra
from .graph_input import GraphInput
from .graphml import read_graphml
from .jsonformat import parse_json
from .mtx import read_mtx
from .source import GraphSource, InputSource
from .tables import read_table

__all__ = [
    "FORMATS",
    "REFUSED",
    "TABULAR",
    "SUFFIXES",
    "GraphInput",
    "GraphSource",
    "read_graph",
    "guess_format",
    "format_of_name",
    "detect_format",
    "check_options",
]

SUFFIXES = {
    ".gra": "gra",
    ".json": "json",
    ".csv": "edgelist",
    ".tsv": "edgelist",
    ".txt": "edgelist",
    ".edges": "edgelist",
    ".el": "edgelist",
    ".edgelist": "edgelist",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".arrow": "arrow",
    ".arrows": "arrow",
    ".feather": "arrow",
    ".ipc": "arrow",
    ".graphml": "graphml",
    ".mtx": "mtx",
    ".mm": "mtx",
    ".adjlist": "adjlist",
    ".dot": "dot",
    ".gv": "dot",
    ".gexf": "gexf",
}
# The formats whose columns are chosen (source_column, target_column); header is for edge lists only.
TABULAR = ("edgelist", "parquet", "arrow")

# A DOT graph: comments, then [strict] (di)graph [id] {
_DOT = re.compile(
    rb"\A\s*(?:(?:/\*.*?\*/|//[^\n]*|#[^\n]*)\s*)*(?:strict\s+)?(?:di)?graph\b[^{;\n]*\{",
    re.IGNORECASE | re.DOTALL,
)
_XML_ROOT = re.compile(rb"<(?:[\w.-]+:)?(graphml|gexf)\b")
# The start of a JSON object or array of the kinds graphs are written as (not a name that starts with a brace).
_JSON = re.compile(rb'\{\s*["}]|\[\s*[\[{\]]')


def detect_format(head: bytes) -> str | None:
    """The format the first bytes of a text say it is in, where they say so (None: an edge list, an adjacency
    list or anything else without a signature). Refused formats are named too (``REFUSED``)."""
    if head.startswith(b"PAR1"):
        return "parquet"
    if head.startswith((b"ARROW1", b"\xff\xff\xff\xff", b"FEA1")):
        return "arrow"
    text = head.removeprefix(BOM).lstrip()
    if text.startswith(b"graph_for_greach"):
        return "gra"
    if text[:14].lower() == b"%%matrixmarket":
        return "mtx"
    if _JSON.match(text):
        return "json"
    if text.startswith((b"<?xml", b"<!DOCTYPE")) or _XML_ROOT.match(text):
        root = _XML_ROOT.search(text)
        return root.group(1).decode() if root else "xml"
    if _DOT.match(text):
        return "dot"
    return None


def guess_format(data: bytes, filename: str | None = None) -> str:
    """The format of a text that begins with ``data``: what its content says where it has a signature, else
    the file name's suffix (``.gz`` aside), else an edge list."""
    detected = detect_format(data[:SNIFF_BYTES])
    if detected is not None:
        return detected
    return (format_of_name(filename) if filename else None) or "edgelist"


def format_of_name(filename: str) -> str | None:
    """The format a file name's suffix says (``.gz`` aside; refused formats too), or None."""
    name = filename.lower().removesuffix(".gz")
    for suffix, format_name in SUFFIXES.items():
        if name.endswith(suffix):
            return format_name
    return None


def _refusal(kind: str) -> str:
    return (
        f"{REFUSED[kind]} are not read; the supported formats are {', '.join(FORMATS)} "
        "(from networkx: write_graphml, write_edgelist or node_link_data)"
    )


def _check_format(format: str | None) -> None:
    if format is None or format in FORMATS:
        return
    if format in REFUSED:
        raise InvalidParameterError(_refusal(format))
    raise InvalidParameterError(f"unknown graph format {format!r}; choose one of {', '.join(FORMATS)}")


def check_options(
    format: str | None,
    *,
    header: bool | None = None,
    source_column: ColumnSpec = None,
    target_column: ColumnSpec = None,
) -> None:
    """InvalidParameterError for reading options the format does not take (None: not known yet, any)."""
    if format is None:
        return
    if format not in TABULAR and (source_column is not None or target_column is not None):
        raise InvalidParameterError(
            f"source_column and target_column apply to edge lists, Parquet and Arrow tables, not to format={format}"
        )
    if format != "edgelist" and header is not None:
        raise InvalidParameterError(f"header applies to edge lists, not to format={format}")


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
    _check_format(format)
    if isinstance(max_name_bytes, bool) or not isinstance(max_name_bytes, int) or max_name_bytes < 1:
        raise InvalidParameterError(f"max_name_bytes must be a positive integer, got {max_name_bytes!r}")
    if header is not None and not isinstance(header, bool):
        raise InvalidParameterError(f"header must be True, False or None, got {header!r}")
    input_source = InputSource(source, max_bytes)
    head, complete = input_source.head(SNIFF_BYTES)
    if complete and not head.strip():
        raise GraphFormatError("empty graph: the input is empty")
    detected = detect_format(head)
    if format is None:
        format = guess_format(head, input_source.name)
    elif format in ("edgelist", "adjlist") and detected is not None:
        # A signature of another format: reading it as lines of names would build a different graph.
        if detected in REFUSED:
            raise GraphFormatError(_refusal(detected))
        raise GraphFormatError(f"this looks like a {detected} file, not an {format}: read it as format={detected}")
    if format in REFUSED:
        raise GraphFormatError(_refusal(format))
    check_options(format, header=header, source_column=source_column, target_column=target_column)
    if format == "gra":
        return parse_gra(input_source.read_all())
    if format == "json":
        return parse_json(input_source.read_all(), max_name_bytes)
    if format in ("parquet", "arrow"):
        return read_table(input_source, format, source_column, target_column, max_name_bytes)
    if format == "graphml":
        return read_graphml(input_source, max_name_bytes)
    if format == "mtx":
        return read_mtx(input_source)
    if format == "adjlist":
        return read_adjlist(input_source, max_name_bytes)
    return read_edgelist(
        input_source,
        header=header,
        source_column=source_column,
        target_column=target_column,
        max_name_bytes=max_name_bytes,
    )

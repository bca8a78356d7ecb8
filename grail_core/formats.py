"""The graph formats grail reads, and those it recognises only to refuse: one table, ``FORMAT_TABLE``.

Each row says what a format is for every part that needs to know: the file name suffixes and media types that
name it, the signature that gives it away (magic bytes, or a pattern at the start of the text), its reader
(a function of ``grail_core.readers``), which reading options apply, and the memory its build takes
(``grail_core.sizing``). The readers, sizing, the service's routes and OpenAPI document, the client and the CLI
all read it. ``ReadOptions`` is how one graph file is read, from the service's route to its reader.

Plain data (no numba): the client CLI reads it without loading the readers.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from .errors import InvalidParameterError

__all__ = [
    "BOM",
    "FORMATS",
    "FORMAT_TABLE",
    "FormatName",
    "GraphFormat",
    "READING_OPTIONS",
    "REFUSED",
    "ReadOptions",
    "UNTYPED_MEDIA_TYPES",
    "detect_format",
    "format_of_media_type",
    "format_of_name",
    "refusal",
]

BOM = b"\xef\xbb\xbf"
# The reading options, and the formats' bodies as a request carries them (the OpenAPI document's schemas).
READING_OPTIONS = ("header", "source_column", "target_column")
Body = Literal["text", "json", "binary", "xml", "none"]
_TABLE_OPTIONS = frozenset({"source_column", "target_column"})
_ARROW_FILE, _ARROW_STREAM = "application/vnd.apache.arrow.file", "application/vnd.apache.arrow.stream"


@dataclass(frozen=True)
class GraphFormat:
    """One format: ``name`` (the ``format`` parameter), what it is, and how each part of grail knows it."""

    name: str
    description: str
    # File name endings (a ``.gz`` after them aside), each with the media type a client sends a file by that
    # name as (None: none says the format surely; it goes as text/plain, or as ?format= for a format with
    # no media type at all).
    suffixes: Mapping[str, str | None] = field(default_factory=dict)
    media_types: tuple[str, ...] = ()  # Content-Types that name it
    body: Body = "text"
    magic: tuple[bytes, ...] = ()  # the first bytes of a file in this format
    signature: re.Pattern[bytes] | None = None  # matched at the start of the text (BOM and whitespace skipped)
    xml_root: str | None = None  # an XML document with this root element (namespace prefix aside)
    reader: str = ""  # "module:function" of grail_core.readers: function(source, options, max_name_bytes)
    options: frozenset[str] = frozenset()  # the reading options that apply
    bytes_per_edge: int = 115  # a build's peak memory per edge entry (the parse's spans and arrays included)
    text_factor: float = 3.5  # and per byte of text held while parsing
    refused: str | None = None  # recognised only to be refused: the words that name its files

    @property
    def readable(self) -> bool:
        return self.refused is None


# Sizing figures: peak resident memory over a process with the readers and the build compiled, measured by
# benchmarks/bench_hardening.py (benchmarks/results/hardening-memory.md); formats not measured take the edge list's.
_TABLE: tuple[GraphFormat, ...] = (
    GraphFormat(
        "gra",
        "GRAIL's graph_for_greach files",
        {".gra": "text/x-grail-gra"},
        ("text/x-grail-gra",),
        signature=re.compile(rb"graph_for_greach"),
        reader="gra:read",
        bytes_per_edge=45,
        text_factor=1.5,
    ),
    GraphFormat(
        "edgelist",
        "CSV, TSV and other delimited text, or names separated by spaces",
        {
            ".csv": "text/csv",
            ".tsv": "text/tab-separated-values",
            ".txt": None,
            ".edges": None,
            ".el": None,
            ".edgelist": None,
        },
        ("text/csv", "text/tab-separated-values"),
        reader="edgelist:read",
        options=frozenset(READING_OPTIONS),
    ),
    GraphFormat(
        "json",
        '{"edges": [[u, v], ...], "nodes": [...]} and networkx\'s node-link documents',
        {".json": "application/json"},
        ("application/json",),
        body="json",
        # The start of a JSON object or array of the kinds graphs are written as (not a name that starts with a brace).
        signature=re.compile(rb'\{\s*["}]|\[\s*[\[{\]]'),
        reader="jsonformat:read",
        text_factor=1.5,
    ),
    GraphFormat(
        "parquet",
        "Parquet tables (two columns of names)",
        {".parquet": "application/vnd.apache.parquet", ".pq": "application/vnd.apache.parquet"},
        ("application/vnd.apache.parquet", "application/x-parquet"),
        body="binary",
        magic=(b"PAR1",),
        reader="tables:read",
        options=_TABLE_OPTIONS,
    ),
    GraphFormat(
        "arrow",
        "Arrow IPC files and streams, Feather",
        {".arrow": _ARROW_FILE, ".arrows": _ARROW_STREAM, ".feather": _ARROW_FILE, ".ipc": _ARROW_FILE},
        (_ARROW_FILE, _ARROW_STREAM),
        body="binary",
        magic=(b"ARROW1", b"\xff\xff\xff\xff", b"FEA1"),
        reader="tables:read",
        options=_TABLE_OPTIONS,
    ),
    GraphFormat(
        "graphml",
        "GraphML",
        {".graphml": "application/graphml+xml"},
        ("application/graphml+xml",),
        body="xml",
        xml_root="graphml",
        reader="graphml:read",
    ),
    GraphFormat(
        "mtx",
        "Matrix Market coordinate files",
        {".mtx": "text/x-matrix-market", ".mm": "text/x-matrix-market"},
        ("text/x-matrix-market", "application/x-matrix-market"),
        signature=re.compile(rb"%%matrixmarket", re.IGNORECASE),
        reader="mtx:read",
    ),
    GraphFormat(
        "adjlist",
        "networkx's adjacency lists: a node, then its successors",
        {".adjlist": None},
        reader="adjlist:read",
    ),
    GraphFormat(
        "dot",
        "DOT (Graphviz)",
        {".dot": "text/vnd.graphviz", ".gv": "text/vnd.graphviz"},
        ("text/vnd.graphviz",),
        # Comments, then [strict] (di)graph [id] {
        signature=re.compile(
            rb"(?:(?:/\*.*?\*/|//[^\n]*|#[^\n]*)\s*)*(?:strict\s+)?(?:di)?graph\b[^{;\n]*\{", re.IGNORECASE | re.DOTALL
        ),
        refused="DOT (Graphviz) files",
    ),
    GraphFormat(
        "gexf",
        "GEXF",
        {".gexf": "application/gexf+xml"},
        ("application/gexf+xml",),
        body="xml",
        xml_root="gexf",
        refused="GEXF files",
    ),
    GraphFormat("xml", "other XML", body="xml", refused="XML documents other than GraphML"),
)

FORMAT_TABLE: dict[str, GraphFormat] = {f.name: f for f in _TABLE}
FORMATS: tuple[str, ...] = tuple(f.name for f in _TABLE if f.readable)
REFUSED: dict[str, str] = {f.name: f.refused for f in _TABLE if f.refused is not None}
if TYPE_CHECKING:
    FormatName = str
else:
    FormatName = Literal[FORMATS]  # the ``format`` parameter's values, for the service's models
# Media types that say nothing of the format: it is told from the content. (curl --data-binary sends
# application/x-www-form-urlencoded when the user gives no -H Content-Type: never a real form here.)
UNTYPED_MEDIA_TYPES = (
    "text/plain",
    "application/xml",
    "text/xml",
    "application/octet-stream",
    "application/gzip",
    "application/x-gzip",
    "application/x-www-form-urlencoded",
)
_XML = re.compile(rb"<(?:[\w.-]+:)?(" + b"|".join(f.xml_root.encode() for f in _TABLE if f.xml_root) + rb")\b")
_XML_ROOTS = {f.xml_root: f.name for f in _TABLE if f.xml_root}


def detect_format(head: bytes) -> str | None:
    """The format the first bytes of a text say it is in, where they say so (None: an edge list, an adjacency
    list or anything else without a signature). Refused formats are named too (``REFUSED``)."""
    for f in _TABLE:
        if f.magic and head.startswith(f.magic):
            return f.name
    text = head.removeprefix(BOM).lstrip()
    for f in _TABLE:
        if f.signature is not None and f.body != "xml" and f.signature.match(text):
            return f.name
    if text.startswith((b"<?xml", b"<!DOCTYPE")) or _XML.match(text):
        root = _XML.search(text)
        return _XML_ROOTS[root.group(1).decode()] if root else "xml"
    return None


def format_of_name(filename: str) -> str | None:
    """The format a file name's suffix says (``.gz`` aside; refused formats too), or None."""
    name = filename.lower().removesuffix(".gz")
    for f in _TABLE:
        if name.endswith(tuple(f.suffixes)):
            return f.name
    return None


def format_of_media_type(media: str) -> str | None:
    """The format a media type names (refused ones too); None for one that says nothing of the format
    (``UNTYPED_MEDIA_TYPES``). KeyError for a media type no format has."""
    for f in _TABLE:
        if media in f.media_types:
            return f.name
    if media in UNTYPED_MEDIA_TYPES:
        return None
    raise KeyError(media)


def refusal(name: str, hint: str = "from networkx: write_graphml, write_edgelist or node_link_data") -> str:
    """Why a refused format is not read, and what is."""
    return f"{REFUSED[name]} are not read; the supported formats are {', '.join(FORMATS)} ({hint})"


@dataclass(frozen=True)
class ReadOptions:
    """How one graph file is read: its ``format`` (None: told from its content, then its name), and for edge
    lists and tables the columns of the sources and targets (a name or a 0-based position; None: recognised
    by their names) and, for edge lists, whether the first row names the columns (None: recognised). Given
    with a format they do not apply to, they are refused; given without a format, they apply where the format
    found takes them."""

    format: str | None = None
    header: bool | None = None
    source_column: int | str | None = None
    target_column: int | str | None = None

    def check(self) -> None:
        """InvalidParameterError for an unknown or refused format, or options its format does not take. With no
        format, any options: the format is told later, and ``as_format`` leaves out those it does not take."""
        if self.format is None:
            return
        row = FORMAT_TABLE.get(self.format)
        if row is None:
            raise InvalidParameterError(f"unknown graph format {self.format!r}; choose one of {', '.join(FORMATS)}")
        if not row.readable:
            raise InvalidParameterError(refusal(row.name))
        if not _TABLE_OPTIONS <= row.options and (self.source_column is not None or self.target_column is not None):
            raise InvalidParameterError(
                f"source_column and target_column apply to edge lists, Parquet and Arrow tables, not to "
                f"format={self.format}"
            )
        if "header" not in row.options and self.header is not None:
            raise InvalidParameterError(f"header applies to edge lists, not to format={self.format}")

    def as_format(self, format: str | None) -> ReadOptions:
        """The options for a file found to be in ``format``: those it does not take left out."""
        row = FORMAT_TABLE.get(format) if format is not None else None
        if row is None:
            return replace(self, format=format)
        kept = {name: getattr(self, name) if name in row.options else None for name in READING_OPTIONS}
        return ReadOptions(format, **kept)

    def given(self) -> dict[str, Any]:
        """The options that are set, by name (the format included)."""
        values = {"format": self.format, **{name: getattr(self, name) for name in READING_OPTIONS}}
        return {name: value for name, value in values.items() if value is not None}

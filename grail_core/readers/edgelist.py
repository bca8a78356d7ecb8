"""Edge lists: CSV, TSV and other delimited text, and names separated by spaces, read by pyarrow's CSV reader.

The first lines say how to read the file (``sniff``): the delimiter (tab, comma or semicolon where every line
has the same number of fields by it, RFC 4180 quoting understood; otherwise runs of spaces and tabs), whether
the first row is a header (its names say so: ``source,target``, ``from,to``, ``FromNodeId``, ...; or it is
the only row whose names are not integers), and which columns hold the edges (``columns.choose_columns``;
pandas' index column skipped). Lines starting with ``#`` or ``%`` are comments, except in delimited files with
a header (pandas' and Excel's CSV), where only those above the header are: there a name may start with ``#``.

The text then streams through pyarrow's CSV reader in blocks (parsed ahead on its own threads) while the names
of each block become ids (``sink.EdgeSink``): neither the text nor a Python object per edge is held. Files
that pyarrow cannot take as they are (comments, runs of spaces) pass through ``_normalize`` on their way in, a
numba pass that blanks comment lines and turns runs of blanks into one tab, keeping every line where it was so
that errors name the file's own line numbers.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
from numba import njit

from ..errors import GraphFormatError
from ..formats import ReadOptions
from ..names import MAX_NAME_BYTES
from .columns import ColumnSpec, choose_columns, how_to_choose, is_index_name
from .columns import role_of as _role
from .graph_input import GraphInput
from .sink import EdgeSink, RestartAsStrings
from .source import InputSource

__all__ = [
    "read_edgelist",
    "sniff",
    "Dialect",
    "Normalizer",
    "iter_batches",
    "rows_to_lines",
    "line_of_row",
    "with_restarts",
    "BOM",
    "SNIFF_BYTES",
    "read",
]

NEWLINE, CARRIAGE_RETURN, SPACE, TAB, QUOTE, HASH, PERCENT, OPEN_BRACE = 10, 13, 32, 9, 34, 35, 37, 123
BOM = b"\xef\xbb\xbf"
# How much of the text the first look reads (more while the first lines are all comments, up to the most).
SNIFF_BYTES = 1 << 16
MAX_SNIFF_BYTES = 1 << 24
SAMPLE_LINES = 1000
DELIMITERS = ("\t", ",", ";")
# pyarrow's blocks: a line must fit one. Longer lines retry with larger blocks, up to the most.
BLOCK_BYTES = 1 << 22
MAX_BLOCK_BYTES = 1 << 26
_INTEGER = re.compile(r"\s*[+-]?[0-9]+\s*")
_NUMBER = re.compile(r"\s*[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\s*|\s*(?i:[+-]?(?:nan|inf))\s*")
_WHITESPACE_TOKEN = re.compile(r'"(?:[^"]|"")*"?|[^\s]+')


@dataclass(frozen=True)
class Dialect:
    """How an edge list is read: what ``sniff`` found in its first lines."""

    delimiter: str | None  # None: names separated by runs of spaces and tabs
    quoted: bool  # some field is quoted (a quoted name may then hold a line break)
    columns: int  # fields on every row
    header: tuple[str, ...] | None  # the header row's names
    source: int
    target: int
    comments: bool  # whether '#' and '%' lines below the data's start are comments
    data_offset: int  # where the data rows begin in the text
    data_line: int  # and on which line
    line_bytes: float = 0.0  # the sampled data lines' mean length (with the newline), for estimates
    edge_data: bool = True  # a field starting with '{' after the second starts networkx's edge data
    lines: bool = False  # read whole lines (adjacency lists), split by the reader
    what: str = "edge list"  # the format, for messages


# ---- the first look ------------------------------------------------------------------------------------


def _is_comment(line: bytes) -> bool:
    return line.lstrip()[:1] in (b"#", b"%")


def _split_whitespace(line: str) -> list[str]:
    tokens = _WHITESPACE_TOKEN.findall(line)
    for position, token in enumerate(tokens):
        if position >= 2 and token.startswith("{"):  # networkx's edge data: {'weight': 3}
            return tokens[:position]
    return [t[1:-1].replace('""', '"') if len(t) > 1 and t[0] == t[-1] == '"' else t for t in tokens]


def _rows(lines: list[str], delimiter: str | None) -> list[list[str]]:
    if delimiter is None:
        return [_split_whitespace(line) for line in lines]
    return list(csv.reader(io.StringIO("\n".join(lines)), delimiter=delimiter))


def _integer_like(value: str) -> bool:
    return _INTEGER.fullmatch(value) is not None


def _number_like(value: str) -> bool:
    return _NUMBER.fullmatch(value) is not None


def sniff(
    head: bytes,
    complete: bool,
    *,
    header: bool | None = None,
    source: ColumnSpec = None,
    target: ColumnSpec = None,
) -> Dialect | None:
    """The dialect of an edge list that begins with ``head`` (all of it when ``complete``); None when the head
    holds no data line yet (a longer one is needed)."""
    start = len(BOM) if head.startswith(BOM) else 0
    lines = head[start:].split(b"\n")
    if not complete:
        lines.pop()  # cut off in the middle
    offset, first = start, 0
    while first < len(lines) and (not lines[first].strip() or _is_comment(lines[first])):
        offset += len(lines[first]) + 1
        first += 1
    numbered = [
        (number, line)
        for number, line in enumerate(lines[first : first + SAMPLE_LINES], start=first + 1)
        if line.strip() and not _is_comment(line)
    ]
    if not numbered:
        if complete:
            raise GraphFormatError("empty graph: the edge list has no edges")
        return None
    sample = [line.decode("utf-8", "replace").rstrip("\r") for _, line in numbered]
    quoted = any(b'"' in line for _, line in numbered)
    delimiter, rows = _choose_delimiter(sample, [number for number, _ in numbered])
    columns = len(rows[0])
    has_header = _has_header(rows, delimiter, header, source, target)
    names = tuple(name.strip() for name in rows[0]) if has_header else None
    skip_first = names is not None and columns >= 3 and is_index_name(names[0]) and source is None and target is None
    if names is None and columns >= 3 and source is None and target is None:
        _refuse_row_numbers(rows, first)
    source_column, target_column = choose_columns(names, columns, source, target, skip_first=skip_first)
    data_offset, data_line = offset, first + 1
    if has_header:
        data_offset += len(lines[first]) + 1
        data_line += 1
    return Dialect(
        delimiter=delimiter,
        quoted=quoted,
        columns=columns,
        header=names,
        source=source_column,
        target=target_column,
        comments=not (has_header and delimiter is not None),
        data_offset=data_offset,
        data_line=data_line,
        line_bytes=sum(len(line) + 1 for _, line in numbered) / len(numbered),
    )


def _choose_delimiter(sample: list[str], numbers: list[int]) -> tuple[str | None, list[list[str]]]:
    """The delimiter by which every sampled line has the same number (two or more) of fields, tried in the order
    of ``DELIMITERS``, then runs of blanks; where none fits, the line that breaks the best one's rule is named."""
    tried = []
    for delimiter in (*DELIMITERS, None):
        try:
            rows = _rows(sample, delimiter)
        except csv.Error:
            continue
        if rows and len(rows[0]) >= 2:
            agreeing = sum(len(row) == len(rows[0]) for row in rows)
            if agreeing == len(rows):
                return delimiter, rows
            tried.append((agreeing, delimiter, rows))
    if not tried:
        raise GraphFormatError("expected two node names (source and target)", line=numbers[0])
    _, delimiter, rows = max(tried, key=lambda attempt: attempt[0])
    bad = next(k for k, row in enumerate(rows) if len(row) != len(rows[0]))
    line = numbers[bad] if len(rows) == len(numbers) else None  # a quoted name may span lines
    if len(rows[bad]) < 2:
        raise GraphFormatError("expected two node names (source and target)", line=line)
    message = f"expected {len(rows[0])} fields, as on the lines before, but found {len(rows[bad])}"
    if delimiter is None:
        message += " (if each line is a node and its successors, read it as format=adjlist)"
    raise GraphFormatError(message, line=line)


def _has_header(
    rows: list[list[str]], delimiter: str | None, header: bool | None, source: ColumnSpec, target: ColumnSpec
) -> bool:
    first, rest = [name.strip() for name in rows[0]], rows[1:]
    named = [spec for spec in (source, target) if isinstance(spec, str) and not spec.strip().isdigit()]
    if header is not None:
        if named and not header:
            raise GraphFormatError(f"{'/'.join(map(repr, named))}: a column name, but header=False: give a position")
        return header
    if named:
        folded = {name.lower() for name in first}
        missing = [spec for spec in named if spec.strip().lower() not in folded]
        if missing:
            raise GraphFormatError(
                f"no column named {' or '.join(map(repr, missing))} in the first row "
                f"({', '.join(map(repr, first))}); give a 0-based position, or a name from the header"
            )
        return True
    if delimiter is not None and len(first) >= 3 and is_index_name(first[0]) and first[0] == "":
        return True  # pandas' to_csv: an unnamed index column first
    roles = [_role(name) for name in first]
    kinds = {role[0] for role in roles if role}
    if {"source", "target"} <= kinds or "both ways" in kinds:
        # A row of column names, unless those names are also nodes of the rows below ("u v", "v w", ...).
        seen = {name.strip() for row in rest for name in row}
        if not any(name in seen for name, role in zip(first, roles, strict=True) if role):
            return True
    # Else a header is the only row whose names are not integers, in the columns that hold the edges without one,
    # or the only row with a word in a column of numbers (weights: "a,b,weight" above "x,y,0.5").
    if not rest:
        return False
    ends = [int(spec) if spec is not None else default for spec, default in ((source, 0), (target, 1))]
    if max(ends) < len(first) and not all(_integer_like(first[k]) for k in ends):
        if all(_integer_like(row[k]) for row in rest for k in ends):
            return True
    return any(
        not _number_like(first[k]) and all(_number_like(row[k]) for row in rest)
        for k in range(len(first))
        if k not in ends
    )


def _refuse_row_numbers(rows: list[list[str]], first: int) -> None:
    """A first column that counts the rows 0, 1, 2 ... is pandas' index (to_csv(header=False)), or each row is
    a node and its successors: either way the first two columns are not the edge."""
    column = [row[0].strip() for row in rows]
    if len(column) >= 2 and column == [str(k) for k in range(len(column))]:
        raise GraphFormatError(
            "the first column counts the rows 0, 1, 2, ...: is it pandas' index (to_csv without a header), or is "
            f"each line a node and its successors (format=adjlist)? For an edge list, {how_to_choose()}",
            line=first + 1,
        )


# ---- the pass over the text ------------------------------------------------------------------------------

# _normalize's state between blocks.
_SKIP, _QUOTED, _QUOTE_SEEN, _FIELDS, _IN_FIELD, _LINE_START = range(6)


@njit(nogil=True, cache=True)
def _normalize(src, out, state, whitespace, delimiter, comments, edge_data):
    """Copy a block of text into ``out`` as pyarrow reads it: comment lines blanked (their newline kept), and
    with ``whitespace`` every run of spaces, tabs and carriage returns between names turned into one tab, those
    around a line dropped, and with ``edge_data`` a field starting with '{' after the second dropped with the
    rest of its line (networkx's edge data). Quoted fields are copied as they are. Returns the bytes written."""
    skip, quoted, quote_seen = state[_SKIP], state[_QUOTED], state[_QUOTE_SEEN]
    fields, in_field, line_start = state[_FIELDS], state[_IN_FIELD], state[_LINE_START]
    n = 0
    for i in range(src.size):
        c = src[i]
        if quoted:
            if quote_seen:
                quote_seen = 0
                if c != QUOTE:  # the quote before closed the field; this byte is outside it
                    quoted = 0
            elif c == QUOTE:
                quote_seen = 1
            if quoted:
                out[n] = c
                n += 1
                continue
        if c == NEWLINE:
            out[n] = c
            n += 1
            skip, fields, in_field, line_start = 0, 0, 0, 1
            continue
        if skip:
            continue
        if whitespace:
            if c == SPACE or c == TAB or c == CARRIAGE_RETURN:
                in_field = 0
                continue
            if not in_field:
                comment = fields == 0 and comments and (c == HASH or c == PERCENT)
                if comment or (edge_data and fields >= 2 and c == OPEN_BRACE):
                    skip = 1
                    continue
                if fields > 0:
                    out[n] = TAB
                    n += 1
                fields += 1
                in_field = 1
                quoted = c == QUOTE
        else:
            if line_start and comments and (c == HASH or c == PERCENT):
                skip = 1
                continue
            if c == delimiter:
                in_field = 0
            elif not in_field:
                in_field = 1
                quoted = c == QUOTE
        line_start = 0
        out[n] = c
        n += 1
    state[_SKIP], state[_QUOTED], state[_QUOTE_SEEN] = skip, quoted, quote_seen
    state[_FIELDS], state[_IN_FIELD], state[_LINE_START] = fields, in_field, line_start
    return n


class Normalizer:
    """``_normalize`` over consecutive blocks (a transform for ``InputSource.open``); ``delimiter`` None: runs
    of blanks separate the names."""

    def __init__(self, delimiter: str | None, comments: bool, edge_data: bool = True, quoted: bool = True) -> None:
        self.whitespace = delimiter is None
        self.delimiter = ord(delimiter or "\t")
        self.comments = comments
        self.edge_data = edge_data
        self.quoted = quoted
        self.state = np.zeros(6, dtype=np.int64)
        self.state[_LINE_START] = 1

    @classmethod
    def of(cls, dialect: Dialect) -> Normalizer | None:
        """The normalizer an edge list needs, if any (pyarrow reads delimited files without comments as they are)."""
        if dialect.delimiter is None or dialect.comments:
            return cls(dialect.delimiter, dialect.comments, dialect.edge_data, dialect.quoted)
        return None

    def __call__(self, block: bytes) -> bytes:
        if not (self.whitespace or self.quoted or self._may_hold_comments(block)):
            # Delimited text without quotes or comment lines here: pyarrow takes the block as it is.
            self.state[_LINE_START] = block.endswith(b"\n")
            return block
        data = np.frombuffer(block, dtype=np.uint8)
        out = np.empty(data.size, dtype=np.uint8)
        n = _normalize(data, out, self.state, self.whitespace, self.delimiter, self.comments, self.edge_data)
        return out[:n].tobytes()

    def _may_hold_comments(self, block: bytes) -> bool:
        if self.state[_SKIP] or (self.state[_LINE_START] and block[:1] in (b"#", b"%")):
            return True
        return b"\n#" in block or b"\n%" in block


# _find_row's state between blocks.
_ROWS, _LINE, _CONTENT, _ROW_LINE = range(4)


@njit(nogil=True, cache=True)
def _find_row(src, state, delimiter, quotes, wanted):
    """The line (0-based from the data's first) on which row ``wanted`` begins, counting rows as pyarrow does
    (lines that are not empty; a quoted field may span lines), or -1 when it is not in this block."""
    rows, line, content, row_line = state[0], state[1], state[2], state[3]
    quoted, quote_seen, field_start = state[4], state[5], state[6]
    for i in range(src.size):
        c = src[i]
        if quoted:
            if quote_seen:
                quote_seen = 0
                if c != QUOTE:
                    quoted = 0
            elif c == QUOTE:
                quote_seen = 1
            if quoted:
                if c == NEWLINE:
                    line += 1
                continue
        if c == NEWLINE:
            if content:
                if rows == wanted:
                    return row_line
                rows += 1
            line += 1
            content = 0
            field_start = 1
            continue
        if c != CARRIAGE_RETURN and not content:
            content = 1
            row_line = line
        if quotes and field_start and c == QUOTE:
            quoted = 1
        field_start = c == delimiter
    state[0], state[1], state[2], state[3] = rows, line, content, row_line
    state[4], state[5], state[6] = quoted, quote_seen, field_start
    return -1


def line_of_row(source: InputSource, dialect: Dialect, row: int) -> int | None:
    """The file's line of data row ``row`` (0-based), read again from the start: for error messages only."""
    state = np.zeros(7, dtype=np.int64)
    state[6] = 1
    delimiter = ord(dialect.delimiter or "\t")
    with source.open(dialect.data_offset, Normalizer.of(dialect)) as stream:
        while block := stream.read(BLOCK_BYTES):
            found = _find_row(np.frombuffer(block, dtype=np.uint8), state, delimiter, dialect.quoted, row)
            if found >= 0:
                return dialect.data_line + int(found)
    if state[_CONTENT] and state[_ROWS] == row:
        return dialect.data_line + int(state[_ROW_LINE])
    return None


def _arrow_options(dialect: Dialect, block_bytes: int, threads: bool, on_invalid: Any = None) -> dict[str, Any]:
    import pyarrow as pa
    import pyarrow.csv as pacsv

    fields = [f"f{i}" for i in range(dialect.columns)]
    chosen = list(dict.fromkeys([fields[dialect.source], fields[dialect.target]]))
    return {
        "read_options": pacsv.ReadOptions(column_names=fields, block_size=block_bytes, use_threads=threads),
        "parse_options": pacsv.ParseOptions(
            # Whole lines: a delimiter no text name holds (a line with one is refused, as a line of two fields).
            delimiter="\x1f" if dialect.lines else dialect.delimiter or "\t",
            quote_char=False if dialect.lines else '"',
            double_quote=True,
            escape_char=False,
            newlines_in_values=dialect.quoted,
            ignore_empty_lines=True,
            invalid_row_handler=on_invalid,
        ),
        "convert_options": pacsv.ConvertOptions(
            include_columns=chosen, column_types=dict.fromkeys(chosen, pa.binary()), strings_can_be_null=False
        ),
    }


def _parse_error(source: InputSource, dialect: Dialect, error: Exception) -> GraphFormatError:
    """pyarrow's error, with the line: the text is parsed again on one thread, which numbers the rows."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    invalid: list[Any] = []

    def keep(row: Any) -> str:
        invalid.append(row)
        return "error"

    try:
        with source.open(dialect.data_offset, Normalizer.of(dialect)) as stream:
            for _ in pacsv.open_csv(stream, **_arrow_options(dialect, MAX_BLOCK_BYTES, False, keep)):
                pass
    except (pa.ArrowInvalid, GraphFormatError):
        pass
    if not invalid:
        return GraphFormatError(f"malformed {dialect.what}: {error}")
    row = invalid[0]
    line = line_of_row(source, dialect, row.number - 1) if row.number is not None else None
    if dialect.lines:
        return GraphFormatError("a line holds the control character U+001F", line=line)
    message = f"expected {row.expected_columns} fields, as on the lines before, but found {row.actual_columns}"
    if dialect.delimiter is None and dialect.what == "edge list":
        message += " (if each line is a node and its successors, read it as format=adjlist)"
    elif dialect.header is not None:
        message += f" (the header names {row.expected_columns} columns)"
    return GraphFormatError(message, line=line)


class LargerBlocks(Exception):
    """A line did not fit pyarrow's block: the read starts again with larger ones."""

    def __init__(self, block_bytes: int) -> None:
        self.block_bytes = block_bytes


def iter_batches(source: InputSource, dialect: Dialect, block_bytes: int) -> Iterator[tuple[int, Any]]:
    """(index of the first row, record batch) of the chosen columns, from pyarrow's CSV reader on its threads;
    GraphFormatError naming the line for rows it cannot read."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    row = 0
    normalizer = Normalizer.of(dialect)
    stream = source.open(dialect.data_offset, normalizer) if normalizer else source.arrow_stream(dialect.data_offset)
    try:
        with stream:
            for batch in pacsv.open_csv(stream, **_arrow_options(dialect, block_bytes, True)):
                yield row, batch
                row += batch.num_rows
    except pa.ArrowInvalid as error:
        if "straddl" not in str(error):
            raise _parse_error(source, dialect, error) from None
        if block_bytes >= MAX_BLOCK_BYTES:
            raise GraphFormatError(f"a line longer than {MAX_BLOCK_BYTES >> 20} MiB, or a quote left open") from None
        raise LargerBlocks(4 * block_bytes) from None


def rows_to_lines(source: InputSource, dialect: Dialect, first_row: int) -> Callable[[int], int | None]:
    """The line of row i of a batch whose first row is ``first_row`` (computed only when an error needs it)."""
    return lambda row: line_of_row(source, dialect, first_row + row)


def expected_rows(source: InputSource, dialect: Dialect) -> int:
    """About how many rows a text of known size holds (a little more: the arrays are then written once)."""
    if source.size is None or not dialect.line_bytes:
        return 0
    return int(1.05 * (source.size - dialect.data_offset) / dialect.line_bytes) + 1024


T = TypeVar("T")


def with_restarts(read: Callable[[int, bool], T]) -> T:
    """``read(block_bytes, strings)``, again with larger blocks or with string names while it asks to."""
    block_bytes, strings = BLOCK_BYTES, False
    while True:
        try:
            return read(block_bytes, strings)
        except LargerBlocks as larger:
            block_bytes = larger.block_bytes
        except RestartAsStrings:
            strings = True


def read_edgelist(
    source: InputSource,
    *,
    header: bool | None = None,
    source_column: ColumnSpec = None,
    target_column: ColumnSpec = None,
    max_name_bytes: int = MAX_NAME_BYTES,
) -> GraphInput:
    """Read an edge list (see the module docstring)."""
    dialect = None
    size = SNIFF_BYTES
    while dialect is None:
        head, complete = source.head(size)
        dialect = sniff(head, complete, header=header, source=source_column, target=target_column)
        if dialect is None and size >= MAX_SNIFF_BYTES:
            raise GraphFormatError(f"no edge in the first {MAX_SNIFF_BYTES >> 20} MiB: only comments or blank lines")
        size *= 4

    def read(block_bytes: int, strings: bool) -> GraphInput:
        assert dialect is not None
        sink = EdgeSink(
            max_name_bytes,
            strings=strings,
            trim=dialect.delimiter is not None,
            line_breaks=not dialect.quoted,  # only a quoted name could hold one: an unclosed quote's doing
            expected_edges=expected_rows(source, dialect),
        )
        for first_row, batch in iter_batches(source, dialect, block_bytes):
            sink.add_edges(batch.column(0), batch.column(1), rows_to_lines(source, dialect, first_row))
        if sink.num_edges == 0:
            raise GraphFormatError(
                "empty graph: the edge list has a header but no edges"
                if dialect.header is not None
                else "empty graph: the edge list has no edges"
            )
        return sink.finish("edgelist")

    return with_restarts(read)


def read(source: InputSource, options: ReadOptions, max_name_bytes: int) -> GraphInput:
    """The format table's reader (``grail_core.formats``)."""
    return read_edgelist(
        source,
        header=options.header,
        source_column=options.source_column,
        target_column=options.target_column,
        max_name_bytes=max_name_bytes,
    )

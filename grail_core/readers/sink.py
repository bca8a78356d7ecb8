"""Edges given as columns of names, batch by batch, into a ``GraphInput``: the one place where readers turn
names into ids.

Every reader hands ``EdgeSink`` what its format yields (pyarrow arrays, UTF-8 tokens of a text block, int64
arrays) and the sink keeps only ids: the names go into a ``NameInterner`` as they come, and the ids into arrays
that grow with the graph. Names are integers while every name read is one (an optional sign and ASCII digits
within int64, as queries read them) and strings otherwise; a text file whose names turn out not to be all
integers after its first blocks is read again as strings (``RestartAsStrings``) unless the integers read so
far are written the one way their strings would be (no sign, no leading zeros), which keeps the ids as they
are.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numba import njit

from ..byteops import parse_decimal
from ..errors import GraphFormatError
from ..names import MAX_NAME_BYTES, NameInterner, NameTokens, NodeNames
from .graph_input import GraphInput

__all__ = ["EdgeSink", "RestartAsStrings", "LineOf", "arrow_column", "parse_integers"]

LineOf = Callable[[int], "int | None"]

SPACE, TAB = 32, 9
# Outcomes of _parse_tokens.
_CANONICAL, _INTEGERS, _TEXT = range(3)
_INITIAL_EDGES = 1 << 16


class RestartAsStrings(Exception):
    """Names read as integers met a name that is not one, and the integers cannot be turned back into the text
    they were read from: the reader starts again with ``strings=True``."""


@njit(nogil=True, cache=True)
def _parse_tokens(data, starts, ends, values, trim):
    """Parse every token as an int64 name (trimming spaces and tabs around it first when ``trim``; the trimmed
    spans are written back). _CANONICAL when all are integers written as str(int) would write them, _INTEGERS
    when all are integers, else _TEXT: the rest are still trimmed, and not parsed."""
    outcome = _CANONICAL
    for k in range(starts.size):
        start, end = starts[k], ends[k]
        if trim:
            while start < end and (data[start] == SPACE or data[start] == TAB):
                start += 1
            while end > start and (data[end - 1] == SPACE or data[end - 1] == TAB):
                end -= 1
            starts[k] = start
            ends[k] = end
        if outcome == _TEXT:
            continue
        value, ok = parse_decimal(data, start, end)
        if not ok:
            outcome = _TEXT
            continue
        values[k] = value
        if outcome == _CANONICAL:
            first = data[start]
            negative = first == 45 and (value == 0 or data[start + 1] == 48)
            if first == 43 or (first == 48 and end - start > 1) or negative:
                outcome = _INTEGERS
    return outcome


@njit(nogil=True, cache=True)
def _parse_all(data, starts, ends, values):
    """Parse every token as an int64; the index of the first that is not one, or -1."""
    for k in range(starts.size):
        value, ok = parse_decimal(data, starts[k], ends[k])
        if not ok:
            return k
        values[k] = value
    return -1


def parse_integers(array: Any) -> tuple[np.ndarray, int | None]:
    """The int64 values of a pyarrow column of integers or of their text, and the first row that is not one."""
    integers, tokens = arrow_column(array, "number")
    if integers is not None:
        return integers, None
    assert tokens is not None
    data, starts, ends = tokens._arrays()
    values = np.empty(starts.size, dtype=np.int64)
    bad = _parse_all(data, starts, ends, values)
    return values, None if bad < 0 else int(bad)


def _has_line_break(data: np.ndarray) -> bool:
    return bool(data.size) and bool(np.any(data == 10) or np.any(data == 13))


class _Tokens:
    """One column of a batch: int64 names, or UTF-8 tokens (with their integer values when all are integers)."""

    def __init__(self, integers: np.ndarray | None, tokens: NameTokens | None, canonical: bool = True) -> None:
        self.integers = integers
        self.tokens = tokens
        self.canonical = canonical

    def __len__(self) -> int:
        return int(self.integers.size if self.integers is not None else len(self.tokens))  # type: ignore[arg-type]


def arrow_column(array: Any, role: str) -> tuple[np.ndarray | None, NameTokens | None]:
    """A pyarrow array of names as int64 values or as UTF-8 tokens over its buffers (nothing copied);
    GraphFormatError for nulls and for types that are no names."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if array.null_count:
        first = int(np.flatnonzero(np.asarray(array.is_null()))[0])
        raise _RowError(first, f"the {role} is missing (null)")
    kind = array.type
    if pa.types.is_dictionary(kind):
        array = array.dictionary_decode()
        kind = array.type
    if pa.types.is_integer(kind):
        if pa.types.is_uint64(kind) and len(array) and int(pc.max(array).as_py()) >= 2**63:
            array = array.cast(pa.string())  # beyond int64: the names are their decimal strings
        else:
            return np.asarray(array.cast(pa.int64()), dtype=np.int64), None
    kind = array.type
    if pa.types.is_string_view(kind) or pa.types.is_binary_view(kind):
        array = array.cast(pa.large_binary())
    elif not (
        pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_binary(kind)
        or pa.types.is_large_binary(kind)
    ):
        raise GraphFormatError(f"the {role} column holds {kind}: node names must be integers or strings")
    _, offsets_buffer, data_buffer = array.buffers()[:3]
    wide = pa.types.is_large_string(array.type) or pa.types.is_large_binary(array.type)
    offsets = np.frombuffer(offsets_buffer, dtype=np.int64 if wide else np.int32)
    offsets = offsets[array.offset : array.offset + len(array) + 1]
    data = np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer is not None else np.zeros(0, np.uint8)
    return None, NameTokens.from_offsets(data, offsets)


class _RowError(Exception):
    """A problem with one row of a batch; the sink words it with the row's line."""

    def __init__(self, row: int, message: str) -> None:
        self.row = row
        self.message = message


class _Growing:
    """An int64 array that grows by half when full. Sized right from the start (a reader's estimate), it is
    written once: on a VM every fresh page costs a fault, and a copy costs the pages twice."""

    def __init__(self, capacity: int) -> None:
        self.array = np.empty(max(capacity, _INITIAL_EDGES), dtype=np.int64)
        self.size = 0

    def extend(self, values: np.ndarray) -> None:
        end = self.size + values.size
        if end > self.array.size:
            bigger = np.empty(max(end, self.array.size + self.array.size // 2), dtype=np.int64)
            bigger[: self.size] = self.array[: self.size]
            self.array = bigger
        self.array[self.size : end] = values
        self.size = end

    def take(self) -> np.ndarray:
        """The values; the array itself where little of it is unused."""
        array = self.array[: self.size]
        if 8 * self.size < 7 * self.array.size:
            array = array.copy()
        self.array = np.empty(0, dtype=np.int64)
        return array


class EdgeSink:
    """Collects a graph's edges and nodes as ids; ``finish`` gives the ``GraphInput``.

    ``strings``: read every name as a string (a restart after ``RestartAsStrings``); ``trim``: spaces and
    tabs around a text name are not part of it (delimited text); ``line_breaks``: whether a name may hold a
    line break (checked only where one could be an unclosed quote's doing); ``expected_edges``: how many edge
    entries the reader expects (an estimate: the arrays grow past it).
    """

    def __init__(
        self,
        max_name_bytes: int = MAX_NAME_BYTES,
        *,
        strings: bool = False,
        trim: bool = False,
        line_breaks: bool = True,
        expected_edges: int = 0,
    ) -> None:
        self.max_name_bytes = max_name_bytes
        self.strings = strings
        self.trim = trim
        self.line_breaks = line_breaks
        self._interner = NameInterner(max_name_bytes)
        self._kind: str | None = None  # "int" or "str" once the first names came
        self._canonical = True  # every integer so far was written as str(int) writes it
        self._src = _Growing(expected_edges)
        self._dst = _Growing(expected_edges)

    # What the readers call ----------------------------------------------------------------------------

    def add_edges(self, sources: Any, targets: Any, line_of: LineOf | None = None, both_ways: bool = False) -> None:
        """Edges ``sources[i] -> targets[i]`` (and back, when ``both_ways``). Each column: a pyarrow array,
        ``NameTokens``, an int64 array, or a list of Python names; ``line_of(i)`` is the line of row i."""
        columns = [self._column(sources, "source", line_of), self._column(targets, "target", line_of)]
        if len(columns[0]) != len(columns[1]):
            raise ValueError("source and target columns differ in length")
        self._settle_kind(columns)
        src = self._ids(columns[0], line_of)
        dst = self._ids(columns[1], line_of)
        self._src.extend(src)
        self._dst.extend(dst)
        if both_ways:
            self._src.extend(dst)
            self._dst.extend(src)

    def add_nodes(self, names: Any, line_of: LineOf | None = None) -> np.ndarray:
        """Nodes (isolated ones too); returns their ids."""
        column = self._column(names, "node", line_of)
        self._settle_kind([column])
        return self._ids(column, line_of)

    def add_id_edges(self, src: np.ndarray, dst: np.ndarray) -> None:
        """Edges between ids that ``add_nodes`` returned."""
        self._src.extend(src)
        self._dst.extend(dst)

    @property
    def num_edges(self) -> int:
        return self._src.size

    def finish(self, format: str) -> GraphInput:
        names = self._interner.finish()
        src, dst = self._src.take(), self._dst.take()
        if names.size == 0:
            raise GraphFormatError("empty graph: no nodes")
        if names.kind == "int":
            keys = names.keys
            assert keys is not None
            if int(keys.min()) == 0 and int(keys.max()) == names.size - 1:
                # The names are exactly 0..n-1: ids become the names themselves, and no table is kept.
                src, dst = keys[src], keys[dst]
                names = NodeNames.identity(names.size)
        return GraphInput(num_nodes=names.size, src=src, dst=dst, names=names, format=format)

    # Inside ----------------------------------------------------------------------------------------------

    def _column(self, values: Any, role: str, line_of: LineOf | None) -> _Tokens:
        if isinstance(values, NameTokens):
            return self._text(values, line_of)
        if isinstance(values, np.ndarray):
            if values.dtype.kind not in "iu":
                raise TypeError(f"{role} ids must be integers, got {values.dtype}")
            return _Tokens(values.astype(np.int64, copy=False), None)
        if isinstance(values, list):
            return self._python(values, role, line_of)
        try:
            integers, tokens = arrow_column(values, role)
        except _RowError as error:
            raise GraphFormatError(error.message, line=line_of(error.row) if line_of else None) from None
        if integers is not None:
            return _Tokens(integers, None)
        assert tokens is not None
        return self._text(tokens, line_of)

    def _python(self, values: list[Any], role: str, line_of: LineOf | None) -> _Tokens:
        kinds = set(map(type, values))
        if kinds <= {int} and values:
            if all(-(2**63) <= value < 2**63 for value in (min(values), max(values))):
                return _Tokens(np.array(values, dtype=np.int64), None)
            raise GraphFormatError(f"{role} names must fit 64-bit integers; {max(values, key=abs)} does not")
        if kinds <= {str}:
            return _Tokens(None, NameTokens.from_strings(values))
        for row, value in enumerate(values):
            if not isinstance(value, (int, str)) or isinstance(value, bool):
                raise GraphFormatError(
                    f"node names must be integers or strings, got {value!r}", line=line_of(row) if line_of else None
                )
        raise GraphFormatError("node names must be all integers or all strings, not a mix")

    def _text(self, tokens: NameTokens, line_of: LineOf | None) -> _Tokens:
        starts = tokens.starts.astype(np.int64)  # copies: trimming writes them
        ends = tokens.ends.astype(np.int64)
        values = np.empty(starts.size, dtype=np.int64)
        outcome = _parse_tokens(tokens.data, starts, ends, values, self.trim)
        text = NameTokens(tokens.data, starts, ends)
        if outcome == _TEXT or self.strings:
            # Integers hold no line break: only text names are looked at.
            if not self.line_breaks and _has_line_break(tokens.data):
                self._line_break(tokens, starts, ends, line_of)
            return _Tokens(None, text)
        return _Tokens(values, text, canonical=outcome == _CANONICAL)

    def _line_break(self, tokens: NameTokens, starts: np.ndarray, ends: np.ndarray, line_of: LineOf | None) -> None:
        data = tokens.data
        for row in range(starts.size):
            name = data[starts[row] : ends[row]]
            if np.any(name == 10) or np.any(name == 13):
                raise GraphFormatError(
                    "a node name holds a line break: is a quote left open?", line=line_of(row) if line_of else None
                )

    def _settle_kind(self, columns: list[_Tokens]) -> None:
        """Names are all integers or all strings: text columns that are not all integers turn the graph to
        strings, earlier integers included."""
        textual = any(c.integers is None for c in columns) or self.strings
        if self._kind is None:
            self._kind = "str" if textual else "int"
        elif self._kind == "int" and textual:
            self._to_strings()
        if self._kind == "int":
            self._canonical &= all(c.canonical for c in columns)

    def _to_strings(self) -> None:
        """The integer names so far become their decimal strings, keeping their ids (exact only when every one
        was written that way: otherwise the read starts again)."""
        if not self._canonical:
            raise RestartAsStrings
        import pyarrow as pa

        count = self._interner.count
        keys = self._interner.finish().keys
        interner = NameInterner(self.max_name_bytes)
        if count:
            _, tokens = arrow_column(pa.array(keys).cast(pa.string()), "node")
            assert tokens is not None
            interner.add_strings(tokens)
        self._interner = interner
        self._kind = "str"

    def _ids(self, column: _Tokens, line_of: LineOf | None) -> np.ndarray:
        if self._kind == "int":
            assert column.integers is not None
            return self._interner.add_integers(column.integers)
        tokens = column.tokens
        if tokens is None:  # integers of a typed column in a graph of string names
            import pyarrow as pa

            assert column.integers is not None
            _, tokens = arrow_column(pa.array(column.integers).cast(pa.string()), "node")
            assert tokens is not None
        return self._interner.add_strings(tokens, lines=line_of)

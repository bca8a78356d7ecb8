"""One exception root, ``GrailError``, for everything grail_core raises on bad input or bad state.

Each kind has a stable ``kind`` (its name, what an error answer or a record calls it) and a ``category``
that says whose fault it is and what would help, without HTTP: the service maps categories to status codes
in one table (``service.errors``).
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum
from typing import Any, ClassVar, NamedTuple

__all__ = [
    "Category",
    "GrailError",
    "InvalidParameterError",
    "GraphFormatError",
    "UnknownNodeError",
    "UnknownName",
    "UpdateConflictError",
    "IndexFileError",
    "BackendUnavailableError",
    "InputTooLargeError",
    "SearchStopped",
    "CORE_ERRORS",
]


class Category(str, Enum):
    """What kind of failure an error is."""

    INVALID = "invalid"  # the caller's input or a parameter is wrong: fix it and ask again
    NOT_FOUND = "not_found"  # it names something that does not exist
    CONFLICT = "conflict"  # it does not fit the state of what it changes
    TOO_LARGE = "too_large"  # the input is larger than allowed
    UNSUPPORTED = "unsupported"  # what was asked for cannot run on this machine
    DAMAGED = "damaged"  # stored data is missing or corrupt: not the caller's fault


class GrailError(Exception):
    """Base class of every error grail_core raises deliberately."""

    kind: ClassVar[str] = "GrailError"
    category: ClassVar[Category] = Category.INVALID

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        cls.kind = cls.__name__


class InvalidParameterError(GrailError, ValueError):
    """A parameter is out of its allowed range (dims, seed, format name, backend, an update's edges ...)."""


class GraphFormatError(GrailError, ValueError):
    """The graph input is malformed; ``line`` is the 1-based line number when one applies."""

    def __init__(self, message: str, line: int | None = None) -> None:
        self.message = message
        self.line = line
        super().__init__(f"line {line}: {message}" if line is not None else message)


class UnknownName(NamedTuple):
    """Where a batch names a node the graph does not have: the pair's 0-based index, which end, the name."""

    pair: int
    end: str  # "source" or "target"
    name: Any


class UnknownNodeError(GrailError, KeyError):
    """A query names a node that the graph does not have. For a batch, ``unknown`` lists where (the first
    ones, in order) and ``count`` says how many names in all are unknown."""

    category = Category.NOT_FOUND

    def __init__(self, name: object, unknown: Sequence[UnknownName] = (), count: int | None = None) -> None:
        self.name = name
        self.unknown = tuple(unknown)
        self.count = max(len(self.unknown), 1) if count is None else count
        super().__init__(name)

    def __str__(self) -> str:
        if self.count <= 1:
            return f"unknown node {self.name!r}"
        first = self.unknown[0] if self.unknown else None
        where = f" ({first.end} of pair {first.pair})" if first is not None else ""
        return f"{self.count} names in the pairs are unknown nodes, the first {self.name!r}{where}"


class UpdateConflictError(InvalidParameterError):
    """An edge update that cannot apply to this graph: a name its nodes cannot have (a string for a graph of
    integer names), an edge both added and removed, or more nodes than a graph with updates holds."""

    category = Category.CONFLICT


class IndexFileError(GrailError):
    """An index directory is missing, truncated, corrupted or of an unknown format version."""

    category = Category.DAMAGED


class BackendUnavailableError(GrailError):
    """A backend cannot run here: forced (e.g. cuda) on a machine without it, or a GPU build that cannot take
    the graph (the build then runs on the CPU)."""

    category = Category.UNSUPPORTED


class InputTooLargeError(GrailError):
    """The graph input (after decompression) is larger than the caller allowed."""

    category = Category.TOO_LARGE


class SearchStopped(GrailError):
    """A query's ``stop`` condition held between its searches of the updated graph: it has no answers. Only a
    caller that passed ``stop`` sees it, and asks another version (one whose labels fold the updates in)."""

    category = Category.CONFLICT


# Every kind grail_core raises on bad input or bad state (``SearchStopped`` is its callers' own request).
CORE_ERRORS: tuple[type[GrailError], ...] = (
    InvalidParameterError,
    GraphFormatError,
    UnknownNodeError,
    UpdateConflictError,
    IndexFileError,
    BackendUnavailableError,
    InputTooLargeError,
)

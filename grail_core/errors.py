"""One exception root, ``GrailError``, for everything grail_core raises on bad input or bad state.

Each kind has a stable ``kind`` (its name, what an error answer or a record calls it) and a ``category``
that says whose fault it is and what would help, without HTTP: the service maps categories to status codes
in one table (``service.errors``).
"""

from __future__ import annotations

from enum import Enum
from typing import ClassVar

__all__ = [
    "Category",
    "GrailError",
    "InvalidParameterError",
    "GraphFormatError",
    "UnknownNodeError",
    "IndexFileError",
    "BackendUnavailableError",
    "InputTooLargeError",
    "CORE_ERRORS",
]


class Category(str, Enum):
    """What kind of failure an error is."""

    INVALID = "invalid"  # the caller's input or a parameter is wrong: fix it and ask again
    NOT_FOUND = "not_found"  # it names something that does not exist
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


class UnknownNodeError(GrailError, KeyError):
    """A query names a node that the graph does not have."""

    category = Category.NOT_FOUND

    def __init__(self, name: object) -> None:
        self.name = name
        super().__init__(name)

    def __str__(self) -> str:
        return f"unknown node {self.name!r}"


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


# Every kind grail_core raises.
CORE_ERRORS: tuple[type[GrailError], ...] = (
    InvalidParameterError,
    GraphFormatError,
    UnknownNodeError,
    IndexFileError,
    BackendUnavailableError,
    InputTooLargeError,
)

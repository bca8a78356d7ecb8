"""One exception hierarchy for everything grail_core raises on bad input or bad state."""

from __future__ import annotations


class GrailError(Exception):
    """Base class of every error grail_core raises deliberately."""


class InvalidParameterError(GrailError, ValueError):
    """A parameter is out of its allowed range (dims, seed, format name, backend ...)."""


class GraphFormatError(GrailError, ValueError):
    """The graph input is malformed; ``line`` is the 1-based line number when one applies."""

    def __init__(self, message: str, line: int | None = None) -> None:
        self.message = message
        self.line = line
        super().__init__(f"line {line}: {message}" if line is not None else message)


class UnknownNodeError(GrailError, KeyError):
    """A query names a node that the graph does not have."""

    def __init__(self, name: object) -> None:
        self.name = name
        super().__init__(name)

    def __str__(self) -> str:
        return f"unknown node {self.name!r}"


class IndexFileError(GrailError):
    """An index directory is missing, truncated, corrupted or of an unknown format version."""


class BackendUnavailableError(GrailError):
    """A backend was forced (e.g. cuda) but cannot run on this machine."""


class InputTooLargeError(GrailError):
    """The graph input (after decompression) is larger than the caller allowed."""

"""A graph input as a stream of text: a path, bytes or a binary file, gzip-compressed or not.

``InputSource`` opens the input as often as a reader needs (a reader that finds its names were not what the
first blocks promised starts again), decompresses gzip members as they stream, and stops at ``max_bytes`` of
text: a small gzip body never expands into memory, and no reader holds more than a block of the text unless its
format needs the whole (``.gra``, JSON, Parquet footers).
"""

from __future__ import annotations

import io
import os
import zlib
from collections.abc import Callable
from typing import Any, BinaryIO, cast

from ..errors import GraphFormatError, InputTooLargeError

__all__ = ["GraphSource", "InputSource", "TextStream", "ReadProgress", "GZIP_MAGIC", "BLOCK_BYTES"]

GraphSource = str | os.PathLike[str] | bytes | bytearray | memoryview | BinaryIO

GZIP_MAGIC = b"\x1f\x8b"
# What a stream reads from its input at a time; the CSV reader's blocks are a few of these.
BLOCK_BYTES = 1 << 20

Transform = Callable[[bytes], bytes]
# The fraction of a file read so far (by position in the file, compressed or not): reported as it grows.
ReadProgress = Callable[[float], None]


class InputSource:
    """Where a graph's bytes come from, opened afresh from the start by every ``open()``. ``progress``: told
    how far into a file (a path) its readers are."""

    def __init__(self, source: GraphSource, max_bytes: int | None = None, progress: ReadProgress | None = None) -> None:
        self.max_bytes = max_bytes
        self.progress = progress
        self._reported = 0.0
        self.path: str | None = None
        self.name: str | None = None
        self._data: bytes | memoryview | None = None
        self._file: BinaryIO | None = None
        self._start = 0
        if isinstance(source, (bytes, bytearray, memoryview)):
            self._data = memoryview(source).cast("B") if not isinstance(source, bytes) else source
        elif isinstance(source, (str, os.PathLike)):
            self.path = self.name = os.fspath(source)
        elif source.seekable():
            self._file, self._start = source, source.tell()
            self.name = getattr(source, "name", None)
        else:  # a pipe or a socket: read once, kept
            self._data = source.read()
            self.name = getattr(source, "name", None)
        with self._raw() as raw:
            self.compressed = raw.read(2) == GZIP_MAGIC
        self._head = b""
        self._head_complete = False
        if not self.compressed:
            _check_size(self.size or 0, max_bytes, compressed=False)

    def _report(self, done: float) -> None:
        # Every open of the file reports; the reader hears only of progress (a reader that starts again, or
        # the look at the file's head, is not a step back).
        if done > self._reported:
            self._reported = done
            assert self.progress is not None
            self.progress(done)

    @property
    def size(self) -> int | None:
        """The size of the text where it is known without reading it (a plain file or bytes)."""
        if self.compressed:
            return None
        if self._data is not None:
            return len(self._data)
        if self.path is not None:
            return os.path.getsize(self.path)
        return None

    def _raw(self) -> BinaryIO:
        if self._data is not None:
            return io.BytesIO(self._data)
        if self.path is not None:
            return _ReportedFile(self.path, self._report) if self.progress is not None else open(self.path, "rb")
        assert self._file is not None
        self._file.seek(self._start)
        return cast(BinaryIO, _Borrowed(self._file))

    def open(self, skip: int = 0, transform: Transform | None = None) -> TextStream:
        """The text from byte ``skip`` on, each block passed through ``transform`` when given."""
        return TextStream(self._raw(), self.compressed, self.max_bytes, skip, transform)

    def arrow_stream(self, skip: int = 0) -> Any:
        """The text from byte ``skip`` on as a pyarrow input stream: the file or buffer itself where it is plain
        (pyarrow reads it without Python in between), else ``open(skip)``."""
        import pyarrow as pa

        if self.compressed or (self.path is None and self._data is None):
            return self.open(skip)
        if self.path is not None and self.progress is not None:
            stream = pa.PythonFile(_ReportedFile(self.path, self._report), mode="r")
        else:
            stream = pa.OSFile(self.path) if self.path is not None else pa.BufferReader(self._data)
        stream.seek(skip)
        return stream

    def head(self, size: int) -> tuple[bytes, bool]:
        """The first ``size`` bytes of the text, and whether they are all of it."""
        if len(self._head) < size and not self._head_complete:
            with self.open() as stream:
                self._head = stream.read(size)
                self._head_complete = len(self._head) < size or not stream.read(1)
        return self._head[:size], self._head_complete and size >= len(self._head)

    def read_all(self) -> bytes:
        """The whole text (for the formats whose parsers take it whole)."""
        if not self.compressed and self._data is not None:
            _check_size(len(self._data), self.max_bytes, compressed=False)
            return bytes(self._data)
        with self.open() as stream:
            return stream.read()

    def arrow_input(self) -> Any:
        """A random-access pyarrow input (Parquet and Arrow files have their index at the end)."""
        import pyarrow as pa

        if self.compressed or (self.path is None and self._data is None):
            return pa.BufferReader(self.read_all())
        if self.path is not None:
            _check_size(os.path.getsize(self.path), self.max_bytes, compressed=False)
            return pa.memory_map(self.path)
        assert self._data is not None
        _check_size(len(self._data), self.max_bytes, compressed=False)
        return pa.BufferReader(self._data)


def _check_size(size: int, max_bytes: int | None, compressed: bool) -> None:
    if max_bytes is not None and size > max_bytes:
        if compressed:
            raise InputTooLargeError(f"the graph decompresses to more than {max_bytes} bytes")
        raise InputTooLargeError(f"the graph is larger than {max_bytes} bytes")


class _ReportedFile(io.FileIO):
    """A file that tells ``progress`` how far into it reads have come, in steps of a hundredth."""

    def __init__(self, path: str, progress: ReadProgress) -> None:
        super().__init__(path, "rb")
        self._progress = progress
        self._size = max(os.fstat(self.fileno()).st_size, 1)
        self._told = 0.0

    def _tell_progress(self) -> None:
        done = min(self.tell() / self._size, 1.0)
        if done >= self._told + 0.01 or (done == 1.0 and self._told < 1.0):
            self._told = done
            self._progress(done)

    def read(self, size: int | None = -1) -> bytes:
        data = super().read(size)
        self._tell_progress()
        return data

    def readinto(self, buffer: Any) -> int:
        count = super().readinto(buffer)
        self._tell_progress()
        return count


class _Borrowed(io.RawIOBase):
    """A caller's file object, read but not closed."""

    def __init__(self, file: BinaryIO) -> None:
        self._file = file

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        return self._file.read(size)


class TextStream(io.RawIOBase):
    """The text of an input, read front to back: gzip members decompressed as they come, the size capped,
    the first ``skip`` bytes dropped, every block passed through ``transform``. A file object for pyarrow and
    for the readers alike."""

    def __init__(
        self, raw: BinaryIO, compressed: bool, max_bytes: int | None, skip: int, transform: Transform | None
    ) -> None:
        self._raw_file = raw
        self._compressed = compressed
        self._max_bytes = max_bytes
        self._skip = skip
        self._transform = transform
        self._inflater = zlib.decompressobj(16 + zlib.MAX_WBITS) if compressed else None
        self._feed = b""  # compressed bytes not yet taken by the inflater
        self.text_bytes = 0  # text read so far (before skip and transform)

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        if not self.closed:
            self._raw_file.close()
        super().close()

    def _text(self, size: int) -> bytes:
        """Up to ``size`` bytes of text (fewer only at the end)."""
        if self._inflater is None:
            data = self._raw_file.read(size)
        else:
            data = self._inflate(size)
        self.text_bytes += len(data)
        _check_size(self.text_bytes, self._max_bytes, self._compressed)
        return data

    def _inflate(self, size: int) -> bytes:
        assert self._inflater is not None
        parts: list[bytes] = []
        wanted = size
        while wanted > 0:
            if self._inflater.eof:  # a member ended: another may follow, or zero padding, or nothing
                rest = self._inflater.unused_data or self._raw_file.read(BLOCK_BYTES)
                if len(rest) == 1:
                    rest += self._raw_file.read(BLOCK_BYTES)
                if not rest:
                    break
                if not rest.startswith(GZIP_MAGIC):
                    if rest.strip(b"\0") or self._raw_file.read(BLOCK_BYTES).strip(b"\0"):
                        raise GraphFormatError("corrupt gzip data: bytes after the end of the compressed stream")
                    break
                self._inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
                self._feed = rest
            if not self._feed:
                self._feed = self._raw_file.read(BLOCK_BYTES)
                if not self._feed:
                    raise GraphFormatError("corrupt gzip data: the compressed stream ends early")
            try:
                out = self._inflater.decompress(self._feed, wanted)
            except zlib.error as error:
                raise GraphFormatError(f"corrupt gzip data: {error}") from None
            self._feed = self._inflater.unconsumed_tail
            parts.append(out)
            wanted -= len(out)
        return b"".join(parts)

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            return b"".join(iter(lambda: self.read(BLOCK_BYTES * 16), b""))
        while self._skip:
            dropped = self._text(min(self._skip, BLOCK_BYTES))
            if not dropped:
                return b""
            self._skip -= len(dropped)
        data = self._text(size)
        if self._transform is not None and data:
            return self._transform(data)
        return data

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

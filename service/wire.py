"""The batch formats of ``POST /graphs/{id}/queries`` that the server and the client both speak.

Binary pairs: ``Content-Type: application/octet-stream; width=W``, little-endian signed integers of W bits
(64, 32 or 16; no parameter means 64), source and target alternating. Binary answers: ``Accept:
application/octet-stream`` gives one byte 0/1 per pair, ``application/octet-stream; width=1`` one bit per
pair, packed as ``numpy.packbits`` does (first pair in the high bit of the first byte, zero-padded to whole
bytes). The narrowest width that holds the names sends a quarter of the bytes of int64 for graphs of up
to 32,767 nodes, and bit answers an eighth of byte answers: little on loopback (within the noise of
benchmarks/bench_service.py), the transfer time itself on a network.

Text: ``u v`` lines in, ``0``/``1`` lines out.

Versions: a read of a graph that needs version N or a newer one (read-your-writes through another replica) says
so with ``Grail-Min-Version: N`` or ``min_version=N`` (service.freshness).
"""

from __future__ import annotations

import json

import numpy as np

__all__ = [
    "BINARY",
    "PAIR_WIDTHS",
    "ANSWER_WIDTHS",
    "DEFAULT_PAIR_WIDTH",
    "DEFAULT_ANSWER_WIDTH",
    "media_type",
    "binary_type",
    "pair_dtype",
    "narrowest_width",
    "pack_answers",
    "unpack_answers",
    "text_integers",
    "answer_lines",
    "json_answers",
    "MIN_VERSION_HEADER",
    "MIN_VERSION_PARAMETER",
    "compact_json",
]

# One encoder for every compact JSON text: json.dumps with separators makes a new one per call, which costs as
# much as encoding an edge update's answer.
_COMPACT = json.JSONEncoder(separators=(",", ":"))


def compact_json(value: object) -> str:
    """``json.dumps(value, separators=(",", ":"))``, without an encoder made per call."""
    return _COMPACT.encode(value)


BINARY = "application/octet-stream"
MIN_VERSION_HEADER = "Grail-Min-Version"
MIN_VERSION_PARAMETER = "min_version"
PAIR_WIDTHS = (16, 32, 64)
ANSWER_WIDTHS = (1, 8)
DEFAULT_PAIR_WIDTH = 64
DEFAULT_ANSWER_WIDTH = 8
_INT64 = np.iinfo(np.int64)


def media_type(header: str) -> tuple[str, dict[str, str]]:
    """``type/subtype`` (lower case) and the parameters of a Content-Type or Accept item."""
    kind, *params = header.split(";")
    pairs = (param.partition("=") for param in params)
    return kind.strip().lower(), {name.strip().lower(): value.strip().strip('"') for name, _, value in pairs}


def binary_type(width: int, default: int) -> str:
    """The Content-Type of binary pairs or answers of ``width`` bits; the bare type for the default width."""
    return BINARY if width == default else f"{BINARY}; width={width}"


def pair_dtype(width: int) -> np.dtype:
    return np.dtype(f"<i{width // 8}")


def narrowest_width(pairs: np.ndarray) -> int | None:
    """The fewest bits of PAIR_WIDTHS that hold every name of an integer array; None past 64 bits."""
    if pairs.size == 0:
        return PAIR_WIDTHS[0]
    low, high = int(pairs.min()), int(pairs.max())
    for width in PAIR_WIDTHS:
        limits = np.iinfo(pair_dtype(width))
        if limits.min <= low and high <= limits.max:
            return width
    return None


def pack_answers(answers: np.ndarray, width: int) -> np.ndarray:
    """Answers as uint8: one byte 0/1 each (width 8) or one bit each (width 1)."""
    flags = answers.astype(np.bool_, copy=False)
    return np.packbits(flags) if width == 1 else flags.view(np.uint8)


def unpack_answers(data: bytes, count: int, width: int) -> np.ndarray:
    """The bool answers of ``count`` pairs from their binary encoding; ValueError when the length is wrong."""
    expected = (count + 7) // 8 if width == 1 else count
    if width not in ANSWER_WIDTHS or len(data) != expected:
        raise ValueError(f"{len(data)} bytes of answers of width {width} for {count} pairs")
    raw = np.frombuffer(data, dtype=np.uint8)
    return np.unpackbits(raw, count=count).view(np.bool_) if width == 1 else raw.astype(np.bool_)


def text_integers(body: bytes) -> np.ndarray | None:
    """All whitespace-separated integers of a text, parsed in C (not through Python strings); None when some
    name is not a plain integer, for the general path."""
    try:
        numbers = np.fromstring(body, dtype=np.int64, sep=" ")
    except ValueError:
        return None
    # The C parser saturates on overflow instead of failing: let such names take the exact general path.
    if numbers.size and (numbers.max() == _INT64.max or numbers.min() == _INT64.min):
        return None
    return numbers


def answer_lines(answers: np.ndarray, missing: np.ndarray | None = None) -> bytes:
    """Answers as ``0``/``1`` lines; ``null`` lines where ``missing`` marks a pair naming an unknown node."""
    out = np.empty(2 * answers.size, dtype=np.uint8)
    out[0::2] = answers.astype(np.uint8, copy=False) + ord("0")
    out[1::2] = ord("\n")
    if missing is None:
        return out.tobytes()
    lines = np.array([b"0\n", b"1\n", b"null\n"], dtype=object)
    return b"".join(lines[np.where(missing, 2, answers.astype(np.uint8))].tolist())


# Every JSON answer as eight bytes, one uint64 (JSON allows the spaces).
_JSON_TRUE, _JSON_FALSE, _JSON_NULL = np.frombuffer(b"true,   false,  null,   ", dtype=np.uint64)


def json_answers(answers: np.ndarray, stats: dict[str, object], missing: np.ndarray | None = None) -> bytes:
    """``{"reachable": [...], "stats": {...}}`` with every answer written as the eight bytes ``true,   ``,
    ``false,  `` (or ``null,   `` where ``missing`` marks it): one vectorized select instead of a Python bool
    per answer."""
    words = np.where(answers, _JSON_TRUE, _JSON_FALSE)
    if missing is not None:
        words[missing] = _JSON_NULL
    listed = words.tobytes().rstrip(b", ")
    return b"".join((b'{"reachable":[', listed, b'],"stats":', compact_json(stats).encode(), b"}"))

"""Query pairs in and answers out, in the encodings the queries routes speak (JSON, text lines, binary).

Only the shape is checked here; whether the names exist is the index's business (UnknownNodeError). Names in
text and JSON bodies become ``NameTokens`` (service.textscan), which the index looks up in one pass.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from grail_core.names import NameTokens, utf8_error

from .conventions import negotiate
from .errors import (
    BAD_JSON,
    BAD_PAIRS,
    BAD_TEXT,
    TOO_MANY_PAIRS,
    UNKNOWN_FORMAT,
    UNSUPPORTED_ANSWER_WIDTH,
    UNSUPPORTED_PAIR_WIDTH,
    ErrorKind,
    ServiceError,
)
from .textscan import json_pairs, words
from .wire import (
    ANSWER_WIDTHS,
    BINARY,
    DEFAULT_ANSWER_WIDTH,
    DEFAULT_PAIR_WIDTH,
    PAIR_WIDTHS,
    answer_lines,
    binary_type,
    media_type,
    pack_answers,
    pair_dtype,
)

__all__ = [
    "BINARY",
    "parse_get_pairs",
    "pair_format",
    "decode_pairs",
    "answer_type",
    "encode_answers",
    "batch_memory",
]

# The memory a batch takes to answer, in bytes of its body: binary pairs are read in place (ids, answers and
# their encoding beside them); text and JSON names are scanned into spans of the body (two int64 a name) and
# ids; JSON that is not plain names becomes Python objects. See benchmarks/bench_hardening.py.
_BATCH_MEMORY_FACTOR = {"binary": 3, "text": 12, "json": 16}

_ANSWER_TYPES = ("application/json", "text/plain", BINARY)


def parse_get_pairs(text: str, limit: int) -> list[tuple[str, str]]:
    """``U1,V1;U2,V2;...`` from a query string."""
    pairs: list[tuple[str, str]] = []
    for number, item in enumerate(filter(None, text.split(";")), start=1):
        parts = item.split(",")
        if len(parts) != 2 or not parts[0] or not parts[1]:
            raise ServiceError(BAD_PAIRS, f"pair {number} ({item!r}) is not 'source,target'")
        pairs.append((parts[0], parts[1]))
    if not pairs:
        raise ServiceError(BAD_PAIRS, "pairs is empty; give ?pairs=U1,V1;U2,V2 or ?source=U&target=V")
    if len(pairs) > limit:
        raise ServiceError(
            TOO_MANY_PAIRS, f"{len(pairs)} pairs in one GET (limit {limit}); POST them to /graphs/{{id}}/queries"
        )
    return pairs


def pair_format(content_type: str) -> tuple[str, int | None]:
    """The media type of a pairs body and, for binary pairs (service.wire), their width in bits; 415 for a
    type or a width this service does not read, so that the route refuses it before the transfer."""
    media, params = media_type(content_type)
    if media == BINARY:
        return media, _width(params, PAIR_WIDTHS, DEFAULT_PAIR_WIDTH, UNSUPPORTED_PAIR_WIDTH, "pairs")
    if media == "application/json" or media.startswith("text/"):
        return media, None
    raise ServiceError(
        UNKNOWN_FORMAT,
        f"cannot read pairs from Content-Type {media!r}; use application/json, text/plain or {BINARY}",
    )


def batch_memory(media: str, width: int | None) -> int:
    """Bytes of memory per body byte that answering a batch of this media type takes, at most."""
    if width is not None:
        return _BATCH_MEMORY_FACTOR["binary"]
    return _BATCH_MEMORY_FACTOR["json" if media == "application/json" else "text"]


def decode_pairs(body: bytes | np.ndarray, content_type: str) -> np.ndarray | NameTokens | list[Any]:
    """The pairs of a POST body (Content-Type header as sent), in a form the index accepts: an (M, 2) integer
    array (binary, read in place without a copy), NameTokens of 2M names (text, and JSON whose names are
    strings and integers), or a list of pairs (any other JSON)."""
    media, width = pair_format(content_type)
    if width is not None:
        pair_bytes = 2 * width // 8
        if len(body) % pair_bytes:
            raise ServiceError(
                BAD_PAIRS,
                f"a binary body of width {width} is pairs of {pair_bytes} bytes: its {len(body)} bytes are not "
                f"a multiple of {pair_bytes}",
            )
        return np.frombuffer(body, dtype=pair_dtype(width)).reshape(-1, 2)
    if media == "application/json":
        tokens = json_pairs(body)
        if tokens is not None:
            return tokens
        try:
            data = json.loads(body.tobytes() if isinstance(body, np.ndarray) else body)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ServiceError(BAD_JSON, f"the body is not valid JSON: {exc}") from None
        except RecursionError:
            raise ServiceError(BAD_JSON, "the body is not valid JSON: it is nested too deeply") from None
        pairs = data.get("pairs") if isinstance(data, dict) else None
        if not isinstance(pairs, list) or not all(isinstance(p, list) and len(p) == 2 for p in pairs):
            raise ServiceError(BAD_PAIRS, 'the body must be {"pairs": [[source, target], ...]}')
        for number, pair in enumerate(pairs, start=1):
            # Numbers and strings go to the index, which knows its names; anything else names no node.
            if not all(isinstance(name, int | float | str) and not isinstance(name, bool) for name in pair):
                raise ServiceError(BAD_PAIRS, f"pair {number}: a node name is a number or a string, not {pair!r}")
        return pairs
    tokens = words(body)
    bad = utf8_error(tokens.data)  # whitespace is ASCII: the names are UTF-8 when the whole body is
    if bad is not None:
        name = int(np.searchsorted(tokens.starts, bad, side="right")) - 1
        raise ServiceError(BAD_TEXT, f"the body is not UTF-8 text: name {name + 1} ({tokens.text(name)!r})")
    if len(tokens) % 2:
        raise ServiceError(BAD_PAIRS, f"the body has {len(tokens)} names; it needs 'source target' lines")
    return tokens


def answer_type(accept: str | None) -> str:
    """The Content-Type of the answers, by content negotiation over JSON, text/plain and binary (service.conventions:
    q-values, 406 when none is acceptable); 406 too for binary answers of a width that service.wire does not
    define."""
    media, params = negotiate(accept, _ANSWER_TYPES)
    if media == BINARY:
        width = _width(params, ANSWER_WIDTHS, DEFAULT_ANSWER_WIDTH, UNSUPPORTED_ANSWER_WIDTH, "answers")
        return binary_type(width, DEFAULT_ANSWER_WIDTH)
    return media


def _width(params: dict[str, str], allowed: tuple[int, ...], default: int, kind: ErrorKind, what: str) -> int:
    raw = params.get("width", str(default))
    if not raw.isdigit() or int(raw) not in allowed:
        choices = ", ".join(map(str, allowed[:-1])) + f" or {allowed[-1]}"
        raise ServiceError(kind, f"binary {what} have a width of {choices} bits, not {raw!r}")
    return int(raw)


def encode_answers(answers: np.ndarray, content_type: str, missing: np.ndarray | None = None) -> bytes | memoryview:
    """Answers as ``0``/``1`` lines (text; ``null`` where ``missing`` marks a pair) or binary (service.wire,
    which has no null), for a Content-Type from answer_type."""
    media, params = media_type(content_type)
    if media == BINARY:
        return pack_answers(answers, int(params.get("width", DEFAULT_ANSWER_WIDTH))).data
    return answer_lines(answers, missing)

"""Query pairs in and answers out, in the encodings the queries routes speak (JSON, text lines, binary).

Only the shape is checked here; whether the names exist is the index's business (UnknownNodeError).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from .errors import ServiceError

__all__ = ["BINARY", "parse_get_pairs", "decode_pairs", "encode_answers", "wants"]

# Pairs as little-endian int64 (source, target), answers as one byte 0/1 each: no parsing at all, for
# integer-named graphs and clients that hold their pairs in numpy already.
BINARY = "application/octet-stream"
_INT64 = np.iinfo(np.int64)
_NUMBER_AND_SPACE = b"0123456789- \t\r\n"
_JSON_HEAD, _JSON_TAIL = b'{"pairs":[', b"]}"
_BRACKETS_TO_SPACE = bytes.maketrans(b"[],", b"   ")


def parse_get_pairs(text: str, limit: int) -> list[tuple[str, str]]:
    """``U1,V1;U2,V2;...`` from a query string."""
    pairs: list[tuple[str, str]] = []
    for number, item in enumerate(filter(None, text.split(";")), start=1):
        parts = item.split(",")
        if len(parts) != 2 or not parts[0] or not parts[1]:
            raise ServiceError(422, "BadPairs", f"pair {number} ({item!r}) is not 'source,target'")
        pairs.append((parts[0], parts[1]))
    if not pairs:
        raise ServiceError(422, "BadPairs", "pairs is empty; give ?pairs=U1,V1;U2,V2 or ?source=U&target=V")
    if len(pairs) > limit:
        raise ServiceError(
            422, "TooManyPairs", f"{len(pairs)} pairs in one GET (limit {limit}); POST them to /graphs/{{id}}/queries"
        )
    return pairs


def decode_pairs(body: bytes, media_type: str) -> Any:
    """The pairs of a POST body: an (M, 2) array or a list of pairs, whatever the index accepts."""
    if media_type == BINARY:
        if len(body) % 16:
            raise ServiceError(
                422, "BadPairs", f"a binary body is int64 pairs: its {len(body)} bytes are not a multiple of 16"
            )
        return np.frombuffer(body, dtype="<i8").reshape(-1, 2)
    if media_type == "application/json":
        fast = _json_integer_pairs(body)
        if fast is not None:
            return fast
        try:
            data = json.loads(body)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ServiceError(422, "BadJSON", f"the body is not valid JSON: {exc}") from None
        pairs = data.get("pairs") if isinstance(data, dict) else None
        if not isinstance(pairs, list) or not all(isinstance(p, list) and len(p) == 2 for p in pairs):
            raise ServiceError(422, "BadPairs", 'the body must be {"pairs": [[source, target], ...]}')
        return pairs
    if media_type.startswith("text/"):
        numbers = _integers(body)
        if numbers is not None:
            if numbers.size % 2:
                raise ServiceError(
                    422, "BadPairs", f"the body has {numbers.size} names; it needs 'source target' lines"
                )
            return numbers.reshape(-1, 2)
        try:
            tokens = body.decode("utf-8").split()
        except UnicodeDecodeError as exc:
            raise ServiceError(422, "BadText", f"the body is not UTF-8 text: {exc}") from None
        if len(tokens) % 2:
            raise ServiceError(422, "BadPairs", f"the body has {len(tokens)} names; it needs 'source target' lines")
        return np.array(tokens, dtype=str).reshape(-1, 2)
    raise ServiceError(
        415,
        "UnknownFormat",
        f"cannot read pairs from Content-Type {media_type!r}; use application/json, text/plain or {BINARY}",
    )


def _integers(body: bytes) -> np.ndarray | None:
    """All whitespace-separated integers of the body, parsed in C (a million pairs in ~0.1 s instead of ~2 s
    through Python strings); None when some name is not a plain integer, for the general path."""
    try:
        numbers = np.fromstring(body, dtype=np.int64, sep=" ")
    except ValueError:
        return None
    # The C parser saturates on overflow instead of failing: let such names take the exact general path.
    if numbers.size and (numbers.max() == _INT64.max or numbers.min() == _INT64.min):
        return None
    return numbers


def _json_integer_pairs(body: bytes) -> np.ndarray | None:
    """``{"pairs": [[int, int], ...]}`` parsed in C, ten times faster than json.loads for a million pairs;
    None for any other shape or content (strings, floats, extra keys), which takes the exact general path.

    Once digits, signs and whitespace are deleted, such a body is exactly ``{"pairs":[[,],[,],...,[,]]}``;
    with that structure and two integers per pair, the numbers can be read in order ignoring the brackets.
    """
    structure = body.translate(None, _NUMBER_AND_SPACE)
    if not structure.startswith(_JSON_HEAD) or not structure.endswith(_JSON_TAIL):
        return None
    count = structure.count(b"[,]")
    if count == 0 or len(structure) != len(_JSON_HEAD) + len(_JSON_TAIL) + 4 * count - 1:
        return None
    if structure[len(_JSON_HEAD) : -len(_JSON_TAIL)] != b",".join([b"[,]"] * count):
        return None
    numbers = _integers(body[body.index(b"[") :].translate(_BRACKETS_TO_SPACE).rstrip(b"}\t\r\n "))
    if numbers is None or numbers.size != 2 * count:
        return None
    return numbers.reshape(-1, 2)


def wants(accept: str | None, media_type: str) -> bool:
    """Whether the Accept header asks for this media type before JSON (no q-value arithmetic needed here)."""
    if not accept:
        return False
    for item in accept.split(","):
        media = item.split(";", 1)[0].strip().lower()
        if media == media_type:
            return True
        if media in ("application/json", "*/*", "application/*"):
            return False
    return False


def encode_answers(answers: np.ndarray, media_type: str) -> bytes:
    """Answers as ``0``/``1`` lines (text) or bytes 0/1 (binary)."""
    flags = answers.astype(np.uint8, copy=False)
    if media_type == BINARY:
        return flags.tobytes()
    out = np.empty(2 * flags.size, dtype=np.uint8)
    out[0::2] = flags + ord("0")
    out[1::2] = ord("\n")
    return out.tobytes()

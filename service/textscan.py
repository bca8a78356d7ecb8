"""Query bodies split into name tokens in one numba pass over their bytes, without a Python object per name.

``words``: the names of a text body ('u v' lines), split at ASCII whitespace, as spans of the body itself.
``json_pairs``: the names of ``{"pairs": [[u, v], ...]}`` where every name is a string or an integer,
unescaped into one buffer (an integer as its digits: integer graphs parse them in the lookup, string graphs
read them as their decimal string); None for any other document, which then takes ``json.loads``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from grail_core.byteops import HIGH_BITS, has_byte, has_less, load_word, store_word, utf8_size
from grail_core.names import NameTokens

__all__ = ["words", "json_pairs"]

_QUOTE, _BACKSLASH, _COMMA, _COLON, _MINUS = 34, 92, 44, 58, 45
_OPEN_ARRAY, _CLOSE_ARRAY, _OPEN_OBJECT, _CLOSE_OBJECT = 91, 93, 123, 125
_PAIRS_KEY = np.frombuffer(b'"pairs"', dtype=np.uint8)
# The single-character escapes of JSON and the bytes they stand for (b f n r t, quote, backslash, slash).
_ESCAPES = np.zeros(256, dtype=np.int16) - 1
for _letter, _byte in zip(b'bfnrt"\\/', b'\b\f\n\r\t"\\/', strict=True):
    _ESCAPES[_letter] = _byte


@njit(inline="always")
def _is_space(c):
    # What bytes.split() splits at.
    return c == 32 or 9 <= c <= 13


@njit(nogil=True, cache=True)
def _words(body, starts, ends):
    count = 0
    i = 0
    while i < body.size:
        while i < body.size and _is_space(body[i]):
            i += 1
        if i == body.size:
            break
        starts[count] = i
        while i + 8 <= body.size and not has_less(load_word(body, i), 33):  # eight bytes of no space
            i += 8
        while i < body.size and not _is_space(body[i]):
            i += 1
        ends[count] = i
        count += 1
    return count


def words(body: bytes | np.ndarray) -> NameTokens:
    """The whitespace-separated names of a text body, as spans of the body (no copy)."""
    data = np.frombuffer(body, dtype=np.uint8)
    # Allocated here, not in numba: numpy gives large arrays huge pages, and only the pages used are touched.
    starts = np.empty(data.size // 2 + 1, dtype=np.int64)
    ends = np.empty_like(starts)
    count = _words(data, starts, ends)
    return NameTokens(data, starts[:count], ends[:count])


@njit(inline="always")
def _skip_space(body, i):
    # JSON's whitespace: space, tab, newline, carriage return.
    while i < body.size and (body[i] == 32 or body[i] == 9 or body[i] == 10 or body[i] == 13):
        i += 1
    return i


@njit(inline="always")
def _hex4(body, i):
    """The value of four hex digits at i, or -1."""
    if i + 4 > body.size:
        return -1
    value = 0
    for j in range(4):
        c = body[i + j]
        if 48 <= c <= 57:
            digit = c - 48
        elif 97 <= c <= 102:
            digit = c - 87
        elif 65 <= c <= 70:
            digit = c - 55
        else:
            return -1
        value = value * 16 + digit
    return value


@njit(inline="always")
def _put_utf8(out, k, code):
    """UTF-8 of a code point (a lone surrogate as its three bytes, as Python's 'surrogatepass' writes it)."""
    if code < 0x80:
        out[k] = code
        return k + 1
    if code < 0x800:
        out[k] = 0xC0 | (code >> 6)
        out[k + 1] = 0x80 | (code & 0x3F)
        return k + 2
    if code < 0x10000:
        out[k] = 0xE0 | (code >> 12)
        out[k + 1] = 0x80 | ((code >> 6) & 0x3F)
        out[k + 2] = 0x80 | (code & 0x3F)
        return k + 3
    out[k] = 0xF0 | (code >> 18)
    out[k + 1] = 0x80 | ((code >> 12) & 0x3F)
    out[k + 2] = 0x80 | ((code >> 6) & 0x3F)
    out[k + 3] = 0x80 | (code & 0x3F)
    return k + 4


@njit(inline="always")
def _string(body, i, out, k, escapes):
    """Unescape the JSON string whose opening quote is at i into out[k:]; (next i, next k), i = -1 when it
    is not a valid string or not UTF-8."""
    i += 1
    while i < body.size:
        while i + 8 <= body.size:  # eight plain ASCII bytes at a step: no quote, backslash or control byte
            word = load_word(body, i)
            if has_less(word, 0x20) or has_byte(word, _QUOTE) or has_byte(word, _BACKSLASH) or word & HIGH_BITS:
                break
            store_word(out, k, word)
            i += 8
            k += 8
        if i == body.size:
            break
        c = body[i]
        if c == _QUOTE:
            return i + 1, k
        if c < 0x20:
            return -1, k
        if c >= 0x80:
            size = utf8_size(body, i, body.size)
            if size == 0:
                return -1, k
            for j in range(size):
                out[k + j] = body[i + j]
            k += size
            i += size
            continue
        if c != _BACKSLASH:
            out[k] = c
            k += 1
            i += 1
            continue
        if i + 1 >= body.size:
            return -1, k
        e = body[i + 1]
        if e != 117:  # not \u
            if escapes[e] < 0:
                return -1, k
            out[k] = escapes[e]
            k += 1
            i += 2
            continue
        code = _hex4(body, i + 2)
        if code < 0:
            return -1, k
        i += 6
        if 0xD800 <= code < 0xDC00 and i + 1 < body.size and body[i] == _BACKSLASH and body[i + 1] == 117:
            low = _hex4(body, i + 2)
            if 0xDC00 <= low < 0xE000:
                code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                i += 6
        k = _put_utf8(out, k, code)
    return -1, k


@njit(inline="always")
def _integer(body, i, out, k):
    """Copy a JSON integer (no fraction, no exponent, not -0) into out[k:]; (next i, next k), i = -1 if not."""
    start = i
    if i < body.size and body[i] == _MINUS:
        i += 1
    digits = i
    while i < body.size and 48 <= body[i] <= 57:
        i += 1
    if i == digits or (body[digits] == 48 and i - digits > 1):
        return -1, k
    if i < body.size and (body[i] == 46 or body[i] == 101 or body[i] == 69):
        return -1, k
    if body[digits] == 48 and digits > start:
        return -1, k
    for j in range(start, i):
        out[k] = body[j]
        k += 1
    return i, k


@njit(nogil=True, cache=True)
def _json_pairs(body, key, escapes, out, starts, ends):
    """(count, ok): the names of a {"pairs": [[u, v], ...]} document unescaped into out, name i being
    out[starts[i]:ends[i]]; ok False for any other document."""
    count = 0
    k = 0
    i = _skip_space(body, 0)
    if i >= body.size or body[i] != _OPEN_OBJECT:
        return 0, False
    i = _skip_space(body, i + 1)
    if i + key.size > body.size:
        return 0, False
    for j in range(key.size):
        if body[i + j] != key[j]:
            return 0, False
    i = _skip_space(body, i + key.size)
    if i >= body.size or body[i] != _COLON:
        return 0, False
    i = _skip_space(body, i + 1)
    if i >= body.size or body[i] != _OPEN_ARRAY:
        return 0, False
    i = _skip_space(body, i + 1)
    if i < body.size and body[i] == _CLOSE_ARRAY:
        i += 1
    else:
        while True:
            if i >= body.size or body[i] != _OPEN_ARRAY:
                return 0, False
            for position in range(2):
                i = _skip_space(body, i + 1)
                if count == starts.size:
                    return 0, False
                starts[count] = k
                if i < body.size and body[i] == _QUOTE:
                    i, k = _string(body, i, out, k, escapes)
                else:
                    i, k = _integer(body, i, out, k)
                if i < 0:
                    return 0, False
                ends[count] = k
                count += 1
                i = _skip_space(body, i)
                if i >= body.size or body[i] != (_COMMA if position == 0 else _CLOSE_ARRAY):
                    return 0, False
            i = _skip_space(body, i + 1)
            if i < body.size and body[i] == _COMMA:
                i = _skip_space(body, i + 1)
                continue
            if i < body.size and body[i] == _CLOSE_ARRAY:
                i += 1
                break
            return 0, False
    i = _skip_space(body, i)
    if i >= body.size or body[i] != _CLOSE_OBJECT:
        return 0, False
    return count, _skip_space(body, i + 1) == body.size


@njit(nogil=True, cache=True)
def _count(data, byte):
    count = 0
    for c in data:
        count += c == byte
    return count


def json_pairs(body: bytes | np.ndarray) -> NameTokens | None:
    """The 2M names of ``{"pairs": [[u, v], ...]}`` with string or integer names, or None for any other
    document (other keys, floats, booleans, null, invalid UTF-8, malformed JSON), for ``json.loads`` to read
    exactly or to word the error."""
    data = np.frombuffer(body, dtype=np.uint8)
    # Every pair opens a bracket: twice their number bounds the names. Allocated by numpy (huge pages).
    bound = 2 * _count(data, _OPEN_ARRAY)
    out = np.empty(data.size, dtype=np.uint8)
    starts = np.empty(bound, dtype=np.int64)
    ends = np.empty_like(starts)
    count, ok = _json_pairs(data, _PAIRS_KEY, _ESCAPES, out, starts, ends)
    if not ok:
        return None
    return NameTokens(out[: ends[count - 1] if count else 0], starts[:count], ends[:count])

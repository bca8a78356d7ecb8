"""Node names as uploaded, and the mapping between names and internal node ids: an open-addressing hash table.

A graph's names are of one of three kinds:

- ``range``: the names are the ids 0..n-1 (``.gra`` files, ``from_edges``, edge lists naming exactly 0..n-1);
  no table at all.
- ``int``: int64 names, ``keys[id]``, and a table of ``(key, id)`` slots.
- ``str``: UTF-8 names stored compactly, ``data[offsets[id]:offsets[id + 1]]`` (storage proportional to the
  total length of the names), and a table of ``(64-bit hash, id)`` slots.

A table is a power-of-two array of 16-byte slots filled to at most 3/4 and probed linearly, so that a
lookup usually reads one cache line (plus the name's bytes for strings). Hashes are seeded per table. Every
array is plain numpy: the index files store them and load them memory-mapped. Lookups run in numba
(parallel, nogil) for batches, and one name at a time for single queries.

Turning parsed tokens into ids (the interface of the readers)
-------------------------------------------------------------
Ids are given in order of first appearance; the same table that maps names to ids during ingest answers the
queries afterwards.

- ``intern_integers(values) -> (names, ids)``: a whole int64 column (one array; concatenate chunks first,
  8 bytes a name). Names that are exactly 0..n-1 collapse to ``range`` (ids = names).
- ``NameInterner``: the incremental form, for chunked input. ``add_integers(values)`` or
  ``add_strings(tokens, lines=...)`` per chunk return that chunk's ids; ``finish()`` gives the ``NodeNames``.
  A graph's names are all integers or all strings (one interner takes one kind).
- ``intern_strings(tokens, lines=..., max_name_bytes=...) -> (names, ids)``: one string column.
- ``NameTokens(data, starts, ends)``: string names as UTF-8 byte spans of one buffer, token i being
  ``data[starts[i]:ends[i]]``; nothing is copied. ``NameTokens.from_offsets(data, offsets)`` takes the
  layout of an Arrow string array, e.g. for a ``pyarrow.StringArray`` (or ``LargeStringArray``) ``array``
  without nulls::

      _, offsets, data = array.buffers()
      offsets = np.frombuffer(offsets, np.int32)[array.offset : array.offset + len(array) + 1]  # int64: large
      tokens = NameTokens.from_offsets(np.frombuffer(data, np.uint8), offsets)

  ``NameTokens.from_strings(list_of_str)`` encodes Python strings.

String interning checks every new name once: a name longer than ``max_name_bytes`` (default
``MAX_NAME_BYTES``, 4 KiB), an empty name, or one that is not valid UTF-8 raises ``GraphFormatError``
naming the line, from ``lines`` (an array with the line of every token, or a function of the token's
position). Names are compared byte for byte: ``"a"`` and ``"a\\0"`` are two names.

Lookups (``NodeNames.lookup``, ``lookup_one``) raise ``UnknownNodeError`` naming the first unknown name.
Integer graphs take integers or their decimal strings (an optional sign and ASCII digits, parsed in the
same pass as the lookup); string graphs take strings, and read an integer as its decimal string. Booleans
are never names; neither are integers outside int64.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import njit, parallel_chunksize, prange

from .byteops import HIGH_BITS, load_word, parse_decimal, prefetch, utf8_size
from .errors import GraphFormatError, IndexFileError, UnknownNodeError
from .parallel import numba_threads

__all__ = [
    "MAX_NAME_BYTES",
    "NameTokens",
    "NodeNames",
    "NameInterner",
    "intern_integers",
    "intern_strings",
    "utf8_error",
]

MAX_NAME_BYTES = 4096

Lines = np.ndarray | Callable[[int], "int | None"] | None

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_M1 = np.uint64(0xFF51AFD7ED558CCD)
_M2 = np.uint64(0xC4CEB9FE1A85EC53)
_S33 = np.uint64(33)
_S32 = np.uint64(32)
_EMPTY = -1
_INITIAL_SLOTS = 1024
_INITIAL_BYTES = 1 << 16
# Batch loops work in blocks of _BLOCK names, handed to the threads one at a time as they free up: on a shared
# machine a thread the OS pauses must not hold back the whole batch, as a static split would.
_BLOCK = 4096
_AHEAD = 16
# Interning outcomes (numba returns codes; the Python side words the errors).
_OK, _TOO_LONG, _EMPTY_NAME, _BAD_UTF8 = range(4)


# ---- hashing and probing (numba) ------------------------------------------------------------------


@njit(inline="always")
def _mix(x):
    """MurmurHash3's 64-bit finalizer: a bijection that spreads every input bit over the whole word."""
    x ^= x >> _S33
    x *= _M1
    x ^= x >> _S33
    x *= _M2
    x ^= x >> _S33
    return x


@njit(inline="always")
def _hash_int(key, seed):
    return np.int64(_mix(np.uint64(key) ^ seed))


@njit(inline="always")
def _hash_bytes(data, start, end, seed):
    """A seeded 64-bit hash of ``data[start:end]``: eight bytes at a step, each folded in by one multiply, and
    the finalizer over the whole. The length goes in first, so names that differ only by trailing zero bytes
    differ. A name of eight bytes or more ends with the word that ends it (overlapping the last full one, its
    new bytes shifted down), so no byte is read one at a time."""
    h = seed ^ (np.uint64(end - start) * _M2)
    i = start
    while i + 8 <= end:
        h = _fold(h, load_word(data, i))
        i += 8
    if i < end:
        if end - start >= 8:
            tail = load_word(data, end - 8) >> np.uint64(8 * (8 - (end - i)))
        else:
            tail = np.uint64(0)
            shift = np.uint64(0)
            for j in range(i, end):
                tail |= np.uint64(data[j]) << shift
                shift += np.uint64(8)
        h = _fold(h, tail)
    return np.int64(_mix(h))


@njit(inline="always")
def _fold(h, word):
    h = (h ^ word) * _M1
    return h ^ (h >> _S32)


@njit(inline="always")
def _same_bytes(a, a_start, b, b_start, length):
    """a[a_start:a_start + length] == b[b_start:b_start + length], a word at a time (the last word overlapping)."""
    if length < 8:
        for j in range(length):
            if a[a_start + j] != b[b_start + j]:
                return False
        return True
    j = 0
    while j + 8 < length:
        if load_word(a, a_start + j) != load_word(b, b_start + j):
            return False
        j += 8
    return load_word(a, a_start + length - 8) == load_word(b, b_start + length - 8)


@njit(inline="always")
def _probe_int(slots, h, key):
    """The id of ``key`` whose hash is ``h``, or _EMPTY."""
    mask = slots.shape[0] - 1
    k = h & mask
    while True:
        node = slots[k, 1]
        if node == _EMPTY or slots[k, 0] == key:
            return node
        k = (k + 1) & mask


@njit(inline="always")
def _probe_bytes(slots, h, names_data, names_offsets, data, start, end):
    """The id of the name ``data[start:end]`` whose hash is ``h``, or _EMPTY."""
    mask = slots.shape[0] - 1
    k = h & mask
    length = end - start
    while True:
        node = slots[k, 1]
        if node == _EMPTY:
            return node
        if slots[k, 0] == h:
            name_start = names_offsets[node]
            if names_offsets[node + 1] - name_start == length and _same_bytes(
                names_data, name_start, data, start, length
            ):
                return node
        k = (k + 1) & mask


@njit(inline="always")
def _write_decimal(value, buffer):
    """The decimal digits of an int64 into the end of ``buffer`` (20 bytes); returns where they start."""
    i = buffer.size
    magnitude = np.uint64(0) - np.uint64(value) if value < 0 else np.uint64(value)
    while True:
        i -= 1
        buffer[i] = np.uint8(np.uint64(48) + magnitude % np.uint64(10))
        magnitude //= np.uint64(10)
        if magnitude == 0:
            break
    if value < 0:
        i -= 1
        buffer[i] = 45
    return i


@njit(inline="always")
def _utf8_valid(data, start, end):
    """Whether ``data[start:end]`` is UTF-8."""
    i = start
    while i < end:
        if data[i] < 0x80:
            i += 1
            continue
        size = utf8_size(data, i, end)
        if size == 0:
            return False
        i += size
    return True


# ---- batch lookups (numba, parallel) --------------------------------------------------------------


# Every batch loop works in blocks of _BLOCK names, in two passes: the hashes of the block first, then the
# probes, each asking for the slot of the name _AHEAD places on, so that several memory accesses are in flight
# at once.


@njit(inline="always")
def _blocks(count):
    return (count + _BLOCK - 1) // _BLOCK


@njit(inline="always")
def _block(b, count):
    return b * _BLOCK, min(count, (b + 1) * _BLOCK)


@njit(inline="always")
def _prefetch_slot(slots, hashes, i, end):
    if i + _AHEAD < end:
        prefetch(slots, hashes[i + _AHEAD] & (slots.shape[0] - 1))


@njit(inline="always")
def _prefetch_name(slots, names_data, names_offsets, hashes, i, end):
    """For string names, two more steps ahead: the name's offsets once its slot has come, and its bytes once
    the offsets have (a hit reads three cache lines)."""
    mask = slots.shape[0] - 1
    if i + _AHEAD // 2 < end:
        node = slots[hashes[i + _AHEAD // 2] & mask, 1]
        if node != _EMPTY:
            prefetch(names_offsets, node)
    if i + _AHEAD // 4 < end:
        h = hashes[i + _AHEAD // 4]
        node = slots[h & mask, 1]
        if node != _EMPTY and slots[h & mask, 0] == h:
            prefetch(names_data, names_offsets[node])


@njit(parallel=True, nogil=True, cache=True)
def _lookup_ints(slots, seed, keys, out):
    missing = 0
    for b in prange(_blocks(keys.size)):
        first, end = _block(b, keys.size)
        for i in range(first, end):
            out[i] = _hash_int(keys[i], seed)
        for i in range(first, end):
            _prefetch_slot(slots, out, i, end)
            out[i] = _probe_int(slots, out[i], keys[i])
            missing += out[i] == _EMPTY
    return missing


@njit(parallel=True, nogil=True, cache=True)
def _lookup_tokens(slots, seed, names_data, names_offsets, data, starts, ends, out):
    missing = 0
    for b in prange(_blocks(starts.size)):
        first, end = _block(b, starts.size)
        for i in range(first, end):
            out[i] = _hash_bytes(data, starts[i], ends[i], seed)
        for i in range(first, end):
            _prefetch_slot(slots, out, i, end)
            _prefetch_name(slots, names_data, names_offsets, out, i, end)
            out[i] = _probe_bytes(slots, out[i], names_data, names_offsets, data, starts[i], ends[i])
            missing += out[i] == _EMPTY
    return missing


@njit(parallel=True, nogil=True, cache=True)
def _lookup_decimal_tokens(slots, seed, data, starts, ends, out):
    missing = 0
    for b in prange(_blocks(starts.size)):
        first, end = _block(b, starts.size)
        keys = np.empty(end - first, dtype=np.int64)
        valid = np.empty(end - first, dtype=np.bool_)
        for i in range(first, end):
            keys[i - first], valid[i - first] = parse_decimal(data, starts[i], ends[i])
            out[i] = _hash_int(keys[i - first], seed)
        for i in range(first, end):
            _prefetch_slot(slots, out, i, end)
            out[i] = _probe_int(slots, out[i], keys[i - first]) if valid[i - first] else _EMPTY
            missing += out[i] == _EMPTY
    return missing


@njit(parallel=True, nogil=True, cache=True)
def _range_decimal_tokens(size, data, starts, ends, out):
    missing = 0
    for b in prange(_blocks(starts.size)):
        for i in range(*_block(b, starts.size)):
            value, ok = parse_decimal(data, starts[i], ends[i])
            out[i] = value if ok and 0 <= value < size else _EMPTY
            missing += out[i] == _EMPTY
    return missing


@njit(parallel=True, nogil=True, cache=True)
def _lookup_ints_as_text(slots, seed, names_data, names_offsets, keys, out):
    missing = 0
    for b in prange(_blocks(keys.size)):
        buffer = np.empty(20, dtype=np.uint8)
        for i in range(*_block(b, keys.size)):
            start = _write_decimal(keys[i], buffer)
            h = _hash_bytes(buffer, start, buffer.size, seed)
            out[i] = _probe_bytes(slots, h, names_data, names_offsets, buffer, start, buffer.size)
            missing += out[i] == _EMPTY
    return missing


@njit(parallel=True, nogil=True, cache=True)
def _ucs4_utf8_sizes(codes, sizes):
    """UTF-8 sizes of the rows of a numpy str array seen as uint32 code points (trailing zeros are padding)."""
    for b in prange(_blocks(codes.shape[0])):
        for i in range(*_block(b, codes.shape[0])):
            length = codes.shape[1]
            while length > 0 and codes[i, length - 1] == 0:
                length -= 1
            size = 0
            for j in range(length):
                c = codes[i, j]
                size += 1 if c < 0x80 else 2 if c < 0x800 else 3 if c < 0x10000 else 4
            sizes[i] = size


@njit(parallel=True, nogil=True, cache=True)
def _ucs4_to_utf8(codes, offsets, out):
    """Encode as UTF-8 (a lone surrogate as its three bytes, as Python's 'surrogatepass' does)."""
    for b in prange(_blocks(codes.shape[0])):
        for i in range(*_block(b, codes.shape[0])):
            k = offsets[i]
            j = 0
            while k < offsets[i + 1]:
                c = codes[i, j]
                j += 1
                if c < 0x80:
                    out[k] = c
                    k += 1
                elif c < 0x800:
                    out[k] = 0xC0 | (c >> 6)
                    out[k + 1] = 0x80 | (c & 0x3F)
                    k += 2
                elif c < 0x10000:
                    out[k] = 0xE0 | (c >> 12)
                    out[k + 1] = 0x80 | ((c >> 6) & 0x3F)
                    out[k + 2] = 0x80 | (c & 0x3F)
                    k += 3
                else:
                    out[k] = 0xF0 | (c >> 18)
                    out[k + 1] = 0x80 | ((c >> 12) & 0x3F)
                    out[k + 2] = 0x80 | ((c >> 6) & 0x3F)
                    out[k + 3] = 0x80 | (c & 0x3F)
                    k += 4


@njit(nogil=True, cache=True)
def _first_invalid_byte(data):
    """Where ``data`` stops being UTF-8, or -1; ASCII eight bytes at a step."""
    i = 0
    while i < data.size:
        if i + 8 <= data.size and load_word(data, i) & HIGH_BITS == 0:
            i += 8
            continue
        size = utf8_size(data, i, data.size)
        if size == 0:
            return i
        i += size
    return -1


@njit(nogil=True, cache=True)
def _find_one_int(slots, seed, key):
    return _probe_int(slots, _hash_int(key, seed), key)


@njit(nogil=True, cache=True)
def _find_one_bytes(slots, seed, names_data, names_offsets, data):
    h = _hash_bytes(data, 0, data.size, seed)
    return _probe_bytes(slots, h, names_data, names_offsets, data, 0, data.size)


# ---- interning (numba, one thread: ids in order of first appearance) -----------------------------
# The kernels stop when an array is full and Python allocates the bigger one: numpy gives large arrays huge
# pages (numba's allocator does not), and a table in 4 KiB pages costs a TLB miss on top of every cache miss.


@njit(nogil=True, cache=True)
def _rehash(slots, other, seed, integer_keys):
    """Move the slots into the empty table ``other``."""
    mask = other.shape[0] - 1
    for k in range(slots.shape[0]):
        if slots[k, 1] != _EMPTY:
            key = slots[k, 0]
            j = (_hash_int(key, seed) if integer_keys else key) & mask
            while other[j, 1] != _EMPTY:
                j = (j + 1) & mask
            other[j, 0] = key
            other[j, 1] = slots[k, 1]


@njit(inline="always")
def _room(slots, count, capacity):
    """How many more names fit: the table at a load of 3/4, and the array of names."""
    return min(3 * slots.shape[0] // 4, capacity) - count


@njit(nogil=True, cache=True)
def _intern_ints(values, ids, position, slots, keys, count, seed):
    """Intern ``values[position:]`` into ``ids``; returns (where it stopped, count): at the end, or at a new
    name when the table or ``keys`` is full."""
    mask = slots.shape[0] - 1
    room = _room(slots, count, keys.size)
    hashes = np.empty(_BLOCK, dtype=np.int64)
    for first in range(position, values.size, _BLOCK):
        end = min(values.size, first + _BLOCK)
        for i in range(first, end):
            hashes[i - first] = _hash_int(values[i], seed)
        for i in range(first, end):
            _prefetch_slot(slots, hashes, i - first, end - first)
            key = values[i]
            k = hashes[i - first] & mask
            while True:
                node = slots[k, 1]
                if node == _EMPTY:
                    if room == 0:
                        return i, count
                    node = count
                    slots[k, 0] = key
                    slots[k, 1] = node
                    keys[count] = key
                    count += 1
                    room -= 1
                    break
                if slots[k, 0] == key:
                    break
                k = (k + 1) & mask
            ids[i] = node
    return values.size, count


@njit(nogil=True, cache=True)
def _intern_tokens(data, starts, ends, ids, position, slots, names_data, names_offsets, count, seed, max_bytes):
    """Intern tokens from ``position`` on into ``ids``; returns (where it stopped, count, outcome): _OK at the
    end or where an array is full (the table, ``names_offsets`` or ``names_data`` for the next new name), or
    the problem with the token where it stopped."""
    mask = slots.shape[0] - 1
    room = _room(slots, count, names_offsets.size - 1)
    hashes = np.empty(_BLOCK, dtype=np.int64)
    for first in range(position, starts.size, _BLOCK):
        end = min(starts.size, first + _BLOCK)
        for i in range(first, end):
            hashes[i - first] = _hash_bytes(data, starts[i], ends[i], seed)
        for i in range(first, end):
            _prefetch_slot(slots, hashes, i - first, end - first)
            _prefetch_name(slots, names_data, names_offsets, hashes, i - first, end - first)
            start, stop = starts[i], ends[i]
            length = stop - start
            if length > max_bytes:
                return i, count, _TOO_LONG
            if length == 0:
                return i, count, _EMPTY_NAME
            h = hashes[i - first]
            k = h & mask
            while True:
                node = slots[k, 1]
                if node == _EMPTY:
                    used = names_offsets[count]
                    if room == 0 or used + length > names_data.size:
                        return i, count, _OK
                    if not _utf8_valid(data, start, stop):
                        return i, count, _BAD_UTF8
                    node = count
                    slots[k, 0] = h
                    slots[k, 1] = node
                    names_data[used : used + length] = data[start:stop]
                    names_offsets[count + 1] = used + length
                    count += 1
                    room -= 1
                    break
                if slots[k, 0] == h:
                    name_start = names_offsets[node]
                    if names_offsets[node + 1] - name_start == length and _same_bytes(
                        names_data, name_start, data, start, length
                    ):
                        break
                k = (k + 1) & mask
            ids[i] = node
    return starts.size, count, _OK


@njit(nogil=True, cache=True)
def _fill_table(keys, seed, integer_keys, slots):
    """A table over names given in id order: ``keys`` are the names (ints) or their hashes (strings)."""
    mask = slots.shape[0] - 1
    for node in range(keys.size):
        key = keys[node]
        k = (_hash_int(key, seed) if integer_keys else key) & mask
        while slots[k, 1] != _EMPTY:
            k = (k + 1) & mask
        slots[k, 0] = key
        slots[k, 1] = node


@njit(parallel=True, nogil=True, cache=True)
def _hashes(data, offsets, seed):
    out = np.empty(offsets.size - 1, dtype=np.int64)
    for b in prange(_blocks(out.size)):
        for i in range(*_block(b, out.size)):
            out[i] = _hash_bytes(data, offsets[i], offsets[i + 1], seed)
    return out


# ---- Python side ----------------------------------------------------------------------------------


def _balanced(kernel: Callable[..., Any], count: int, *args: Any) -> Any:
    """Run a block kernel over ``count`` items with its blocks handed to the threads one at a time (see
    _BLOCK), on no more threads than blocks: one block runs on the calling thread alone, since on a loaded
    machine waiting for the pool's threads to be scheduled costs far more than a block's work."""
    with parallel_chunksize(1), numba_threads((count + _BLOCK - 1) // _BLOCK):
        return kernel(*args)


def _capacity(count: int) -> int:
    """Slots for ``count`` names at a load of at most 3/4."""
    return max(16, 1 << (4 * count // 3 + 1).bit_length())


def _empty_table(capacity: int) -> np.ndarray:
    return np.full((capacity, 2), _EMPTY, dtype=np.int64)


def _grown(array: np.ndarray, used: int, size: int) -> np.ndarray:
    bigger = np.empty(size, dtype=array.dtype)
    bigger[:used] = array[:used]
    return bigger


def _new_seed() -> np.uint64:
    # Per table, so that nobody can choose names that collide in a table they cannot see.
    return np.uint64(secrets.randbits(64))


def _frozen(array: np.ndarray) -> np.ndarray:
    """A read-only, contiguous view: built and memory-mapped tables, and every query array, then share one
    compiled specialization of each kernel."""
    view = np.ascontiguousarray(array).view()
    view.flags.writeable = False
    return view


@dataclass(frozen=True, eq=False)
class NameTokens:
    """Names as UTF-8 byte spans of one buffer: name i is ``data[starts[i]:ends[i]]``."""

    data: np.ndarray  # uint8
    starts: np.ndarray  # integers
    ends: np.ndarray

    def __len__(self) -> int:
        return int(self.starts.size)

    @classmethod
    def from_offsets(cls, data: np.ndarray, offsets: np.ndarray) -> NameTokens:
        """Arrow's string layout: name i is ``data[offsets[i]:offsets[i + 1]]`` (int32 or int64 offsets)."""
        offsets = np.asarray(offsets)
        return cls(np.asarray(data, dtype=np.uint8), offsets[:-1], offsets[1:])

    @classmethod
    def from_strings(cls, strings: Sequence[str]) -> NameTokens:
        """UTF-8 of Python strings; a lone surrogate is kept as its three bytes (it then matches no name)."""
        joined = "".join(strings)
        if joined.isascii():
            data = joined.encode("ascii")
            sizes = np.fromiter(map(len, strings), dtype=np.int64, count=len(strings))
        else:
            encoded = [s.encode("utf-8", "surrogatepass") for s in strings]
            data = b"".join(encoded)
            sizes = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
        offsets = np.zeros(len(strings) + 1, dtype=np.int64)
        np.cumsum(sizes, out=offsets[1:])
        return cls.from_offsets(np.frombuffer(data, dtype=np.uint8), offsets)

    @classmethod
    def from_unicode_array(cls, array: np.ndarray) -> NameTokens:
        """The strings of a numpy str array, in C order (numpy itself drops trailing NUL characters)."""
        return cls.from_offsets(*_utf8_of_unicode(array))

    def _arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """data, starts and ends as the kernels take them: read-only, contiguous, int64 positions."""
        data = _frozen(self.data)
        return data, _frozen(self.starts.astype(np.int64, copy=False)), _frozen(self.ends.astype(np.int64, copy=False))

    def text(self, i: int) -> str:
        """Name i as a Python string (invalid UTF-8 replaced, a lone surrogate kept)."""
        raw = bytes(self.data[int(self.starts[i]) : int(self.ends[i])])
        try:
            return raw.decode("utf-8", "surrogatepass")
        except UnicodeDecodeError:
            return raw.decode("utf-8", "replace")


def utf8_error(data: np.ndarray) -> int | None:
    """The position of the first byte of a uint8 array where it is not UTF-8 (as Python's strict decoder
    reads it), or None."""
    position = _first_invalid_byte(_frozen(data))
    return None if position < 0 else int(position)


def _utf8_of_unicode(array: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """UTF-8 bytes and offsets of the strings of a numpy str array, in C order."""
    flat = np.ascontiguousarray(array).reshape(-1)
    width = flat.dtype.itemsize // 4
    codes = flat.view(np.uint32).reshape(flat.size, width) if width else np.zeros((flat.size, 1), np.uint32)
    sizes = np.empty(flat.size, dtype=np.int64)
    _balanced(_ucs4_utf8_sizes, codes.shape[0], codes, sizes)
    offsets = np.zeros(flat.size + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    data = np.empty(int(offsets[-1]), dtype=np.uint8)
    _balanced(_ucs4_to_utf8, codes.shape[0], codes, offsets, data)
    return data, offsets


def _decimal(text: str) -> int | None:
    """The integer of an optional sign and ASCII digits (the numba parser's rule); None for anything else."""
    digits = text[1:] if text[:1] in ("+", "-") else text
    if not (digits.isascii() and digits.isdigit()):
        return None
    value = int(text)
    return value if _INT64_MIN <= value <= _INT64_MAX else None


def _python_value(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def _as_key(value: Any) -> int | None:
    """An int64 key for integer graphs, or None when the value cannot be a name of one."""
    if isinstance(value, (bool, np.bool_)):
        return None
    if isinstance(value, (int, np.integer)):
        key = int(value)
    elif isinstance(value, (float, np.floating)) and float(value).is_integer():
        key = int(value)
    elif isinstance(value, str):
        return _decimal(value)
    else:
        return None
    return key if _INT64_MIN <= key <= _INT64_MAX else None


def _as_text(value: Any) -> str | None:
    """The string a string graph reads a value as, or None when the value cannot be a name of one."""
    if isinstance(value, (bool, np.bool_)):
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float, np.integer, np.floating)):
        return str(_python_value(value))
    return None


class NodeNames:
    """Names of nodes 0..n-1 and the table that maps them back to ids (see the module docstring)."""

    __slots__ = ("size", "kind", "seed", "slots", "keys", "data", "offsets")

    def __init__(
        self,
        size: int,
        kind: str,
        seed: int | np.uint64 = 0,
        slots: np.ndarray | None = None,
        keys: np.ndarray | None = None,
        data: np.ndarray | None = None,
        offsets: np.ndarray | None = None,
    ) -> None:
        self.size = size
        self.kind = kind
        self.seed = np.uint64(seed)
        self.slots = None if slots is None else _frozen(slots)
        self.keys = None if keys is None else _frozen(keys)
        self.data = None if data is None else _frozen(data)
        self.offsets = None if offsets is None else _frozen(offsets)

    @classmethod
    def identity(cls, size: int) -> NodeNames:
        return cls(size, "range")

    @property
    def are_integers(self) -> bool:
        return self.kind != "str"

    def __len__(self) -> int:
        return self.size

    @property
    def nbytes(self) -> int:
        """Memory of the names and their table."""
        arrays = (self.slots, self.keys, self.data, self.offsets)
        return sum(array.nbytes for array in arrays if array is not None)

    # Lookups ------------------------------------------------------------------------------------

    def lookup(self, names: Any) -> np.ndarray:
        """Internal ids (int64) of names, in the shape of ``names``; raises UnknownNodeError for the first unknown.

        ``names``: a numpy array (integers, str, floats, objects), ``NameTokens``, or nested Python lists.
        """
        ids, found_all, name_at, shape = self._find(names)
        return self._checked(ids, found_all, name_at).reshape(shape)

    def find(self, names: Any) -> np.ndarray:
        """``lookup`` that gives -1 for each unknown name instead of raising."""
        ids, _, _, shape = self._find(names)
        return ids.reshape(shape)

    def _find(self, names: Any) -> tuple[np.ndarray, bool, Callable[[int], Any], tuple[int, ...]]:
        """(flat ids with _EMPTY for the unknown, whether all were found, the name at a flat position, shape)."""
        if isinstance(names, NameTokens):
            ids, found_all = self._lookup_tokens(names)
            return ids, found_all, names.text, (len(names),)
        array = names if isinstance(names, np.ndarray) else np.array(names, dtype=object)
        flat = array.reshape(-1)
        kind = array.dtype.kind
        found_all = False
        if kind in "iu":
            ids, found_all = self._lookup_integers(flat)
        elif kind == "U":
            ids, found_all = self._lookup_tokens(NameTokens.from_unicode_array(flat))
        elif kind == "f" and self.are_integers:
            integral = np.isfinite(flat) & (np.floor(flat) == flat) & (flat >= -(2.0**63)) & (flat < 2.0**63)
            ids = np.where(integral, self._lookup_integers(np.where(integral, flat, 0).astype(np.int64))[0], _EMPTY)
        elif kind == "f":
            ids, found_all = self._lookup_tokens(NameTokens.from_unicode_array(flat.astype(str)))
        elif kind == "O":
            ids = self._lookup_objects(flat.tolist())
        else:  # booleans, bytes, dates ...: never node names
            ids = np.full(flat.size, _EMPTY, dtype=np.int64)
        return ids, found_all, lambda i: _python_value(flat[i]), array.shape

    def lookup_list(self, names: list[Any]) -> np.ndarray:
        """``lookup`` of a flat list of Python values, without an object array on the way."""
        ids = self._lookup_objects(names)
        return self._checked(ids, False, lambda i: _python_value(names[i]))

    def find_list(self, names: list[Any]) -> np.ndarray:
        """``lookup_list`` that gives -1 for each unknown name."""
        return self._lookup_objects(names)

    def lookup_one(self, name: Any) -> int:
        """The id of one name (the single-pair path: no arrays, no threads)."""
        node = self.find_one(name)
        if node < 0:
            raise UnknownNodeError(_python_value(name))
        return node

    def find_one(self, name: Any) -> int:
        """``lookup_one`` that gives -1 for an unknown name."""
        if self.are_integers:
            key = _as_key(name)
            if key is None:
                return _EMPTY
            if self.kind == "range":
                return key if 0 <= key < self.size else _EMPTY
            return int(_find_one_int(self.slots, self.seed, key))
        text = _as_text(name)
        if text is None:
            return _EMPTY
        data = np.frombuffer(text.encode("utf-8", "surrogatepass"), dtype=np.uint8)
        return int(_find_one_bytes(self.slots, self.seed, self.data, self.offsets, data))

    @staticmethod
    def _checked(ids: np.ndarray, found_all: bool, name_at: Callable[[int], Any]) -> np.ndarray:
        """``ids``, or UnknownNodeError naming the first name not found (_EMPTY); ``found_all`` when the
        kernel counted none missing."""
        if not found_all and ids.size and ids.min() < 0:
            raise UnknownNodeError(name_at(int(np.argmax(ids < 0))))
        return ids

    def _lookup_integers(self, keys: np.ndarray) -> tuple[np.ndarray, bool]:
        """(ids with _EMPTY for the unknown, whether all were found)."""
        outside = None
        if keys.dtype == np.uint64 and keys.size and keys.max() > _INT64_MAX:
            outside = keys > _INT64_MAX
        keys = _frozen(keys.astype(np.int64, copy=False))
        if self.kind == "range":
            # Two reductions instead of a mask: the common case is all names valid, and ids are the names.
            if outside is None and (keys.size == 0 or (keys.min() >= 0 and keys.max() < self.size)):
                return keys, True
            return np.where((keys >= 0) & (keys < self.size), keys, _EMPTY), False
        ids = np.empty(keys.size, dtype=np.int64)
        if self.kind == "int":
            missing = _balanced(_lookup_ints, keys.size, self.slots, self.seed, keys, ids)
        else:
            missing = _balanced(
                _lookup_ints_as_text, keys.size, self.slots, self.seed, self.data, self.offsets, keys, ids
            )
        if outside is not None:
            ids[outside] = _EMPTY
        return ids, missing == 0 and outside is None

    def _lookup_tokens(self, tokens: NameTokens) -> tuple[np.ndarray, bool]:
        """(ids with _EMPTY for the unknown, whether all were found)."""
        data, starts, ends = tokens._arrays()
        ids = np.empty(starts.size, dtype=np.int64)
        if self.kind == "range":
            missing = _balanced(_range_decimal_tokens, starts.size, self.size, data, starts, ends, ids)
        elif self.kind == "int":
            missing = _balanced(_lookup_decimal_tokens, starts.size, self.slots, self.seed, data, starts, ends, ids)
        else:
            missing = _balanced(
                _lookup_tokens, starts.size, self.slots, self.seed, self.data, self.offsets, data, starts, ends, ids
            )
        return ids, missing == 0

    def _lookup_objects(self, values: list[Any]) -> np.ndarray:
        """Python values, as they come from lists and JSON: typed exactly (a bool is not 1)."""
        types = set(map(type, values))
        if types <= {str}:
            return self._lookup_tokens(NameTokens.from_strings(values))[0]
        if types <= {int} and self.are_integers:
            try:
                return self._lookup_integers(np.array(values, dtype=np.int64))[0]
            except OverflowError:
                pass
        ids = np.full(len(values), _EMPTY, dtype=np.int64)
        if self.are_integers:
            keys = [_as_key(value) for value in values]
            positions = [i for i, key in enumerate(keys) if key is not None]
            if positions:
                ids[positions] = self._lookup_integers(np.array([keys[i] for i in positions], dtype=np.int64))[0]
        else:
            texts = [_as_text(value) for value in values]
            known = [(i, text) for i, text in enumerate(texts) if text is not None]
            if known:
                positions = [i for i, _ in known]
                ids[positions] = self._lookup_tokens(NameTokens.from_strings([text for _, text in known]))[0]
        return ids

    # Names of ids -------------------------------------------------------------------------------

    def names_of(self, ids: Any) -> list[int | str]:
        """The uploaded names of internal ids, as Python ints or strings."""
        ids = np.asarray(ids, dtype=np.int64)
        if self.kind == "range":
            return ids.tolist()
        if self.kind == "int":
            assert self.keys is not None
            return self.keys[ids].tolist()
        data, offsets = self.data, self.offsets
        assert data is not None and offsets is not None
        return [bytes(data[offsets[i] : offsets[i + 1]]).decode("utf-8") for i in ids.tolist()]

    def names_array(self, ids: Any) -> np.ndarray:
        """The names of internal ids as a numpy array: int64 for integer names, numpy's variable-width
        ``StringDType`` for strings."""
        ids = np.asarray(ids, dtype=np.int64)
        if self.kind == "range":
            return ids.copy()
        if self.kind == "int":
            assert self.keys is not None
            return self.keys[ids]
        return np.array(self.names_of(ids), dtype=np.dtypes.StringDType())

    def key_of(self, name: Any) -> int | str | None:
        """The name as this graph stores it (an int for integer graphs, a str otherwise), or None when it
        cannot be a name of this graph (a boolean, a string that is not a decimal integer on an integer graph)."""
        return _as_key(name) if self.are_integers else _as_text(name)

    def extended(self, names: Sequence[int | str], max_name_bytes: int = MAX_NAME_BYTES) -> NodeNames:
        """These names followed by ``names`` (stored keys, see ``key_of``; none of them known here), which get
        the ids ``size``, ``size + 1`` ...: a new table, built in one pass over all names (O(n))."""
        if not names:
            return self
        if self.kind == "range" and list(names) == list(range(self.size, self.size + len(names))):
            return NodeNames.identity(self.size + len(names))
        interner = NameInterner(max_name_bytes)
        if self.are_integers:
            keys = np.arange(self.size, dtype=np.int64) if self.kind == "range" else self.keys
            assert keys is not None
            interner.add_integers(np.concatenate([keys, np.asarray(names, dtype=np.int64)]))
        else:
            assert self.data is not None and self.offsets is not None
            interner.add_strings(NameTokens.from_offsets(self.data, self.offsets))
            interner.add_strings(NameTokens.from_strings([str(name) for name in names]))
        result = interner.finish()
        if result.size != self.size + len(names):
            raise ValueError("extended() takes only names the graph does not have, each once")
        return result

    @classmethod
    def of(cls, names: Sequence[int | str], integers: bool, max_name_bytes: int = MAX_NAME_BYTES) -> NodeNames:
        """A table of distinct stored keys (``key_of``), ids in their order; GraphFormatError for a string name
        that is empty, not UTF-8 or longer than ``max_name_bytes``."""
        interner = NameInterner(max_name_bytes)
        if integers:
            interner.add_integers(np.asarray(names, dtype=np.int64).reshape(-1))
        else:
            interner.add_strings(NameTokens.from_strings([str(name) for name in names]))
        return interner.finish()

    # Files --------------------------------------------------------------------------------------

    def to_arrays(self) -> dict[str, np.ndarray]:
        """What the index files store (``names_*`` arrays); nothing for the range."""
        arrays = {"names_slots": self.slots, "names_keys": self.keys, "names_data": self.data}
        arrays["names_offsets"] = self.offsets
        return {name: array for name, array in arrays.items() if array is not None}

    def metadata(self) -> dict[str, Any]:
        return {"kind": self.kind, "seed": int(self.seed)}

    @classmethod
    def from_arrays(cls, size: int, metadata: dict[str, Any], arrays: dict[str, np.ndarray]) -> NodeNames:
        """The inverse of ``to_arrays`` and ``metadata``. The shapes are checked (the kernels read without
        bounds checks); IndexFileError when they do not fit, KeyError when an array is missing."""
        kind = metadata["kind"]
        if kind == "range":
            return cls.identity(size)
        if kind not in ("int", "str"):
            raise IndexFileError(f"unknown kind of node names {kind!r}")
        slots = arrays["names_slots"]
        capacity = slots.shape[0]
        fits = slots.dtype == np.int64 and slots.shape == (capacity, 2) and capacity & (capacity - 1) == 0
        fits = fits and capacity * 3 >= size * 4 and (size == 0 or int(slots[:, 1].max()) < size)
        names = cls(size, kind, np.uint64(metadata["seed"]), slots)
        if kind == "int":
            names.keys = _frozen(arrays["names_keys"])
            fits = fits and names.keys.dtype == np.int64 and names.keys.shape == (size,)
        else:
            names.data = _frozen(arrays["names_data"])
            names.offsets = offsets = _frozen(arrays["names_offsets"])
            fits = fits and names.data.dtype == np.uint8 and offsets.dtype == np.int64 and offsets.shape == (size + 1,)
            fits = (
                fits
                and offsets[0] == 0
                and offsets[-1] == names.data.size
                and bool(np.all(offsets[1:] >= offsets[:-1]))
            )
        if not fits:
            raise IndexFileError(f"the arrays of {kind} node names do not fit {size} nodes")
        return names

    @classmethod
    def from_sorted_array(cls, size: int, array: np.ndarray) -> NodeNames:
        """Names as index files of format version 1 stored them: sorted int64 or str, empty for the range;
        the table is built here (ids stay the ranks)."""
        if array.size == 0 and size > 0:
            return cls.identity(size)
        seed = _new_seed()
        slots = _empty_table(_capacity(array.size))
        if array.dtype.kind in "iu":
            keys = np.ascontiguousarray(array, dtype=np.int64)
            _fill_table(keys, seed, True, slots)
            return cls(size, "int", seed, slots, keys=keys)
        data, offsets = _utf8_of_unicode(np.asarray(array))
        _fill_table(_balanced(_hashes, offsets.size - 1, data, offsets, seed), seed, False, slots)
        return cls(size, "str", seed, slots, data=data, offsets=offsets)


# ---- interning ------------------------------------------------------------------------------------


class NameInterner:
    """Maps name tokens to ids while a graph is read: a name seen before gets its id, a new one the next id.

    One interner takes integers or strings, in as many chunks as needed (see the module docstring).
    """

    def __init__(self, max_name_bytes: int = MAX_NAME_BYTES) -> None:
        self.max_name_bytes = int(max_name_bytes)
        self.seed = _new_seed()
        self.kind: str | None = None
        self.count = 0
        self._slots = _empty_table(_INITIAL_SLOTS)
        self._keys = np.empty(_INITIAL_SLOTS, dtype=np.int64)
        self._data = np.empty(_INITIAL_BYTES, dtype=np.uint8)
        self._offsets = np.zeros(_INITIAL_SLOTS, dtype=np.int64)

    def _take(self, kind: str) -> None:
        if self.kind == "finished":
            raise ValueError("finish() handed the names over; this interner takes no more")
        if self.kind not in (None, kind):
            raise ValueError(f"this interner holds {self.kind} names; names are all integers or all strings")
        self.kind = kind

    def _grow_table(self) -> None:
        if 4 * (self.count + 1) > 3 * self._slots.shape[0]:
            bigger = _empty_table(2 * self._slots.shape[0])
            _rehash(self._slots, bigger, self.seed, self.kind == "int")
            self._slots = bigger

    def add_integers(self, values: np.ndarray) -> np.ndarray:
        """Ids (int64) of integer names."""
        self._take("int")
        values = np.ascontiguousarray(values, dtype=np.int64)
        ids = np.empty(values.size, dtype=np.int64)
        position = 0
        while True:
            position, self.count = _intern_ints(values, ids, position, self._slots, self._keys, self.count, self.seed)
            if position == values.size:
                return ids
            self._grow_table()
            if self.count == self._keys.size:
                self._keys = _grown(self._keys, self.count, 2 * self._keys.size)

    def add_strings(self, tokens: NameTokens, lines: Lines = None) -> np.ndarray:
        """Ids (int64) of string names; GraphFormatError naming the line of a name that is too long, empty
        or not UTF-8 (``lines``: the line of each token, as an array or a function of its position)."""
        self._take("str")
        data, starts, ends = tokens._arrays()
        ids = np.empty(starts.size, dtype=np.int64)
        position = 0
        while True:
            position, self.count, outcome = _intern_tokens(
                data,
                starts,
                ends,
                ids,
                position,
                self._slots,
                self._data,
                self._offsets,
                self.count,
                self.seed,
                self.max_name_bytes,
            )
            if outcome != _OK:
                raise self._error(outcome, tokens, int(position), lines)
            if position == starts.size:
                return ids
            self._grow_table()
            if self.count + 1 == self._offsets.size:
                self._offsets = _grown(self._offsets, self.count + 1, 2 * self._offsets.size)
            used = int(self._offsets[self.count])
            needed = used + int(ends[position] - starts[position])
            if needed > self._data.size:
                self._data = _grown(self._data, used, max(2 * self._data.size, needed))

    def _error(self, outcome: int, tokens: NameTokens, position: int, lines: Lines) -> GraphFormatError:
        size = int(tokens.ends[position] - tokens.starts[position])
        start = tokens.text(position)[:40]
        if outcome == _TOO_LONG:
            message = (
                f"node name of {size} bytes ({start!r}...) is longer than the limit of {self.max_name_bytes} bytes"
            )
        elif outcome == _EMPTY_NAME:
            message = "empty node name"
        else:
            message = f"node name {start!r} is not valid UTF-8"
        line = lines(position) if callable(lines) else None if lines is None else int(lines[position])
        return GraphFormatError(message, line=line)

    def finish(self) -> NodeNames:
        """The names, trimmed to size. The table is handed over, not copied: the interner takes no more names."""
        kind, self.kind = self.kind, "finished"
        if kind == "finished":
            raise ValueError("finish() was called before")
        if _capacity(self.count) < self._slots.shape[0]:  # a small graph in the first table's many slots
            smaller = _empty_table(_capacity(self.count))
            _rehash(self._slots, smaller, self.seed, kind == "int")
            self._slots = smaller
        if kind == "str":
            offsets = self._offsets[: self.count + 1].copy()
            names = NodeNames(
                self.count, "str", self.seed, self._slots, data=self._data[: offsets[-1]].copy(), offsets=offsets
            )
        else:
            names = NodeNames(self.count, "int", self.seed, self._slots, keys=self._keys[: self.count].copy())
        del self._slots, self._keys, self._data, self._offsets
        return names


def intern_integers(values: np.ndarray) -> tuple[NodeNames, np.ndarray]:
    """Names and ids of an integer column; names that are exactly 0..n-1 are their own ids (``range``)."""
    values = np.ascontiguousarray(values, dtype=np.int64)
    if values.size:
        low, high = int(values.min()), int(values.max())
        if low == 0 and high < values.size:
            present = np.zeros(high + 1, dtype=np.bool_)
            present[values] = True
            if present.all():
                return NodeNames.identity(high + 1), values
    interner = NameInterner()
    ids = interner.add_integers(values)
    return interner.finish(), ids


def intern_strings(
    tokens: NameTokens, lines: Lines = None, max_name_bytes: int = MAX_NAME_BYTES
) -> tuple[NodeNames, np.ndarray]:
    """Names and ids of a string column (see ``NameInterner.add_strings``)."""
    interner = NameInterner(max_name_bytes)
    ids = interner.add_strings(tokens, lines)
    return interner.finish(), ids

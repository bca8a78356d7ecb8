"""Byte-level helpers for numba kernels over UTF-8 text: word loads and stores, prefetch, SWAR tests,
UTF-8 and decimal integers. One place for the rules that every reader and every query path shares.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = ["prefetch", "load_word", "store_word", "has_less", "has_byte", "HIGH_BITS", "utf8_size", "parse_decimal"]

_ONES = np.uint64(0x0101010101010101)
HIGH_BITS = np.uint64(0x8080808080808080)


def _item_pointer(context, builder, signature, args):
    """A pointer to ``array[index]`` (the first element of row ``index`` of a 2-D array), the first two
    arguments of an intrinsic."""
    array_type, index_type = signature.args[:2]
    view = context.make_array(array_type)(context, builder, args[0])
    index = [context.cast(builder, args[1], index_type, types.intp)]
    index += [context.get_constant(types.intp, 0)] * (array_type.ndim - 1)
    return cgutils.get_item_pointer(context, builder, array_type, view, index, wraparound=False)


@intrinsic
def prefetch(typingctx, array, index):
    """Hint the CPU to fetch the cache line of ``array[index]`` (LLVM's prefetch: read, keep, data)."""

    def codegen(context, builder, signature, args):
        pointer = builder.bitcast(_item_pointer(context, builder, signature, args), ir.IntType(8).as_pointer())
        function_type = ir.FunctionType(ir.VoidType(), [pointer.type] + [ir.IntType(32)] * 3)
        prefetch = cgutils.get_or_insert_function(builder.module, function_type, "llvm.prefetch.p0")
        builder.call(prefetch, [pointer, *(ir.Constant(ir.IntType(32), flag) for flag in (0, 3, 1))])
        return context.get_dummy_value()

    return types.void(array, index), codegen


@intrinsic
def load_word(typingctx, array, index):
    """The eight bytes ``array[index:index + 8]`` of a uint8 array as one little-endian uint64 (one unaligned
    load: hashing and comparing names a word at a time is a third faster than a byte at a time)."""

    def codegen(context, builder, signature, args):
        pointer = _item_pointer(context, builder, signature, args)
        return builder.load(builder.bitcast(pointer, ir.IntType(64).as_pointer()), align=1)

    return types.uint64(array, index), codegen


@intrinsic
def store_word(typingctx, array, index, value):
    """Write the uint64 ``value`` to ``array[index:index + 8]`` of a uint8 array (one unaligned store)."""

    def codegen(context, builder, signature, args):
        pointer = _item_pointer(context, builder, signature, args)
        builder.store(args[2], builder.bitcast(pointer, ir.IntType(64).as_pointer()), align=1)
        return context.get_dummy_value()

    return types.void(array, index, types.uint64), codegen


@njit(inline="always")
def has_less(word, n):
    """Whether some byte of ``word`` is below ``n`` (at most 128), eight bytes in a few operations."""
    return ((word - _ONES * np.uint64(n)) & ~word & HIGH_BITS) != 0


@njit(inline="always")
def has_byte(word, byte):
    """Whether some byte of ``word`` equals ``byte``."""
    return has_less(word ^ (_ONES * np.uint64(byte)), 1)


@njit(inline="always")
def parse_decimal(data, start, end):
    """(value, ok) of ``data[start:end]`` (numba, inlined): an optional sign and ASCII digits that fit int64;
    not ok for anything else. The rule for integer names given as text, everywhere."""
    i = start
    negative = False
    if i < end and (data[i] == 45 or data[i] == 43):
        negative = data[i] == 45
        i += 1
    if i >= end:
        return np.int64(0), False
    while i < end - 1 and data[i] == 48:  # leading zeros, as int() reads them
        i += 1
    if end - i > 19:
        return np.int64(0), False
    # Nineteen digits fit a uint64 (10**19 < 2**64): no overflow test per digit, one at the end.
    magnitude = np.uint64(0)
    while i < end:
        digit = np.uint64(data[i]) - np.uint64(48)
        if digit > np.uint64(9):
            return np.int64(0), False
        magnitude = magnitude * np.uint64(10) + digit
        i += 1
    if magnitude > (np.uint64(2**63) if negative else np.uint64(2**63 - 1)):
        return np.int64(0), False
    return np.int64(np.uint64(0) - magnitude) if negative else np.int64(magnitude), True


@njit(inline="always")
def utf8_size(data, i, end):
    """The length of the UTF-8 sequence that starts at ``data[i]`` (numba, inlined) and ends by ``end``, or 0
    where Python's strict decoder would fail: no overlong forms, no surrogates, nothing past U+10FFFF."""
    c = data[i]
    if c < 0x80:
        return 1
    if 0xC2 <= c <= 0xDF:
        size, low, high = 2, 0x80, 0xBF
    elif 0xE0 <= c <= 0xEF:
        size = 3
        low = 0xA0 if c == 0xE0 else 0x80
        high = 0x9F if c == 0xED else 0xBF
    elif 0xF0 <= c <= 0xF4:
        size = 4
        low = 0x90 if c == 0xF0 else 0x80
        high = 0x8F if c == 0xF4 else 0xBF
    else:
        return 0
    if i + size > end or not low <= data[i + 1] <= high:
        return 0
    for j in range(2, size):
        if not 0x80 <= data[i + j] <= 0xBF:
            return 0
    return size

"""The device array library of the GPU build: CuPy (sort, unique, scan and search run on CUB and Thrust),
or numpy standing in for it under numba's CUDA simulator, where the kernels run on host arrays.

Numba kernels take either kind of array directly. ``device_arrays()`` is the module to call
(``xp.sort``, ``xp.cumsum``, ...); ``to_host`` copies a result back, ``as_xp`` gives the library's view of
an array numba allocated (no copy).
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np
from numba import njit, prange

from .device import is_simulator

__all__ = [
    "DeviceArraysUnavailable",
    "as_numba",
    "as_xp",
    "device_arrays",
    "to_device",
    "to_host",
    "to_host_many",
]


class DeviceArraysUnavailable(RuntimeError):
    """CuPy is not installed (or does not load): the GPU build runs on the CPU instead."""


# Large uploads and downloads go through page-locked host memory, which the device reads and writes at the
# link's speed (pageable memory goes through the driver's small bounce buffer, at a fraction of it): two
# halves, one on the link while the other is copied in, or out by every CPU thread (a download's fresh
# destination pages are faulted in by all of them at once).
STAGING_BYTES = 1 << 26  # per half
_COPY_BLOCK = 1 << 20


@njit(parallel=True, nogil=True, cache=True)
def _copy_bytes(source, destination):
    for block in prange((source.size + _COPY_BLOCK - 1) // _COPY_BLOCK):
        low = block * _COPY_BLOCK
        high = min(low + _COPY_BLOCK, source.size)
        destination[low:high] = source[low:high]


class _Staging:
    """The page-locked halves, a stream of their own and an event per half (one set per process)."""

    def __init__(self) -> None:
        import cupy

        self.memory = cupy.cuda.alloc_pinned_memory(2 * STAGING_BYTES)
        self.halves = np.frombuffer(self.memory, dtype=np.uint8, count=2 * STAGING_BYTES).reshape(2, STAGING_BYTES)
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self.events = [cupy.cuda.Event(), cupy.cuda.Event()]
        self.lock = threading.Lock()


_staging: _Staging | None = None
_staging_lock = threading.Lock()


def _staged() -> _Staging:
    global _staging
    with _staging_lock:
        if _staging is None:
            _staging = _Staging()
        return _staging


def device_arrays() -> ModuleType:
    """CuPy, or numpy under the simulator; ``DeviceArraysUnavailable`` when CuPy cannot be imported."""
    if is_simulator():
        return np
    try:
        import cupy
    except Exception as error:  # ImportError, or a CUDA runtime CuPy cannot load
        raise DeviceArraysUnavailable(f"CuPy is unavailable ({error}); install cupy-cuda12x or cupy-cuda13x") from None
    return cupy


def as_xp(array: Any) -> Any:
    """The array library's view of a device array (a numba one, or one of the library's own)."""
    if is_simulator():
        return getattr(array, "_ary", array)
    import cupy

    return cupy.asarray(array)


def as_numba(array: Any) -> Any:
    """A numba view of a library array, for kernels that take it inside a tuple of arguments."""
    if is_simulator():
        return array
    from numba import cuda

    return cuda.as_cuda_array(array)


def to_device(array: np.ndarray) -> Any:
    """A host array uploaded (a copy under the simulator too, so that the host array stays untouched).

    A large one goes through the page-locked staging halves (a chunk is copied in while the device takes
    the previous one; on the calling thread, which may be an index's background upload, so not numba's
    threads); a small one is copied straight from its pages: ``cupy.array`` would stage it through pinned
    memory that its pool then keeps (gigabytes of host memory for the largest graphs).
    """
    xp = device_arrays()
    if xp is np:
        return np.array(array, copy=True)
    host = np.ascontiguousarray(array)
    copy = xp.empty(host.shape, dtype=host.dtype)
    if host.nbytes < STAGING_BYTES:
        if host.nbytes:
            copy.data.copy_from_host(host.ctypes.data_as(ctypes.c_void_p), host.nbytes)
        return copy
    import cupy

    source = host.reshape(-1).view(np.uint8)
    staging = _staged()
    with staging.lock:
        for number, start in enumerate(range(0, source.size, STAGING_BYTES)):
            half = number % 2
            staging.events[half].synchronize()  # the copy that last read this half is done
            chunk = source[start : start + STAGING_BYTES]
            np.copyto(staging.halves[half][: chunk.size], chunk)
            cupy.cuda.runtime.memcpyAsync(
                copy.data.ptr + start,
                staging.halves[half].ctypes.data,
                chunk.size,
                cupy.cuda.runtime.memcpyHostToDevice,
                staging.stream.ptr,
            )
            staging.events[half].record(staging.stream)
        staging.stream.synchronize()
    return copy


def to_host(array: Any) -> np.ndarray:
    """A device array downloaded to a new host array."""
    if is_simulator():
        return np.array(getattr(array, "_ary", array), copy=True)
    import cupy

    return cupy.asnumpy(array)


def to_host_many(arrays: Sequence[Any]) -> list[np.ndarray]:
    """Device arrays downloaded to new host arrays, through the page-locked staging halves in chunks (the
    device copies a chunk while the CPU threads move the previous one out)."""
    if is_simulator():
        return [to_host(array) for array in arrays]
    import cupy

    sources = [cupy.ascontiguousarray(as_xp(array)) for array in arrays]
    outputs = [np.empty(source.shape, dtype=source.dtype) for source in sources]
    chunks = [
        (source.data.ptr + start, output.reshape(-1).view(np.uint8)[start : start + STAGING_BYTES])
        for source, output in zip(sources, outputs, strict=True)
        for start in range(0, source.nbytes, STAGING_BYTES)
    ]
    staging = _staged()
    with staging.lock:
        cupy.cuda.Device().synchronize()  # the staging stream does not wait for the default stream's work
        previous: tuple[np.ndarray, int] | None = None
        for number, (pointer, destination) in enumerate(chunks):
            half = number % 2
            cupy.cuda.runtime.memcpyAsync(
                staging.halves[half].ctypes.data,
                pointer,
                destination.size,
                cupy.cuda.runtime.memcpyDeviceToHost,
                staging.stream.ptr,
            )
            staging.events[half].record(staging.stream)
            if previous is not None:
                _copy_out(staging, *previous)
            previous = (destination, half)
        if previous is not None:
            _copy_out(staging, *previous)
    return outputs


def _copy_out(staging: _Staging, destination: np.ndarray, half: int) -> None:
    staging.events[half].synchronize()
    _copy_bytes(staging.halves[half][: destination.size], destination)

"""The device array library of the GPU build: CuPy (sort, unique, scan and search run on CUB and Thrust),
or numpy standing in for it under numba's CUDA simulator, where the kernels run on host arrays.

Numba kernels take either kind of array directly. ``device_arrays()`` is the module to call
(``xp.sort``, ``xp.cumsum``, ...); ``to_host`` copies a result back, ``as_xp`` gives the library's view of
an array numba allocated (no copy).
"""

from __future__ import annotations

import ctypes
from types import ModuleType
from typing import Any

import numpy as np

from .device import is_simulator

__all__ = ["DeviceArraysUnavailable", "as_numba", "as_xp", "device_arrays", "to_device", "to_host"]


class DeviceArraysUnavailable(RuntimeError):
    """CuPy is not installed (or does not load): the GPU build runs on the CPU instead."""


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

    One copy straight from the array's pages: ``cupy.array`` would stage it through pinned memory that
    its pool then keeps (1.6 GB of host memory at 200M edges), and giving that back costs as much again
    at the next upload.
    """
    xp = device_arrays()
    if xp is np:
        return np.array(array, copy=True)
    host = np.ascontiguousarray(array)
    copy = xp.empty(host.shape, dtype=host.dtype)
    if host.nbytes:
        copy.data.copy_from_host(host.ctypes.data_as(ctypes.c_void_p), host.nbytes)
    return copy


def to_host(array: Any) -> np.ndarray:
    """A device array downloaded to a new host array."""
    if is_simulator():
        return np.array(getattr(array, "_ary", array), copy=True)
    import cupy

    return cupy.asnumpy(array)

"""Device allocations filled on the device (no host staging of large zero or sentinel arrays)."""

from __future__ import annotations

from typing import Any

from numba import cuda

from .device import is_simulator
from .frontier import EngineConfig, make_edge_map

__all__ = ["copy_into", "device_fill", "device_full"]


@cuda.jit(device=True)
def _fill_one(i, args):
    flat, value = args
    flat[i] = value


_fill = make_edge_map(_fill_one)


def device_fill(array: Any, value: int, config: EngineConfig) -> None:
    """Sets every element of a C-contiguous device array to ``value``."""
    if array.size:
        _fill[config.grid(), config.block](array.size, (array.reshape(array.size), array.dtype.type(value)))


def device_full(shape: int | tuple[int, ...], dtype: Any, value: int, config: EngineConfig) -> Any:
    """A new C-contiguous device array of ``shape`` with every element ``value``."""
    array = cuda.device_array(shape, dtype=dtype)
    device_fill(array, value, config)
    return array


def copy_into(array: Any, host: Any) -> None:
    """Copies the host array ``host`` into the first elements of the device array ``array`` (no view made:
    a call's pairs go into buffers held from call to call)."""
    if is_simulator():
        array[: host.size].copy_to_device(host)
        return
    from numba.cuda.cudadrv import driver

    driver.host_to_device(array, host, host.nbytes)

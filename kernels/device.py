"""CUDA device detection and memory budget; every function here is safe without a GPU."""

from __future__ import annotations

import os

__all__ = ["cuda_available", "device_name", "free_memory", "is_simulator", "multiprocessors"]


def is_simulator() -> bool:
    """True when numba runs kernels in its CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``)."""
    return os.environ.get("NUMBA_ENABLE_CUDASIM", "0") == "1"


def cuda_available() -> bool:
    """True when numba-cuda is installed and finds a real device; never raises.

    The simulator is not a device: under it, backend choice stays on the CPU and only tests that call
    ``kernels`` directly run the kernels (in Python, ~1 s per 1000 threads).
    """
    if is_simulator():
        return False
    try:
        from numba import cuda

        return bool(cuda.is_available())
    except Exception:
        return False


def device_name() -> str | None:
    """The current device's name, or None without one."""
    if not cuda_available():
        return None
    try:
        from numba import cuda

        name = cuda.get_current_device().name
        return name.decode() if isinstance(name, bytes) else str(name)
    except Exception:
        return None


def free_memory() -> int:
    """Free bytes on the current device (0 without one); the simulator reports a fixed 1 GiB."""
    if is_simulator():
        return 1 << 30
    if not cuda_available():
        return 0
    try:
        from numba import cuda

        free, _total = cuda.current_context().get_memory_info()
        return int(free)
    except Exception:
        return 0


def multiprocessors() -> int:
    """Streaming multiprocessors of the current device (1 in the simulator or without a device)."""
    if is_simulator() or not cuda_available():
        return 1
    from numba import cuda

    return int(cuda.get_current_device().MULTIPROCESSOR_COUNT)

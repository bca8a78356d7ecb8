"""CUDA device detection, memory budget and the devices an engine binds to; safe without a GPU."""

from __future__ import annotations

import os
import threading
from contextlib import AbstractContextManager, nullcontext
from typing import Any

__all__ = [
    "Device",
    "cuda_available",
    "device_count",
    "device_name",
    "devices",
    "free_memory",
    "is_simulator",
    "multiprocessors",
]


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


def device_count() -> int:
    """CUDA devices numba sees (0 without one, and in the simulator)."""
    if not cuda_available():
        return 0
    from numba import cuda

    return len(cuda.gpus)


class Device:
    """One device an engine works on: its context, and a lock that gives it to one call at a time.

    ``devices()`` hands out one shared ``Device`` per GPU. Tests may make several of the same ordinal
    (two engines, two caches, one simulated or real GPU): the code that splits a batch over devices
    cannot tell them from two GPUs. ``concurrent`` says whether calls on different devices may run at
    the same time: not in the simulator, which runs a kernel by swapping module globals.
    """

    def __init__(self, ordinal: int = 0) -> None:
        self.ordinal = ordinal
        self.lock = threading.RLock()  # re-entrant: a collected engine drops its copy from any thread

    @property
    def concurrent(self) -> bool:
        return not is_simulator()

    def context(self) -> AbstractContextManager[Any]:
        """Makes this device current for the calling thread (numba's contexts are per thread)."""
        if is_simulator():
            return nullcontext()
        from numba import cuda

        return cuda.gpus[self.ordinal]

    def __repr__(self) -> str:
        return f"Device({self.ordinal})"


_devices: list[Device] = []
_devices_lock = threading.Lock()


def devices() -> list[Device]:
    """One ``Device`` per CUDA device, the same objects on every call (empty without a device)."""
    with _devices_lock:
        if not _devices:
            _devices.extend(Device(ordinal) for ordinal in range(device_count()))
        return list(_devices)

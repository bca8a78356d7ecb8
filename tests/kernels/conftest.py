"""Kernel tests without a GPU: numba's CUDA simulator, switched on before anything imports numba.cuda.

numba reads its settings when ``numba`` is first imported, which other test modules of the same run
may already have done (grail_core uses numba), so the settings are re-read here as well.
``kernels.device.cuda_available()`` stays False under the simulator, so other tests collected in the
same run keep choosing the CPU backend. CI runs this folder as its own invocation
(``pytest tests/kernels``) to keep its timing visible. Where a test collected earlier in the same
run has already loaded numba.cuda for a real device (``pytest tests`` on a GPU machine), the
simulator cannot be switched on any more: this folder is then skipped, and ``make test-gpu`` runs it
as its own invocation.

The simulator runs every CUDA thread as a Python thread, and its atomics take one global lock each:
with Python's default 5 ms switch interval, a thread descheduled while it holds one stalls every
other thread of the block for whole intervals, so the interval is shortened here. The simulator also
creates a shared array the first time a thread reaches its line, without a lock: two threads arriving
together could each create one and then write to different memory. ``_shared_array`` creates it
under a lock, keyed as the simulator keys it (source file and line of the call).
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

SWITCH_INTERVAL_SECONDS = 0.0002
HERE = Path(__file__).resolve().parent
# numba.cuda loaded for a real device by a test collected before this folder.
DEVICE_ALREADY_LOADED = "numba.cuda" in sys.modules and os.environ.get("NUMBA_ENABLE_CUDASIM") != "1"

if not DEVICE_ALREADY_LOADED:
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    if "numba" in sys.modules:
        from numba.core import config

        config.reload_config()
    sys.setswitchinterval(SWITCH_INTERVAL_SECONDS)

    from numba.core import types
    from numba.cuda.simulator.kernelapi import FakeCUDAShared
    from numba.np import numpy_support

    _created = threading.Lock()
    _simulator_shared_array = FakeCUDAShared.array

    def _shared_array(self: FakeCUDAShared, shape: Any, dtype: Any, alignment: Any = None) -> np.ndarray:
        if shape == 0 or alignment is not None:  # dynamic shared memory and alignment: the simulator's own answer
            return _simulator_shared_array(self, shape, dtype, alignment)
        caller = sys._getframe(1)
        key = (caller.f_code.co_filename, caller.f_lineno)
        with _created:
            array = self._allocations.get(key)
            if array is None:
                array = np.empty(shape, numpy_support.as_dtype(dtype) if isinstance(dtype, types.Type) else dtype)
                self._allocations[key] = array
        return array

    FakeCUDAShared.array = _shared_array


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not DEVICE_ALREADY_LOADED:
        return
    skip = pytest.mark.skip(
        reason="numba.cuda is loaded for the device in this run: run tests/kernels on its own (make test-gpu does)"
    )
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(skip)

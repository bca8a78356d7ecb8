"""GPU-only tests (marker ``gpu``), run on the GPU machine with ``pytest -m gpu tests/gpu``."""

from __future__ import annotations

import os
from pathlib import Path


def device_present() -> bool:
    """True when a real CUDA device is there, decided without importing ``numba.cuda`` otherwise.

    Importing numba.cuda at collection on a machine without a GPU would fix its mode before
    ``tests/kernels/conftest.py`` switches on the simulator for the kernel tests of the same run.
    """
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        return False
    if not Path("/dev/nvidiactl").exists():  # the driver's control node: no device without it
        return False
    from kernels.device import cuda_available

    return cuda_available()

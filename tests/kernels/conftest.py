"""Kernel tests without a GPU: numba's CUDA simulator, switched on before anything imports numba.cuda.

``kernels.device.cuda_available()`` stays False under the simulator, so other tests collected in the
same pytest run keep choosing the CPU backend. CI runs this folder as its own invocation
(``pytest tests/kernels``) to keep its timing visible.
"""

from __future__ import annotations

import os

os.environ["NUMBA_ENABLE_CUDASIM"] = "1"

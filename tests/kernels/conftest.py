"""Kernel tests without a GPU: numba's CUDA simulator, switched on before anything imports numba.cuda.

numba reads its settings when ``numba`` is first imported, which other test modules of the same run
may already have done (grail_core uses numba), so the settings are re-read here as well.
``kernels.device.cuda_available()`` stays False under the simulator, so other tests collected in the
same run keep choosing the CPU backend. CI runs this folder as its own invocation
(``pytest tests/kernels``) to keep its timing visible.
"""

from __future__ import annotations

import os
import sys

os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
if "numba" in sys.modules:
    from numba.core import config

    config.reload_config()

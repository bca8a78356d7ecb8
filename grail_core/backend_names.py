"""The backend names a user may ask for: one registry for grail_core, the service's settings and models, and the CLI.

Plain data, no numba: the client CLI reads it without loading the engines.
"""

from __future__ import annotations

from typing import Literal, get_args

__all__ = ["BACKENDS", "DEFAULT_BACKEND", "BackendName"]

# For builds (where labels are computed) and queries (where undecided pairs are searched): "auto" is the GPU
# when numba finds one (the scheduler still sends each batch to the faster engine), else the CPU; "cpu" the
# CPU only; "cuda" the GPU, refused where there is none.
BackendName = Literal["auto", "cpu", "cuda"]
BACKENDS: tuple[str, ...] = get_args(BackendName)
DEFAULT_BACKEND: BackendName = "auto"

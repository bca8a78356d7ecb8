"""The backend names a user may ask for: one registry for grail_core, the service's settings and models, and the CLI.

Plain data, no numba: the client CLI reads it without loading the engines.
"""

from __future__ import annotations

__all__ = ["BACKENDS", "BACKEND_HELP", "DEFAULT_BACKEND"]

# Name -> what it means, for builds (where labels are computed) and queries (where undecided pairs are searched).
BACKEND_HELP = {
    "auto": "the GPU when numba finds one (the scheduler still sends each batch to the faster engine), else the CPU",
    "cpu": "the CPU only",
    "cuda": "the GPU; refused where there is none",
}
BACKENDS = tuple(BACKEND_HELP)
DEFAULT_BACKEND = "auto"

"""grail_core: graph readers, SCC condensation, GRAIL labels and exact reachability queries.

Knows nothing of HTTP. The GPU code in ``kernels`` is reached only through ``grail_core.backends``.
The public names below are imported on first use, so that a light module (``grail_core.backend_names``,
read by the client CLI) does not load numba.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__all__ = [
    "BACKENDS",
    "FORMATS",
    "MAX_DIMS",
    "BackendUnavailableError",
    "GrailError",
    "GraphFormatError",
    "GraphInput",
    "IndexFileError",
    "IndexStats",
    "InputTooLargeError",
    "InvalidParameterError",
    "NodeNames",
    "QueryStats",
    "ReachabilityIndex",
    "UnknownNodeError",
    "cuda_available",
    "device_name",
    "guess_format",
    "read_graph",
]

# Public name -> the module that defines it.
_HOMES = {
    "BACKENDS": "backend_names",
    "cuda_available": "backends",
    "device_name": "backends",
    "BackendUnavailableError": "errors",
    "GrailError": "errors",
    "GraphFormatError": "errors",
    "IndexFileError": "errors",
    "InputTooLargeError": "errors",
    "InvalidParameterError": "errors",
    "UnknownNodeError": "errors",
    "MAX_DIMS": "index",
    "ReachabilityIndex": "index",
    "NodeNames": "names",
    "FORMATS": "readers",
    "GraphInput": "readers",
    "guess_format": "readers",
    "read_graph": "readers",
    "IndexStats": "stats",
    "QueryStats": "stats",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'grail_core' has no attribute {name!r}")
    value = getattr(import_module(f".{home}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:
    from .backend_names import BACKENDS
    from .backends import cuda_available, device_name
    from .errors import (
        BackendUnavailableError,
        GrailError,
        GraphFormatError,
        IndexFileError,
        InputTooLargeError,
        InvalidParameterError,
        UnknownNodeError,
    )
    from .index import MAX_DIMS, ReachabilityIndex
    from .names import NodeNames
    from .readers import FORMATS, GraphInput, guess_format, read_graph
    from .stats import IndexStats, QueryStats

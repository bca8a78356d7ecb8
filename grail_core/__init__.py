"""grail_core: graph readers, SCC condensation, GRAIL labels and exact reachability queries.

Knows nothing of HTTP. The GPU code in ``kernels`` is reached only through ``grail_core.backends``.
``ReachabilityIndex`` builds, updates, saves and loads an index; ``Version`` is one immutable version of a
graph that answers queries, ``Labels`` what a build makes. The public names below are imported on first use,
so that a light module (``grail_core.backend_names``, ``grail_core.formats``, read by the client CLI) does
not load numba.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__all__ = [
    "BACKENDS",
    "FORMATS",
    "MAX_DIMS",
    "BackendUnavailableError",
    "Category",
    "GrailError",
    "GraphFormatError",
    "GraphInput",
    "IndexFileError",
    "IndexStats",
    "InputTooLargeError",
    "InvalidParameterError",
    "Labels",
    "NodeNames",
    "QueryStats",
    "ReachabilityIndex",
    "ReadOptions",
    "UnknownName",
    "UnknownNodeError",
    "UpdateConflictError",
    "Version",
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
    "Category": "errors",
    "GrailError": "errors",
    "GraphFormatError": "errors",
    "IndexFileError": "errors",
    "InputTooLargeError": "errors",
    "InvalidParameterError": "errors",
    "UnknownName": "errors",
    "UnknownNodeError": "errors",
    "UpdateConflictError": "errors",
    "MAX_DIMS": "labels",
    "Labels": "labels",
    "ReachabilityIndex": "index",
    "ReadOptions": "formats",
    "Version": "version",
    "NodeNames": "names",
    "FORMATS": "formats",
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
        Category,
        GrailError,
        GraphFormatError,
        IndexFileError,
        InputTooLargeError,
        InvalidParameterError,
        UnknownName,
        UnknownNodeError,
        UpdateConflictError,
    )
    from .formats import FORMATS, ReadOptions
    from .index import ReachabilityIndex
    from .labels import MAX_DIMS, Labels
    from .names import NodeNames
    from .readers import GraphInput, guess_format, read_graph
    from .stats import IndexStats, QueryStats
    from .version import Version

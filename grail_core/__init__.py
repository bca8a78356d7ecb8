"""grail_core: graph readers, SCC condensation, GRAIL labels and exact reachability queries.

Knows nothing of HTTP. The GPU code in ``kernels`` is reached only through ``grail_core.backends``.
"""

from .backends import BACKENDS, cuda_available, device_name
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

"""The graph formats grail reads, and those it recognises only to refuse: one registry for the readers, the
service's models and the client CLI.

Plain data, no numba: the client CLI reads it without loading the readers.
"""

from __future__ import annotations

from typing import Literal, get_args

__all__ = ["FORMATS", "FormatName", "REFUSED"]

FormatName = Literal["gra", "edgelist", "json", "parquet", "arrow", "graphml", "mtx", "adjlist"]
FORMATS: tuple[str, ...] = get_args(FormatName)
# Formats recognised only to be refused, with the words that name them.
REFUSED = {
    "dot": "DOT (Graphviz) files",
    "gexf": "GEXF files",
    "xml": "XML documents other than GraphML",
}

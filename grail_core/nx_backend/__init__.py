"""The networkx backend ``grail``: ``nx.has_path``, ``nx.descendants``, ``nx.ancestors`` and unweighted
``nx.shortest_path`` between two nodes answered by a ``ReachabilityIndex`` built once per graph.

    nx.has_path(G, u, v, backend="grail")
    nx.config.backend_priority = ["grail"]  # or NETWORKX_BACKEND_PRIORITY=grail: every call, networkx the rest

networkx finds the backend through the entry points ``networkx.backends`` (``interface.backend_interface``)
and ``networkx.backend_info`` (``backend_info`` here). networkx reads the latter while it is being imported, so
this module imports nothing heavy; the interface is loaded on the first dispatched call.
"""

from __future__ import annotations

from typing import Any

__all__ = ["BACKEND_NAME", "FUNCTIONS", "backend_info"]

BACKEND_NAME = "grail"

# Dispatchable networkx functions the backend implements -> what its documentation adds to theirs.
FUNCTIONS: dict[str, str] = {
    "has_path": "Answered by the graph's reachability index (built on the first call, kept until G changes).",
    "descendants": "Listed from the graph's reachability index.",
    "ancestors": "Listed from the graph's reachability index.",
    "shortest_path": (
        "Unweighted paths (``weight=None``) between a given source and target: a shortest path, not necessarily\n"
        "the one networkx picks among equally short ones. Other forms run in networkx when grail is chosen by\n"
        "``nx.config.backend_priority``; with ``backend='grail'`` they raise NotImplementedError."
    ),
}


def backend_info() -> dict[str, Any]:
    """What networkx shows of the backend (its ``networkx.backend_info`` entry point)."""
    return {
        "backend_name": BACKEND_NAME,
        "project": "grail-reachability",
        "package": "grail_core",
        "short_summary": "Reachability answered by a GRAIL index built once per graph.",
        "functions": {name: {"additional_docs": docs} for name, docs in FUNCTIONS.items()},
    }

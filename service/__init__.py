"""HTTP service over grail_core: upload graphs, build indexes in the background, answer reachability.

Public API: ``create_app`` and ``Settings`` (server side), ``GrailClient`` and ``AsyncGrailClient``
(``service.client``; its exceptions in ``service.exceptions``).
Imported lazily, so that the client and CLI do not load numba and the server.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "create_app",
    "Settings",
    "GrailClient",
    "AsyncGrailClient",
    "Retry",
    "GrailClientError",
    "GrailServiceError",
]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from .app import create_app

        return create_app
    if name == "Settings":
        from .settings import Settings

        return Settings
    if name in ("GrailClient", "AsyncGrailClient", "Retry", "GrailClientError", "GrailServiceError"):
        from . import client

        return getattr(client, name)
    raise AttributeError(f"module 'service' has no attribute {name!r}")

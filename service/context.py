"""What code running for a request knows of it without being handed it: its id (every log line) and its path
(every error answer's ``instance``). Set by ``logs.RequestIdMiddleware``, the outermost layer; build threads
take the id of the upload that queued them."""

from __future__ import annotations

import contextvars

__all__ = ["NO_REQUEST", "request_id", "request_path"]

NO_REQUEST = "-"

request_id: contextvars.ContextVar[str] = contextvars.ContextVar("grail_request_id", default=NO_REQUEST)
request_path: contextvars.ContextVar[str | None] = contextvars.ContextVar("grail_request_path", default=None)

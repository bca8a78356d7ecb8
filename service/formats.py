"""Which graph format a request body is in, from the ``format`` parameter or its Content-Type."""

from __future__ import annotations

from .errors import ServiceError

__all__ = ["CONTENT_TYPES", "format_for"]

# None: the core guesses from the content (a .gra header, JSON braces, gzip magic ...).
CONTENT_TYPES: dict[str, str | None] = {
    "text/x-grail-gra": "gra",
    "text/csv": "edgelist",
    "text/tab-separated-values": "edgelist",
    "text/plain": None,
    "application/json": "json",
    "application/octet-stream": None,
    "application/gzip": None,
    "application/x-gzip": None,
    # What curl --data-binary sends when the user gives no -H Content-Type: never a real form here.
    "application/x-www-form-urlencoded": None,
}


def format_for(explicit: str | None, content_type: str | None, content_encoding: str | None) -> str | None:
    """The format to hand read_graph; an explicit ``format`` wins over the Content-Type."""
    encoding = (content_encoding or "identity").strip().lower()
    if encoding not in ("identity", "gzip", "x-gzip"):
        raise ServiceError(
            415,
            "UnsupportedEncoding",
            f"Content-Encoding {encoding!r} is not supported; send the file plain or gzip-compressed",
        )
    if explicit is not None:
        return explicit
    media = (content_type or "application/octet-stream").split(";", 1)[0].strip().lower()
    if media not in CONTENT_TYPES:
        raise ServiceError(
            415,
            "UnknownFormat",
            f"cannot tell the graph format from Content-Type {media!r}; pass ?format=gra|edgelist|json "
            f"or use one of: {', '.join(CONTENT_TYPES)}",
        )
    return CONTENT_TYPES[media]

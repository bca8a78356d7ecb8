"""Which graph format a request body is in, from the ``format`` parameter or its Content-Type."""

from __future__ import annotations

from grail_core.format_names import FORMATS, REFUSED

from .errors import ServiceError

__all__ = ["CONTENT_TYPES", "REFUSED_TYPES", "format_for"]

# None: the core tells from the content (its signature: a .gra header, JSON braces, PAR1, ARROW1, <graphml ...)
# and reads anything else as an edge list.
CONTENT_TYPES: dict[str, str | None] = {
    "text/x-grail-gra": "gra",
    "text/csv": "edgelist",
    "text/tab-separated-values": "edgelist",
    "text/plain": None,
    "application/json": "json",
    "application/vnd.apache.parquet": "parquet",
    "application/x-parquet": "parquet",
    "application/vnd.apache.arrow.file": "arrow",
    "application/vnd.apache.arrow.stream": "arrow",
    "application/graphml+xml": "graphml",
    "application/xml": None,
    "text/xml": None,
    "text/x-matrix-market": "mtx",
    "application/x-matrix-market": "mtx",
    "application/octet-stream": None,
    "application/gzip": None,
    "application/x-gzip": None,
    # What curl --data-binary sends when the user gives no -H Content-Type: never a real form here.
    "application/x-www-form-urlencoded": None,
}
# Formats that have a media type of their own, refused before the upload is read.
REFUSED_TYPES = {"text/vnd.graphviz": "dot", "application/gexf+xml": "gexf"}


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
    if media in REFUSED_TYPES:
        raise ServiceError(
            415,
            "UnsupportedFormat",
            f"{REFUSED[REFUSED_TYPES[media]]} are not read; the supported formats are {', '.join(FORMATS)} "
            "(pass ?format=)",
        )
    if media not in CONTENT_TYPES:
        raise ServiceError(
            415,
            "UnknownFormat",
            f"cannot tell the graph format from Content-Type {media!r}; pass ?format={'|'.join(FORMATS)} "
            f"or use one of: {', '.join(CONTENT_TYPES)}",
        )
    return CONTENT_TYPES[media]

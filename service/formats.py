"""Which graph format a request body is in, from the ``format`` parameter or its Content-Type (the format table,
``grail_core.formats``)."""

from __future__ import annotations

from grail_core.formats import FORMAT_TABLE, FORMATS, UNTYPED_MEDIA_TYPES, format_of_media_type, refusal

from .errors import UNKNOWN_FORMAT, UNSUPPORTED_ENCODING, UNSUPPORTED_FORMAT, ServiceError

__all__ = ["MEDIA_TYPES", "format_for"]

# Every media type an upload may name, the formats' own first.
MEDIA_TYPES = (*(media for f in FORMAT_TABLE.values() if f.readable for media in f.media_types), *UNTYPED_MEDIA_TYPES)


def format_for(explicit: str | None, content_type: str | None, content_encoding: str | None) -> str | None:
    """The format to hand the reader (None: told from the content); an explicit ``format`` wins over the
    Content-Type."""
    encoding = (content_encoding or "identity").strip().lower()
    if encoding not in ("identity", "gzip", "x-gzip"):
        raise ServiceError(
            UNSUPPORTED_ENCODING,
            f"Content-Encoding {encoding!r} is not supported; send the file plain or gzip-compressed",
        )
    if explicit is not None:
        return explicit
    media = (content_type or "application/octet-stream").split(";", 1)[0].strip().lower()
    try:
        format = format_of_media_type(media)
    except KeyError:
        raise ServiceError(
            UNKNOWN_FORMAT,
            f"cannot tell the graph format from Content-Type {media!r}; pass ?format={'|'.join(FORMATS)} "
            f"or use one of: {', '.join(MEDIA_TYPES)}",
        ) from None
    if format is not None and not FORMAT_TABLE[format].readable:
        raise ServiceError(UNSUPPORTED_FORMAT, refusal(format, "pass ?format="))
    return format

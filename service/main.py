"""``grail-serve``: the HTTP server on uvicorn."""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence

import uvicorn

from .app import create_app
from .settings import Settings

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    try:
        settings = Settings.from_args(argv)
    except ValueError as exc:
        print(f"grail-serve: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    # No access log: one line per query would drown what matters (uploads, builds, errors); /metrics counts requests.
    uvicorn.run(
        create_app(settings),
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        access_log=False,
        server_header=False,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

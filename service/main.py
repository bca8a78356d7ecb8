"""``grail-serve``: the HTTP server on uvicorn."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from .settings import Settings, SettingsError

__all__ = ["main", "numba_cache_dir"]


def numba_cache_dir() -> Path:
    """Where numba keeps the compiled kernels (``cache=True``) so that a restart loads instead of compiling:
    ``NUMBA_CACHE_DIR`` when set, else ``grail/numba`` in the user's cache folder (``XDG_CACHE_HOME`` or
    ``~/.cache``), one place for every data directory and every installation of the same sources."""
    given = os.environ.get("NUMBA_CACHE_DIR")
    if given:
        return Path(given)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "grail" / "numba"


def main(argv: Sequence[str] | None = None) -> int:
    try:
        settings = Settings.from_args(argv)
    except SettingsError as exc:
        print(f"grail-serve: {exc}", file=sys.stderr)
        return 2
    # numba reads its cache folder once, when it is first imported: before the app (and grail_core) is.
    os.environ["NUMBA_CACHE_DIR"] = str(numba_cache_dir())

    import uvicorn

    from .app import create_app
    from .logs import configure_logging

    configure_logging(settings.log_level, settings.log_format)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    # No access log: one line per query would drown what matters (uploads, builds, errors); /metrics counts
    # requests. log_config=None: uvicorn's own lines go through the handler above (request ids, JSON).
    uvicorn.run(
        create_app(settings),
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        log_config=None,
        access_log=False,
        server_header=False,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

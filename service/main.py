"""``grail-serve``: the HTTP server on uvicorn."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .machine import raise_open_files_limit

if TYPE_CHECKING:
    from .settings import Settings


__all__ = ["main", "numba_cache_dir", "sources_digest"]

_COMPILED_PACKAGES = ("grail_core", "kernels", "service")


def numba_cache_dir() -> Path:
    """Where numba keeps the compiled kernels (``cache=True``) so that a restart loads instead of compiling: a
    folder per version of the sources (``sources_digest``) in ``NUMBA_CACHE_DIR`` when set, else in
    ``grail/numba`` of the user's cache folder (``XDG_CACHE_HOME`` or ``~/.cache``); shared by every data
    directory and every installation of the same sources. A ``NUMBA_CACHE_DIR`` that is already such a
    folder (a server started by another's environment) is kept."""
    given = os.environ.get("NUMBA_CACHE_DIR")
    base = (
        Path(given) if given else Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "grail" / "numba"
    )
    digest = sources_digest(_package_roots())
    return base if base.name == digest else base / digest


def sources_digest(roots: Sequence[Path]) -> str:
    """A digest of the Python sources under ``roots``. numba checks a cached kernel against its own file
    only: one that calls a function changed in another file would load stale code, which a folder per digest
    never holds."""
    digest = hashlib.blake2b(digest_size=8)
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            digest.update(path.relative_to(root).as_posix().encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def _package_roots() -> list[Path]:
    """The folders of the packages numba compiles, found without importing them (numba must not be imported
    before its cache folder is set)."""
    roots: list[Path] = []
    for package in _COMPILED_PACKAGES:
        spec = importlib.util.find_spec(package)
        if spec is not None and spec.submodule_search_locations:
            roots.extend(Path(location) for location in spec.submodule_search_locations)
    return roots


# numba reads its cache folder once, when it is first imported: before the settings are (they import grail_core,
# and numba with it), so that the server, its build workers and a test process sharing it use one folder.
os.environ["NUMBA_CACHE_DIR"] = str(numba_cache_dir())


def main(argv: Sequence[str] | None = None) -> int:
    from .access import load_keys
    from .settings import Settings, SettingsError

    try:
        settings = Settings.from_args(argv)
        _check_exposure(settings)
        _check_data_dir(settings.data_dir)
        # Read here, so that a bad keys file is one line on stderr; the app reads it again when it starts.
        load_keys(settings.api_keys_file)
    except SettingsError as exc:  # AccessKeysError too
        print(f"grail-serve: {exc}", file=sys.stderr)
        return 2
    open_files = raise_open_files_limit()

    import uvicorn

    from .app import create_app
    from .guards import ConnectionLimits, protocol_class
    from .logs import configure_logging

    configure_logging(settings.log_level, settings.log_format)
    from .state.errors import StateError
    from .stores import open_stores

    try:
        # Before anything else touches the data directory: a second server on it is refused here, in one line.
        stores = open_stores(settings)
    except StateError as exc:
        print(f"grail-serve: {exc.message}", file=sys.stderr)
        return 2
    limits = ConnectionLimits(
        max_connections=min(settings.max_connections, max(open_files - 64, 1)),
        max_header_bytes=settings.max_header_kb * 1024,
        header_timeout=settings.header_timeout,
    )
    # No access log unless asked for: one line per query would drown what matters (uploads, builds, errors);
    # /metrics counts requests. log_config=None: uvicorn's own lines, the access log's included, go through the
    # handler above (request ids, JSON).
    uvicorn.run(
        create_app(settings, stores),
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        log_config=None,
        access_log=settings.access_log,
        server_header=False,
        http=protocol_class(limits),
        # Idle keep-alive connections go after the header timeout too; a burst of clients queues in the backlog.
        timeout_keep_alive=max(int(settings.header_timeout), 1),
        backlog=_BACKLOG,
        h11_max_incomplete_event_size=limits.max_header_bytes,
    )
    return 0


_BACKLOG = 4096


def _check_exposure(settings: Settings) -> None:
    """Without access keys only this machine may connect, unless the operator says otherwise."""
    from .access import is_loopback
    from .settings import SettingsError

    if settings.api_keys_file is None and not settings.allow_anonymous and not is_loopback(settings.host):
        raise SettingsError(
            f"--host {settings.host} without --api-keys would let anyone who reaches it upload, read and delete "
            "graphs; give --api-keys FILE, bind 127.0.0.1, or pass --allow-anonymous"
        )


def _check_data_dir(data_dir: Path) -> None:
    """The data directory must exist (it is created) and be writable: say so in one line, not a traceback."""
    from .settings import SettingsError

    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=data_dir):
            pass
    except OSError as exc:
        raise SettingsError(f"the data directory {data_dir} is not writable: {exc.strerror or exc}") from None


if __name__ == "__main__":
    sys.exit(main())

"""Server settings: defaults, overridden by ``GRAIL_*`` environment variables, then by command-line flags."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path

from grail_core.names import MAX_NAME_BYTES

__all__ = ["Settings"]

_BACKENDS = ("auto", "cpu", "cuda")


@dataclass(frozen=True)
class Settings:
    """Everything the app factory needs; immutable so that every module sees the same values."""

    host: str = "127.0.0.1"
    port: int = 8000
    data_dir: Path = Path("data")
    backend: str = "auto"
    max_upload_mb: int = 1024
    max_graph_mb: int = 8192  # the graph's text after gzip decompression
    build_workers: int = 1
    max_get_pairs: int = 1000
    max_name_bytes: int = MAX_NAME_BYTES  # longest node name (UTF-8) an upload may hold
    log_level: str = "info"

    @property
    def max_upload_bytes(self) -> int:
        return self.max_upload_mb * 1024 * 1024

    @property
    def max_graph_bytes(self) -> int:
        return self.max_graph_mb * 1024 * 1024

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Read ``GRAIL_<FIELD>`` variables (``GRAIL_DATA_DIR``, ``GRAIL_PORT`` ...); unset ones keep defaults."""
        env = os.environ if environ is None else environ
        values: dict[str, object] = {}
        for field in fields(cls):
            raw = env.get(f"GRAIL_{field.name.upper()}")
            if raw is not None and raw != "":
                values[field.name] = _convert(field.name, raw)
        return replace(cls(), **values)

    @classmethod
    def from_args(cls, argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> Settings:
        """Flags win over the environment, which wins over the defaults."""
        base = cls.from_env(environ)
        parser = argparse.ArgumentParser(prog="grail-serve", description="Serve GRAIL reachability indexes over HTTP.")
        parser.add_argument("--host", default=base.host, help="interface to bind (default %(default)s)")
        parser.add_argument("--port", type=int, default=base.port, help="TCP port (default %(default)s)")
        parser.add_argument(
            "--data-dir", type=Path, default=base.data_dir, help="uploads and index files (default %(default)s)"
        )
        parser.add_argument("--backend", choices=_BACKENDS, default=base.backend, help="default build backend")
        parser.add_argument(
            "--max-upload-mb", type=int, default=base.max_upload_mb, help="largest accepted request body"
        )
        parser.add_argument(
            "--max-graph-mb", type=int, default=base.max_graph_mb, help="largest graph text after decompression"
        )
        parser.add_argument(
            "--build-workers", type=int, default=base.build_workers, help="indexes built at the same time"
        )
        parser.add_argument("--max-get-pairs", type=int, default=base.max_get_pairs, help="pairs allowed in one GET")
        parser.add_argument(
            "--max-name-bytes", type=int, default=base.max_name_bytes, help="longest node name in an upload (UTF-8)"
        )
        parser.add_argument("--log-level", default=base.log_level, choices=("debug", "info", "warning", "error"))
        args = parser.parse_args(argv)
        settings = replace(base, **{name.replace("-", "_"): value for name, value in vars(args).items()})
        settings.check()
        return settings

    def check(self) -> None:
        """Reject settings that would only fail later, inside a request."""
        if self.backend not in _BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(_BACKENDS)}, not {self.backend!r}")
        for name in ("max_upload_mb", "max_graph_mb", "build_workers", "max_get_pairs", "max_name_bytes"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")


def _convert(name: str, raw: str) -> object:
    kind = {f.name: f.type for f in fields(Settings)}[name]
    if kind == "int":
        return int(raw)
    if kind == "Path":
        return Path(raw)
    return raw

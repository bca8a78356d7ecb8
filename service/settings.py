"""Server settings: defaults, then a ``.env`` file, then ``GRAIL_*`` environment variables, then flags.

pydantic-settings reads and validates the ``.env`` file (in the working directory) and the environment;
argparse reads the flags, which are made from the same fields. A bad value stops the start with a
``SettingsError`` that names where the value came from (``GRAIL_PORT``, ``--port`` or ``.env``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from grail_core.backend_names import DEFAULT_BACKEND, BackendName
from grail_core.names import MAX_NAME_BYTES

from .machine import memory_bytes, open_files_limit
from .roles import ROLES, Role, RoleName

__all__ = ["Settings", "SettingsError", "ENV_PREFIX", "ENV_FILE", "machine_defaults"]

ENV_PREFIX = "GRAIL_"
ENV_FILE = ".env"
_MIB = 1024 * 1024
# Open files kept for everything but connections: index files (memory-mapped), uploads, logs, pipes.
_RESERVED_FILES = 1024
# Flags whose name is not the field's.
_FLAG_NAMES = {"api_keys_file": "--api-keys"}


def machine_defaults() -> dict[str, int]:
    """The limits' defaults on this machine: builds may use half its memory (or of the container's limit), a
    graph's text a quarter of that, an upload the graph's size up to 1 GiB, concurrent query batches an eighth
    of the memory; connections all open files but a reserve."""
    memory_mb = memory_bytes() // _MIB
    build_mb = max(memory_mb // 2, 64)
    graph_mb = max(build_mb // 4, 16)
    return {
        "max_build_memory_mb": build_mb,
        "max_graph_mb": graph_mb,
        "max_upload_mb": min(graph_mb, 1024),
        "max_batch_memory_mb": max(memory_mb // 8, 64),
        "max_connections": max(min(open_files_limit(), 1 << 20) - _RESERVED_FILES, 64),
    }


class SettingsError(ValueError):
    """Invalid settings; the message names each bad value's flag or variable."""


class Settings(BaseSettings):
    """Everything the app factory needs; frozen so that every module sees the same values."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, env_file=ENV_FILE, extra="ignore", frozen=True)

    role: RoleName = Field(
        "all",
        description="what this process does: all (serve and build, one process), api (serve; builds elsewhere) or "
        "builder (build jobs; /health and /ready only); api and builder need a PostgreSQL --database-url",
    )
    host: str = Field("127.0.0.1", description="interface to bind")
    port: int = Field(8000, ge=0, le=65535, description="TCP port")
    data_dir: Path = Field(Path("data"), description="the metadata database, uploads and index versions")
    database_url: str | None = Field(
        None,
        description="metadata database: postgresql://USER:PASSWORD@HOST:PORT/DB to share the state between servers "
        "(default: SQLite, grail.db in the data dir, one server)",
    )
    store: str | None = Field(
        None,
        description="where uploads and index versions live: s3://BUCKET/PREFIX (endpoint and credentials from the "
        "AWS_* variables) or file:///PATH (default: the data dir)",
    )
    min_version_timeout_s: float = Field(
        5.0, ge=0, description="seconds a read with min_version waits for that version (503 with Retry-After after)"
    )
    replica_cache_mb: int = Field(
        4096,
        ge=0,
        description="MiB of loaded index versions an api replica keeps (least recently used out; a graph is loaded "
        "on its first use; 0: only the graph used last)",
    )
    job_lease_s: float = Field(
        30.0, gt=0, description="seconds a claimed build job stays this server's without a heartbeat"
    )
    version_grace_s: float = Field(
        60.0, ge=0, description="seconds a replaced index version is kept before its files are removed"
    )
    backend: BackendName = Field(DEFAULT_BACKEND, description="default build backend")
    max_upload_mb: int = Field(0, ge=1, description="largest accepted request body, MiB")
    max_graph_mb: int = Field(0, ge=1, description="largest graph text after gzip decompression, MiB")
    max_build_memory_mb: int = Field(0, ge=16, description="memory all builds together may use, MiB")
    build_workers: int = Field(1, ge=1, description="large indexes built at the same time (small ones have a lane)")
    max_queued_builds: int = Field(64, ge=1, description="builds waiting at most (503 beyond)")
    max_get_pairs: int = Field(1000, ge=1, description="pairs allowed in one GET")
    max_name_bytes: int = Field(MAX_NAME_BYTES, ge=1, description="longest node name in an upload, UTF-8 bytes")
    max_batch_memory_mb: int = Field(0, ge=1, description="memory of the query batches running at once, MiB")
    max_concurrent_uploads: int = Field(8, ge=1, description="upload bodies read at once (503 beyond)")
    max_connections: int = Field(0, ge=1, description="open connections at most (new ones closed beyond)")
    max_header_kb: int = Field(16, ge=1, le=1024, description="largest request line and headers, KiB (431 beyond)")
    header_timeout: float = Field(10.0, gt=0, description="seconds a client may take to send its headers (408)")
    body_timeout: float = Field(
        30.0, gt=0, description="seconds a body may pause, and after which it must average 1 KiB/s (408)"
    )
    send_timeout: float = Field(
        30.0, gt=0, description="seconds a streamed answer waits for a client that does not read (closed beyond)"
    )
    api_keys_file: Path | None = Field(None, description="file of 'KEY SCOPE' lines (read or write): keys required")
    allow_anonymous: bool = Field(False, description="serve a non-loopback --host without access keys")
    cors_origins: str = Field("", description="comma-separated web origins allowed to call the API (CORS)")
    log_level: Literal["debug", "info", "warning", "error"] = Field("info", description="log threshold")
    log_format: Literal["text", "json"] = Field("text", description="log lines as text or as JSON objects")
    access_log: bool = Field(False, description="a log line for every request (method, path, status, client)")

    @model_validator(mode="before")
    @classmethod
    def _from_machine(cls, values: Any) -> Any:
        # Limits not given take this machine's defaults; a graph's and an upload's follow a given build memory.
        if not isinstance(values, dict):
            return values
        values = dict(values)
        defaults = machine_defaults()
        build_mb = values.get("max_build_memory_mb")
        if build_mb is not None and "max_graph_mb" not in values:
            with contextlib.suppress(TypeError, ValueError):
                defaults["max_graph_mb"] = max(int(build_mb) // 4, 16)
                defaults["max_upload_mb"] = min(defaults["max_graph_mb"], 1024)
        if "max_graph_mb" in values and "max_upload_mb" not in values:
            with contextlib.suppress(TypeError, ValueError):
                defaults["max_upload_mb"] = min(int(values["max_graph_mb"]), 1024)
        for name, value in defaults.items():
            values.setdefault(name, value)
        return values

    @field_validator("api_keys_file", "database_url", "store", mode="before")
    @classmethod
    def _no_file(cls, value: Any) -> Any:
        # An empty variable (compose's "${GRAIL_API_KEYS_FILE:-}") means none given, not the current folder.
        return None if isinstance(value, str) and not value.strip() else value

    @model_validator(mode="after")
    def _role_needs_shared_state(self) -> Settings:
        role = ROLES[self.role]
        if role.needs_shared_database and self.embedded:
            raise ValueError(
                f"--role {self.role} shares the state with other processes, which needs a PostgreSQL "
                "--database-url (SQLite in the data directory has one owner); use --role all for one process"
            )
        return self

    @field_validator("role", mode="before")
    @classmethod
    def _role(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    @property
    def embedded(self) -> bool:
        """Whether the metadata store is the embedded SQLite (one server per data dir), not a shared database."""
        return not (self.database_url or "").startswith(("postgresql://", "postgres://"))

    @field_validator("backend", "log_level", "log_format", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    @property
    def role_spec(self) -> Role:
        """What this process does (service.roles)."""
        return ROLES[self.role]

    @property
    def replica_cache_bytes(self) -> int:
        return self.replica_cache_mb * _MIB

    @property
    def max_upload_bytes(self) -> int:
        return self.max_upload_mb * _MIB

    @property
    def max_graph_bytes(self) -> int:
        return self.max_graph_mb * _MIB

    @property
    def max_build_memory_bytes(self) -> int:
        return self.max_build_memory_mb * _MIB

    @property
    def max_batch_memory_bytes(self) -> int:
        return self.max_batch_memory_mb * _MIB

    @property
    def cors_origin_list(self) -> list[str]:
        return [origin.strip().rstrip("/") for origin in self.cors_origins.split(",") if origin.strip()]

    @classmethod
    def from_env(cls) -> Settings:
        """Defaults, ``.env`` and ``GRAIL_*`` variables."""
        return _validated({})

    @classmethod
    def from_args(cls, argv: Sequence[str] | None = None) -> Settings:
        """Flags win over the environment, which wins over ``.env``, which wins over the defaults."""
        parser = argparse.ArgumentParser(
            prog="grail-serve",
            description="Serve GRAIL reachability indexes over HTTP. Every flag has a GRAIL_* variable "
            f"(--data-dir: GRAIL_DATA_DIR), also read from {ENV_FILE} in the working directory.",
        )
        defaults = machine_defaults()
        for name, field in cls.model_fields.items():
            default = defaults.get(name, field.default)
            shown = f"{default} on this machine" if name in defaults else default
            help_text = f"{field.description} (default {shown}; env {_variable(name)})"
            if field.annotation is bool:
                # only the flags given override the environment
                parser.add_argument(_flag(name), dest=name, action="store_const", const=True, help=help_text)
                parser.set_defaults(**{name: argparse.SUPPRESS})
                continue
            choices = get_args(field.annotation) if "Literal" in str(field.annotation) else None
            parser.add_argument(
                _flag(name), dest=name, choices=choices or None, default=argparse.SUPPRESS, help=help_text
            )
        return _validated({k: v for k, v in vars(parser.parse_args(argv)).items() if v is not argparse.SUPPRESS})


def _flag(name: str) -> str:
    return _FLAG_NAMES.get(name, "--" + name.replace("_", "-"))


def _variable(name: str) -> str:
    return ENV_PREFIX + name.upper()


def _validated(flags: dict[str, Any]) -> Settings:
    try:
        return Settings(**flags)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            if not error["loc"]:  # a rule over several settings: its message names them
                problems.append(str(error["msg"]).removeprefix("Value error, "))
                continue
            name = str(error["loc"][0])
            problems.append(f"{_origin(name, flags)}: {error['msg']} (got {error['input']!r})")
        raise SettingsError("; ".join(problems)) from None


def _origin(name: str, flags: dict[str, Any]) -> str:
    """Where a field's value came from, in the precedence order Settings applies."""
    if name in flags:
        return _flag(name)
    variable = _variable(name)
    if any(key.upper() == variable for key in os.environ):
        return variable
    return f"{variable} in {Path(ENV_FILE).resolve()}"

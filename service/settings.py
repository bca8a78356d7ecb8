"""Server settings: defaults, then a ``.env`` file, then ``GRAIL_*`` environment variables, then flags.

pydantic-settings reads and validates the ``.env`` file (in the working directory) and the environment;
argparse reads the flags, which are made from the same fields. A bad value stops the start with a
``SettingsError`` that names where the value came from (``GRAIL_PORT``, ``--port`` or ``.env``).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from grail_core.backend_names import DEFAULT_BACKEND, BackendName
from grail_core.names import MAX_NAME_BYTES

__all__ = ["Settings", "SettingsError", "ENV_PREFIX", "ENV_FILE"]

ENV_PREFIX = "GRAIL_"
ENV_FILE = ".env"


class SettingsError(ValueError):
    """Invalid settings; the message names each bad value's flag or variable."""


class Settings(BaseSettings):
    """Everything the app factory needs; frozen so that every module sees the same values."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, env_file=ENV_FILE, extra="ignore", frozen=True)

    host: str = Field("127.0.0.1", description="interface to bind")
    port: int = Field(8000, ge=0, le=65535, description="TCP port")
    data_dir: Path = Field(Path("data"), description="uploads and index files")
    backend: BackendName = Field(DEFAULT_BACKEND, description="default build backend")
    max_upload_mb: int = Field(1024, ge=1, description="largest accepted request body, MiB")
    max_graph_mb: int = Field(8192, ge=1, description="largest graph text after gzip decompression, MiB")
    build_workers: int = Field(1, ge=1, description="indexes built at the same time")
    max_get_pairs: int = Field(1000, ge=1, description="pairs allowed in one GET")
    max_name_bytes: int = Field(MAX_NAME_BYTES, ge=1, description="longest node name in an upload, UTF-8 bytes")
    log_level: Literal["debug", "info", "warning", "error"] = Field("info", description="log threshold")
    log_format: Literal["text", "json"] = Field("text", description="log lines as text or as JSON objects")

    @field_validator("backend", "log_level", "log_format", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    @property
    def max_upload_bytes(self) -> int:
        return self.max_upload_mb * 1024 * 1024

    @property
    def max_graph_bytes(self) -> int:
        return self.max_graph_mb * 1024 * 1024

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
        for name, field in cls.model_fields.items():
            choices = get_args(field.annotation) or None
            parser.add_argument(
                _flag(name),
                dest=name,
                choices=choices,
                default=argparse.SUPPRESS,  # only the flags given override the environment
                help=f"{field.description} (default {field.default}; env {_variable(name)})",
            )
        return _validated(vars(parser.parse_args(argv)))


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _variable(name: str) -> str:
    return ENV_PREFIX + name.upper()


def _validated(flags: dict[str, Any]) -> Settings:
    try:
        return Settings(**flags)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            name = str(error["loc"][0]) if error["loc"] else ""
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

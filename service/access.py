"""Who may call the API: access keys (``--api-keys FILE``) and the origins of web pages (``--cors-origins``).

The keys file has one ``KEY SCOPE`` a line (``#`` comments and blank lines allowed); SCOPE is ``read`` or
``write``, and write includes read. Clients send ``Authorization: Bearer KEY``: without a key, or with one not in
the file, 401; a read key on an upload or a delete, 403. ``/health`` stays open (liveness). Keys are kept as
SHA-256 digests and compared in constant time, every key every time; they are never logged.

Without a keys file the server serves anyone who reaches it, which main allows only on a loopback address
unless ``--allow-anonymous``. A web page in a browser on the same machine reaches loopback too: a write that
carries an ``Origin`` header (every browser's POST and DELETE does) is refused (403) unless that origin is in
``--cors-origins``, or is this server's own loopback address (its /docs page). No CORS header is sent unless
``--cors-origins`` names origins.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from starlette.types import ASGIApp, Receive, Scope, Send

from .errors import FORBIDDEN, FORBIDDEN_ORIGIN, UNAUTHORIZED, ServiceError, response_for
from .settings import SettingsError

__all__ = [
    "AccessKeys",
    "AccessKeysError",
    "AccessMiddleware",
    "load_keys",
    "is_loopback",
    "OPEN_PATHS",
    "WRITE_METHODS",
]

log = logging.getLogger("grail.service.access")

Scope_ = Literal["read", "write"]
# Probes: load balancers and orchestrators check liveness and readiness without a key.
OPEN_PATHS = frozenset({"/health", "/ready"})
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# Batches of queries are POSTs that change nothing: a read key may send them.
_READ_POSTS = ("/queries",)
_MIN_KEY_CHARS = 16


class AccessKeysError(SettingsError):
    """The keys file cannot be used; the message names the line (never the key)."""


@dataclass(frozen=True)
class AccessKeys:
    """The digests of the keys of a keys file and their scopes."""

    digests: tuple[tuple[bytes, Scope_], ...]

    @classmethod
    def load(cls, path: Path) -> AccessKeys:
        try:
            text = path.read_text(encoding="utf-8")
            mode = path.stat().st_mode
        except (OSError, UnicodeDecodeError) as exc:
            raise AccessKeysError(f"cannot read the keys file {path}: {exc}") from None
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            log.warning("the keys file %s can be read by other users (chmod 600 %s)", path, path)
        entries: list[tuple[bytes, Scope_]] = []
        for number, line in enumerate(text.splitlines(), start=1):
            words = line.split()
            if not words or words[0].startswith("#"):
                continue
            if len(words) != 2 or words[1] not in ("read", "write"):
                raise AccessKeysError(f"{path}, line {number}: expected 'KEY SCOPE' with SCOPE read or write")
            if len(words[0]) < _MIN_KEY_CHARS:
                raise AccessKeysError(f"{path}, line {number}: a key must have at least {_MIN_KEY_CHARS} characters")
            scope: Scope_ = "write" if words[1] == "write" else "read"
            entries.append((_digest(words[0]), scope))
        if not entries:
            raise AccessKeysError(f"the keys file {path} holds no key")
        return cls(tuple(entries))

    def scope_of(self, key: str) -> Scope_ | None:
        """The key's scope, or None; the time it takes does not depend on which key matches, or where."""
        given = _digest(key)
        found: Scope_ | None = None
        for digest, scope in self.digests:
            if hmac.compare_digest(given, digest):
                found = scope
        return found


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` keeps the server on this machine (127.0.0.0/8, ::1, localhost)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class AccessMiddleware:
    """Pure ASGI: keys (when configured) and the write-origin rule, before any route runs or any body is read."""

    def __init__(self, app: ASGIApp, keys: AccessKeys | None, origins: Sequence[str]) -> None:
        self.app = app
        self.keys = keys
        self.origins = frozenset(origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        try:
            self._check(scope)
        except ServiceError as exc:
            await response_for(exc)(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _check(self, scope: Scope) -> None:
        method = scope["method"]
        writes = method in WRITE_METHODS and not scope["path"].endswith(_READ_POSTS)
        headers = dict(scope["headers"])
        origin = headers.get(b"origin")
        if writes and origin is not None and not self._origin_allowed(origin, headers.get(b"host", b"")):
            raise ServiceError(
                FORBIDDEN_ORIGIN,
                "writes from a web page of another origin are refused; list the origin in --cors-origins",
            )
        if self.keys is None or method == "OPTIONS":
            return
        scheme, _, key = headers.get(b"authorization", b"").decode("latin-1").partition(" ")
        found = self.keys.scope_of(key.strip()) if scheme.lower() == "bearer" and key.strip() else None
        if found is None:
            raise ServiceError(
                UNAUTHORIZED,
                "an access key is required: send 'Authorization: Bearer KEY'",
                {"WWW-Authenticate": 'Bearer realm="grail"'},
            )
        if writes and found != "write":
            raise ServiceError(FORBIDDEN, "this key may read, not upload or delete (its scope is read)")

    def _origin_allowed(self, origin: bytes, host: bytes) -> bool:
        text = origin.decode("latin-1").rstrip("/")
        if text in self.origins:
            return True
        # The server's own pages (/docs) on a loopback address: DNS rebinding cannot forge a loopback Host.
        own = host.decode("latin-1")
        hostname = own.rsplit(":", 1)[0] if not own.endswith("]") else own
        return text == f"http://{own}" and is_loopback(hostname)


def load_keys(path: Path | None) -> AccessKeys | None:
    """The keys of ``path`` (``--api-keys``/``GRAIL_API_KEYS_FILE``), or None when no file is configured."""
    if path is None or not os.fspath(path):
        return None
    return AccessKeys.load(path)

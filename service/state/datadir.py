"""One server per embedded data directory, like PostgreSQL's ``postmaster.pid``.

``<data_dir>/grail.pid`` names its owner (pid, host, start time, port) and is held with ``flock``, which the
kernel releases when the owning process dies, however it dies: a second server on the same directory is
refused with a message naming the pid and host that hold it, and a lock left by a dead process is simply taken
over (its file is rewritten). The lock is the file's inode: after taking it, the holder checks that the path
still names that inode (another process may have removed the file between its open and its lock), and tries
again if not. Released by ``release`` (the file removed first, then unlocked) or by the process's end.

Only the embedded store needs it: with PostgreSQL several servers share the state by design.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import socket
import time
from pathlib import Path
from typing import Any

from .errors import DataDirLocked, storage_error

__all__ = ["DataDirLock", "LOCK_FILE"]

log = logging.getLogger("grail.service.state")

LOCK_FILE = "grail.pid"


class DataDirLock:
    def __init__(self, data_dir: Path, port: int | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.path = self.data_dir / LOCK_FILE
        self.port = port
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> DataDirLock:
        """Take the lock or raise DataDirLocked naming its holder."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                owner = _read_owner(fd)
                os.close(fd)
                raise DataDirLocked(_refusal(self.data_dir, owner), owner) from None
            except BaseException:
                os.close(fd)
                raise
            try:
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if not same:  # the file was removed (and maybe made again) between our open and our lock
                os.close(fd)
                continue
            break
        previous = _read_owner(fd)
        if previous.get("pid"):
            log.info(
                "taking over the data directory lock of pid %s on %s, which is no longer running",
                previous.get("pid"),
                previous.get("host"),
            )
        try:
            self._write_owner(fd)
        except OSError as exc:
            os.close(fd)
            known = storage_error(exc, "writing the data directory's lock file")
            if known is not None:
                raise known from exc
            raise
        self._fd = fd
        return self

    def _write_owner(self, fd: int) -> None:
        owner = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "port": self.port,
            "data_dir": str(self.data_dir.resolve()),
        }
        data = (json.dumps(owner) + "\n").encode()
        os.ftruncate(fd, 0)
        os.pwrite(fd, data, 0)
        os.fsync(fd)

    def set_port(self, port: int) -> None:
        """Record the port once the server is listening (a port of 0 is chosen by the system)."""
        self.port = port
        if self._fd is not None:
            self._write_owner(self._fd)

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        # Removed while still locked: a server that opens the path from now on makes a new file.
        with contextlib.suppress(OSError):
            self.path.unlink()
        os.close(fd)

    def __enter__(self) -> DataDirLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def _read_owner(fd: int) -> dict[str, Any]:
    try:
        data = os.pread(fd, 4096, 0)
        owner = json.loads(data) if data.strip() else {}
        return owner if isinstance(owner, dict) else {}
    except (OSError, ValueError):
        return {}


def _refusal(data_dir: Path, owner: dict[str, Any]) -> str:
    who = f"pid {owner.get('pid', '?')} on host {owner.get('host', '?')}"
    if owner.get("port"):
        who += f", port {owner['port']}"
    if owner.get("started_at"):
        who += f", since {owner['started_at']}"
    return (
        f"the data directory {data_dir} is in use by another grail server ({who}); stop it, give this server "
        "its own --data-dir, or share the state through --database-url postgresql://..."
    )

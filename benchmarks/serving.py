"""A real ``grail-serve`` for the service benchmarks: its own process group (a kill takes its build workers
too, as a container's would), the resident memory of the group, and waits on its routes."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil

REPO = Path(__file__).resolve().parents[1]

__all__ = ["GrailServer", "free_port", "group_rss"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def group_rss(pid: int) -> int:
    """Resident bytes of a process and all its children (the server and its build workers)."""
    try:
        root = psutil.Process(pid)
        processes = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0
    total = 0
    for process in processes:
        try:
            total += process.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total


class GrailServer:
    """``python -m service.main`` on a free loopback port with the CPU engine; ``args`` are more options;
    ``tree``: the checkout whose server runs (its own sources first on the path: ``-m`` from its folder)."""

    def __init__(self, data_dir: Path, log_path: Path, *args: str, tree: Path = REPO) -> None:
        self.tree = tree
        self.data_dir = data_dir
        self.log_path = log_path
        self.args = args
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.started_at = 0.0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def launch(self) -> GrailServer:
        """The process started (``started_at``: time.monotonic() just before); nothing waited for."""
        self.port = free_port()
        command = [sys.executable, "-m", "service.main", "--host", "127.0.0.1", "--port", str(self.port)]
        command += ["--data-dir", str(self.data_dir), "--backend", "cpu", *self.args]
        self.started_at = time.monotonic()
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                command, cwd=self.tree, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        return self

    def wait_for(self, path: str, timeout: float = 900.0, status: int = 200) -> float:
        """Seconds from the launch until ``path`` answers ``status``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"grail-serve exited with {self.proc.returncode}; see {self.log_path}")
            try:
                if httpx.get(self.url + path, timeout=5).status_code == status:
                    return time.monotonic() - self.started_at
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        raise TimeoutError(path)

    def kill(self) -> None:
        """SIGKILL to the whole group: no shutdown runs."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.kill()

"""A real ``grail-serve`` process on a free loopback port, driven by the package's own httpx client."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest

from service.client import GrailClient

REPO = Path(__file__).resolve().parents[2]
DATASETS = Path(os.environ.get("GRAIL_DATASETS", REPO.parent / "shared" / "datasets"))


def dataset(name: str) -> Path:
    path = DATASETS / name
    if not path.is_file():
        pytest.skip(f"dataset {path} is absent (set GRAIL_DATASETS)")
    return path


def read_pairs(name: str) -> np.ndarray:
    return np.loadtxt(dataset(name), dtype=np.int64, ndmin=2)


def read_answers(name: str) -> np.ndarray:
    return np.loadtxt(dataset(name), dtype=np.int64).astype(bool)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Server:
    """One grail-serve process; ``restart`` keeps the data directory, like a redeploy."""

    def __init__(self, data_dir: Path, log_path: Path, *args: str) -> None:
        self.data_dir = data_dir
        self.log_path = log_path
        self.args = args
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 90.0) -> Server:
        self.port = free_port()
        command = [
            sys.executable,
            "-m",
            "service.main",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--data-dir",
            str(self.data_dir),
            "--backend",
            "cpu",
            *self.args,
        ]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"grail-serve exited with {self.proc.returncode}:\n{self.log()}")
            try:
                if httpx.get(f"{self.url}/health", timeout=1.0).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"grail-serve did not answer /health within {timeout} s:\n{self.log()}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def restart(self) -> Server:
        self.stop()
        return self.start()

    def client(self) -> GrailClient:
        return GrailClient(self.url, timeout=120.0)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("grail-server")
    srv = Server(root / "data", root / "server.log", "--max-upload-mb", "12", "--max-graph-mb", "24").start()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def client(server: Server) -> Iterator[GrailClient]:
    with server.client() as c:
        yield c


@pytest.fixture()
def fresh_server(tmp_path: Path) -> Iterator[Server]:
    """A server of its own, for tests that restart or kill it."""
    srv = Server(tmp_path / "data", tmp_path / "server.log")
    yield srv
    srv.stop()

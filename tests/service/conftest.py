"""A real ``grail-serve`` process on a free loopback port, driven by the package's own httpx client, and the
generated graphs (tests/generated.py) it is tested on: nothing outside the repository is needed."""

from __future__ import annotations

import contextlib
import gzip
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import psycopg
import pytest

from service.client import GrailClient
from tests.generated import GeneratedGraph, generate

REPO = Path(__file__).resolve().parents[2]


class GraphFiles:
    """A folder of graphs and query sets in the shared datasets' layout (NAME.gra, NAME[.pos].que/.ans)."""

    def __init__(self, folder: Path, graphs: dict[str, GeneratedGraph]) -> None:
        self.folder = folder
        self.graphs = graphs

    def path(self, name: str) -> Path:
        return self.folder / name

    def pairs(self, name: str) -> np.ndarray:
        return np.loadtxt(self.path(name), dtype=np.int64, ndmin=2)

    def answers(self, name: str) -> np.ndarray:
        return np.loadtxt(self.path(name), dtype=np.int64, ndmin=1).astype(bool)


@pytest.fixture(scope="session")
def files(tmp_path_factory: pytest.TempPathFactory) -> GraphFiles:
    """``dag`` and ``cyclic`` (tests/generated.py), a second or so to make."""
    folder = tmp_path_factory.mktemp("graphs")
    return GraphFiles(folder, generate(folder, ("dag", "cyclic")))


@pytest.fixture(scope="session")
def big_files(files: GraphFiles) -> GraphFiles:
    """``big`` beside the others (and ``big.gra.gz``, 14 MB of text in a body under the test server's 12 MiB
    limit): a build that takes seconds, about 8 s to make, once a session."""
    if "big" not in files.graphs:
        files.graphs.update(generate(files.folder, ("big",)))
        files.path("big.gra.gz").write_bytes(gzip.compress(files.path("big.gra").read_bytes(), compresslevel=1))
    return files


def wait_until(condition: Callable[[], Any], timeout: float = 60.0, interval: float = 0.02) -> Any:
    """Poll ``condition`` until it returns something true, and return it; AssertionError after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not met within {timeout} s")
        time.sleep(interval)


def stored_uploads(data_dir: Path) -> list[str]:
    """The uploads the data directory's artifact store holds (whole or being written)."""
    folder = data_dir / "uploads"
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# The build workers every server starts (the small lane's and the first of the main lane's).
_FIRST_WORKERS = (b"grail-build-small", b"grail-build-main0")


class Server:
    """One grail-serve process; ``restart`` keeps the data directory, like a redeploy. ``tree``: another checkout
    to run the server of, with its own ``.venv`` (a benchmark's baseline); this one by default."""

    def __init__(
        self, data_dir: Path, log_path: Path, *args: str, env: dict[str, str] | None = None, tree: Path = REPO
    ) -> None:
        self.data_dir = data_dir
        self.log_path = log_path
        self.args = args
        self.env = env  # None: this process's environment
        self.tree = tree
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 90.0, workers: bool = True) -> Server:
        """Until /health answers and (``workers``) the build workers say they are ready: their warm-up takes
        seconds, minutes on a busy machine, which a test's timeout would otherwise pay for at its first upload."""
        self.port = free_port()
        log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
        command = [
            sys.executable if self.tree == REPO else str(self.tree / ".venv" / "bin" / "python"),
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
            self.proc = subprocess.Popen(command, cwd=self.tree, stdout=log, stderr=subprocess.STDOUT, env=self.env)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"grail-serve exited with {self.proc.returncode}:\n{self.log()}")
            try:
                if httpx.get(f"{self.url}/health", timeout=1.0).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        else:
            raise RuntimeError(f"grail-serve did not answer /health within {timeout} s:\n{self.log()}")
        deadline = time.monotonic() + 600
        while workers and not self._workers_ready(log_start):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the build workers did not start:\n{self._log_since(log_start)[-3000:]!r}")
            time.sleep(0.1)
        return self

    def _workers_ready(self, log_start: int) -> bool:
        log = self._log_since(log_start)
        return all(b"build worker %s ready" % lane in log for lane in _FIRST_WORKERS)

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

    def wait_until_ready(self, timeout: float = 240.0) -> dict:
        """Until /ready says 200: the query kernels compiled (minutes on a cold numba cache, on two cores)."""
        deadline = time.monotonic() + timeout
        while True:
            response = httpx.get(f"{self.url}/ready", timeout=5.0)
            if response.status_code == 200 or time.monotonic() > deadline:
                assert response.status_code == 200, response.text
                return response.json()
            time.sleep(0.1)

    def client(self, api_key: str | None = None) -> GrailClient:
        return GrailClient(self.url, timeout=120.0, api_key=api_key)

    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def children(self) -> set[int]:
        """The build workers' process ids (the server's children)."""
        kids: set[int] = set()
        for task in Path(f"/proc/{self.pid()}/task").iterdir():
            with contextlib.suppress(OSError):
                kids |= {int(pid) for pid in (task / "children").read_text().split()}
        return kids

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def _log_since(self, offset: int) -> bytes:
        return self.log_path.read_bytes()[offset:] if self.log_path.exists() else b""


class Cluster:
    """Server processes in roles (``api``, ``builder``, ``all``) that share one PostgreSQL database and one
    artifact store (``store``: ``file://FOLDER`` or ``s3://BUCKET/PREFIX``); ``options`` are given to each."""

    def __init__(
        self, root: Path, database_url: str, store: str, *options: str, env: dict[str, str] | None = None
    ) -> None:
        self.root = root
        self.database_url = database_url
        self.store = store
        self.options = options
        self.env = env
        self.servers: dict[str, Server] = {}

    def server(self, name: str, role: str, *extra: str) -> Server:
        """Start server ``name`` in ``role`` (an API replica starts no build worker to wait for)."""
        server = Server(
            self.root / name,
            self.root / f"{name}.log",
            "--role",
            role,
            "--database-url",
            self.database_url,
            "--store",
            self.store,
            # A replica given a min_version waits this long for it: on a loaded machine a replica may take more
            # than a few seconds to read and apply an update journaled by another.
            "--min-version-timeout-s",
            "30",
            *self.options,
            *extra,
            env=self.env,
        )
        self.servers[name] = server
        return server.start(workers=role != "api")

    def rows(self, sql: str, *params: object) -> list[tuple]:
        with psycopg.connect(self.database_url) as conn:
            return list(conn.execute(sql, params).fetchall())

    def stop(self) -> None:
        for server in self.servers.values():
            server.stop()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("grail-server")
    srv = Server(
        root / "data", root / "server.log", "--max-upload-mb", "12", "--max-graph-mb", "24", "--version-grace-s", "1"
    ).start()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def client(server: Server) -> Iterator[GrailClient]:
    with server.client() as c:
        yield c


@pytest.fixture()
def fresh_server(tmp_path: Path) -> Iterator[Server]:
    """A server of its own, for tests that restart or kill it."""
    srv = Server(tmp_path / "data", tmp_path / "server.log", "--version-grace-s", "1")
    yield srv
    srv.stop()


def publish_in_process(registry: Any, tmp_path: Path, graph_id: str, name: str, text: bytes) -> None:
    """Upload ``text`` as graph ``graph_id`` named ``name`` through ``registry``, claim its job, build it on the
    CPU and publish it, all in this process (no server, no build worker)."""
    from grail_core import ReachabilityIndex
    from service.options import UploadOptions

    registry.artifacts.put_upload(graph_id, [text])
    registry.add(
        graph_id,
        UploadOptions(backend="cpu"),
        name=name,
        replace=False,
        upload_key=graph_id,
        upload_bytes=len(text),
        memory_bytes=0,
        request_id="-",
    )
    job = registry.metadata.claim_job("test", 600)
    assert job is not None
    ReachabilityIndex.from_bytes(text, backend="cpu").save(tmp_path / f"built-{graph_id}")
    assert registry.publish(job, tmp_path / f"built-{graph_id}", None, "cpu") is not None

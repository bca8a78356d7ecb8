"""A local S3-compatible server for the tests (moto's server mode, a subprocess on a free loopback port), and a
TCP proxy in front of it that a test can cut and restore: the store made unreachable and brought back with its
objects (moto keeps them in memory: a restarted moto would have lost them).

``MotoServer`` starts ``python -m moto.server`` and creates the bucket; ``StoreProxy`` forwards a port of its own
to it, and ``cut()`` closes every connection and stops listening (a client's connect is refused), ``restore()``
listens again on the same port.
"""

from __future__ import annotations

import contextlib
import select
import socket
import subprocess
import sys
import threading
import time
from typing import Any

import httpx
import obstore
from obstore.store import S3Store

__all__ = ["MotoServer", "StoreProxy", "S3_CREDENTIALS", "free_port"]

S3_CREDENTIALS = {"access_key_id": "testing", "secret_access_key": "testing", "region": "us-east-1"}
_START_TIMEOUT_S = 60.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class MotoServer:
    """moto's S3 server on a free loopback port with the bucket ``bucket``; a context manager."""

    def __init__(self, bucket: str) -> None:
        self.bucket = bucket
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> MotoServer:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + _START_TIMEOUT_S
        while True:
            try:
                reply = httpx.put(f"{self.endpoint}/{self.bucket}")
            except httpx.TransportError:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"moto's server exited with {self.proc.returncode}") from None
            else:
                if reply.status_code != 200:
                    self.stop()
                    raise RuntimeError(f"moto refused the bucket {self.bucket!r}: {reply.text}")
                return self
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"moto's server did not answer within {_START_TIMEOUT_S} s")
            time.sleep(0.1)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def objects(self) -> S3Store:
        """The bucket, straight (not through a proxy), through obstore: what a test reads and changes behind the
        servers' backs."""
        return S3Store(self.bucket, endpoint=self.endpoint, client_options={"allow_http": True}, **S3_CREDENTIALS)

    def keys(self, prefix: str = "") -> list[str]:
        return sorted(meta["path"] for batch in obstore.list(self.objects(), prefix=prefix or None) for meta in batch)

    def get(self, key: str) -> bytes:
        return bytes(obstore.get(self.objects(), key).bytes())

    def put(self, key: str, data: bytes) -> None:
        obstore.put(self.objects(), key, data)

    def __enter__(self) -> MotoServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class StoreProxy:
    """Forwards 127.0.0.1:``port`` to ``target_port``, byte for byte, one thread per connection; a context
    manager. ``cut()``: every connection closed and the port no longer listening; ``restore()``: listening again."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = free_port()
        self._lock = threading.Lock()
        self._connections: set[socket.socket] = set()
        self._listener: socket.socket | None = None
        self._accepting: threading.Thread | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def restore(self) -> None:
        assert self._listener is None, "already listening"
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        self._accepting = threading.Thread(target=self._accept, args=(listener,), daemon=True)
        self._accepting.start()

    def cut(self) -> None:
        listener, self._listener = self._listener, None
        assert listener is not None, "not listening"
        with contextlib.suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)
        listener.close()
        if self._accepting is not None:
            self._accepting.join(timeout=10)
        with self._lock:
            connections, self._connections = self._connections, set()
        for sock in connections:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:  # closed by cut()
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                client.close()
                continue
            with self._lock:
                if self._listener is not listener:  # cut meanwhile
                    client.close()
                    upstream.close()
                    return
                self._connections |= {client, upstream}
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()

    def _pump(self, client: socket.socket, upstream: socket.socket) -> None:
        pair = {client: upstream, upstream: client}
        try:
            while True:
                readable, _, _ = select.select(list(pair), [], [])
                for sock in readable:
                    data = sock.recv(1 << 16)
                    if not data:
                        return
                    pair[sock].sendall(data)
        except (OSError, ValueError):  # cut: the sockets closed under it
            return
        finally:
            with self._lock:
                self._connections -= {client, upstream}
            client.close()
            upstream.close()

    def __enter__(self) -> StoreProxy:
        self.restore()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._listener is not None:
            self.cut()

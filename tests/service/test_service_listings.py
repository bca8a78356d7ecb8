"""Listings with bounded memory: a client that stops reading holds a slice of its listing until the send
timeout ends its connection (a reset: what it held unsent is dropped), and the requests reading one listing
share it."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import anyio
import httpx
import numpy as np
import pytest

from grail_core.listing import Listing
from grail_core.version import Version
from service.listings import SharedListings
from service.routers.reach import LISTING_SLICE, TimedStream, _stream

from .conftest import Server


def test_a_client_that_stops_reading_is_reset_at_the_send_timeout(tmp_path: Path) -> None:
    # A hub reaching many slices of long names: its listing (10 MB) is more than the kernel's buffers of a
    # loopback connection take (4 MB for the sender's at most, on Linux's defaults).
    leaves = 20 * LISTING_SLICE
    server = Server(tmp_path / "data", tmp_path / "server.log", "--send-timeout", "1").start()
    try:
        text = "".join(f"hub n{k:0119d}\n" for k in range(leaves)).encode()
        with httpx.Client(base_url=server.url, timeout=300) as http:
            graph_id = http.post("/graphs?wait=true&format=edgelist", content=text).json()["id"]
            whole = http.get(f"/graphs/{graph_id}/descendants", params={"node": "hub"})
            assert whole.json()["count"] == leaves
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.connect(("127.0.0.1", server.port))
            sock.sendall(f"GET /graphs/{graph_id}/descendants?node=hub HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            sock.settimeout(60)
            received = sock.recv(1 << 12)  # the answer's start; then this end stops reading
            deadline = time.monotonic() + 120
            while "a streamed answer stopped" not in server.log():  # the server gives up on the reader
                assert time.monotonic() < deadline, "the stalled stream was never stopped"
                time.sleep(0.1)
            # What this end's buffer holds, then the reset: the server kept nothing of the answer to send (a
            # close would have sent all it held, then ended the connection in order).
            with pytest.raises(ConnectionResetError):
                while chunk := sock.recv(1 << 16):
                    received += chunk
        assert received.startswith(b"HTTP/1.1 200")
        assert len(received) < len(whole.content)  # the stream stopped before its end
    finally:
        server.stop()


def test_a_stalled_stream_makes_no_chunk_beyond_the_one_it_sends() -> None:
    made: list[bytes] = []

    def chunks():  # type: ignore[no-untyped-def]
        for i in range(100):
            made.append(b"%d," % i)
            yield made[-1]

    async def stream() -> list[bytes]:
        sent: list[bytes] = []

        async def send(message: dict) -> None:
            if len(sent) == 3:
                await anyio.sleep_forever()  # the client stops reading
            sent.append(message.get("body", b""))

        with anyio.fail_after(20):
            await TimedStream(chunks(), 0.2, media_type="application/json").stream_response(send)
        return sent

    sent = anyio.run(stream)
    assert len(sent) == 3 and len(made) == 3  # the response start, two chunks sent, the third being sent


def _listing(count: int) -> Listing:
    return Listing(count, "search", count, lambda start, wanted, out: (0, start))


def test_readers_of_one_listing_share_it_and_it_goes_with_them() -> None:
    shared = SharedListings()
    version = type("Version", (), {})()  # any object that a weak reference can name
    release = threading.Event()
    made: list[Listing] = []

    def make() -> Listing:
        made.append(_listing(len(made) + 1))
        release.wait(30)
        return made[-1]

    got: list[Listing] = []
    readers = [threading.Thread(target=lambda: got.append(shared.get(version, "a", True, make))) for _ in range(8)]
    for reader in readers:
        reader.start()
    deadline = time.monotonic() + 30
    while not made:  # the first one makes it; the others wait for it
        assert time.monotonic() < deadline
        time.sleep(0.01)
    release.set()
    for reader in readers:
        reader.join(30)
    assert len(made) == 1 and len(got) == 8 and all(listing is made[0] for listing in got)
    assert shared.get(version, "a", False, make) is made[1]  # the other direction is its own listing
    assert shared.get(version, "b", True, make) is made[2]
    got.clear()
    made.clear()  # no request holds them any more: the next one is made again
    assert shared.get(version, "a", True, make) is made[0]


def test_a_failed_listing_fails_its_waiters_and_is_not_kept() -> None:
    shared = SharedListings()
    version = type("Version", (), {})()

    def fail() -> Listing:
        raise LookupError("no such node")

    with pytest.raises(LookupError):
        shared.get(version, "a", True, fail)
    assert shared.get(version, "a", True, lambda: _listing(3)).count == 3


def test_a_stream_holds_its_position_and_the_slice_it_sent_and_lists_every_page_exactly() -> None:
    # Every third id of 3 * count, as a bit-set listing would scan them.
    count = 3 * LISTING_SLICE + 5

    def scan(start: int, wanted: int, out: np.ndarray) -> tuple[int, int]:
        first = -(-start // 3) * 3
        ids = np.arange(first, 3 * count, 3)[:wanted]
        out[: ids.size] = ids
        return ids.size, int(ids[-1]) + 1 if ids.size else 3 * count

    listed = Listing(count, "traversal", 3 * count, scan)
    version = cast(Version, SimpleNamespace(names_of_ids=lambda ids: np.char.add("n", ids.astype(str))))
    for offset, limit in ((0, None), (1, 2), (LISTING_SLICE - 1, LISTING_SLICE + 3), (count - 1, None), (count, 5)):
        chunks = _stream(version, listed, offset, limit, '{"nodes":[')
        text = next(chunks) + next(chunks)
        # Between slices: the position and the slice being sent, no ids or names of the listing.
        frame = chunks.gi_frame.f_locals
        held = [name for name, value in frame.items() if isinstance(value, np.ndarray | list | str) and name != "head"]
        assert held == []
        text += b"".join(chunks)
        stop = count if limit is None else min(count, offset + limit)
        assert json.loads(text)["nodes"] == [f"n{3 * i}" for i in range(offset, stop)]

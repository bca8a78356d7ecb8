"""A full disk and a read-only one, on a small tmpfs mounted for the test (skipped where none can be mounted);
start-up's cleaning of what crashes leave behind."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from .conftest import GraphFiles, Server

pytestmark = pytest.mark.timeout(240)


def _mount(target: Path, *options: str) -> bool:
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", ",".join(options), "tmpfs", str(target)], capture_output=True)
    return done.returncode == 0


@pytest.fixture()
def small_disk(tmp_path: Path) -> Iterator[Path]:
    disk = tmp_path / "disk"
    disk.mkdir()
    if os.geteuid() != 0 or not _mount(disk, "size=16m", "mode=0755"):
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def _fill(disk: Path, leave: int) -> Path:
    """A file that leaves ``leave`` bytes free on the disk."""
    filler = disk / "filler"
    free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
    with open(filler, "ab") as fh:
        fh.write(b"\0" * max(free - leave, 0))
    return filler


def test_full_disk(small_disk: Path, tmp_path: Path, files: GraphFiles) -> None:
    server = Server(small_disk / "data", tmp_path / "server.log").start()
    try:
        with httpx.Client(base_url=server.url, timeout=120) as http:
            upload = files.path("dag.gra").read_bytes()
            built = http.post("/graphs?wait=true", content=upload, headers={"Content-Type": "text/x-grail-gra"})
            assert built.status_code == 201, built.text
            graph_id = built.json()["id"]
            index_bytes = sum(p.stat().st_size for p in (server.data_dir / "graphs" / graph_id).rglob("*"))
            assert http.delete(f"/graphs/{graph_id}").status_code == 204

            # The body does not fit: 507 while it streams, and nothing of it stays.
            filler = _fill(small_disk, 256 << 10)
            response = http.post("/graphs", content=b"0 1\n" * (1 << 18), headers={"Content-Type": "text/plain"})
            assert response.status_code == 507, response.text
            assert response.json()["error"] == "DiskFull" and "disk is full" in response.json()["detail"]
            assert not list((server.data_dir / "uploads").iterdir())

            # The upload fits, its index does not: the build fails as DiskFull, never stuck in building.
            filler.unlink()
            _fill(small_disk, len(upload) + index_bytes // 3)
            response = http.post("/graphs?wait=true", content=upload, headers={"Content-Type": "text/x-grail-gra"})
            assert response.status_code == 507, response.text
            record = response.json()["graph"]
            assert record["status"] == "failed" and record["error"]["type"] == "DiskFull"
            assert http.get(f"/graphs/{record['id']}").json()["status"] == "failed"
            assert not list((server.data_dir / "staging").iterdir())
            (small_disk / "filler").unlink()
            again = http.post("/graphs?wait=true", content=upload, headers={"Content-Type": "text/x-grail-gra"})
            assert again.status_code == 201
    finally:
        server.stop()


def test_read_only_disk(small_disk: Path, tmp_path: Path) -> None:
    server = Server(small_disk / "data", tmp_path / "server.log").start()
    try:
        with httpx.Client(base_url=server.url, timeout=60) as http:
            graph_id = http.post("/graphs?wait=true", content=b"0 1\n1 2\n").json()["id"]
            assert subprocess.run(["mount", "-o", "remount,ro", str(small_disk)]).returncode == 0
            try:
                response = http.delete(f"/graphs/{graph_id}")
                assert response.status_code == 503 and response.json()["error"] == "ReadOnlyStorage", response.text
                assert http.get(f"/graphs/{graph_id}").status_code == 200  # still there, whole
                assert http.get(f"/graphs/{graph_id}/reachable", params={"source": 0, "target": 2}).json()["reachable"]
                upload = http.post("/graphs", content=b"0 1\n")
                assert upload.status_code == 503 and upload.headers["retry-after"]
            finally:
                subprocess.run(["mount", "-o", "remount,rw", str(small_disk)], check=True)
            assert http.delete(f"/graphs/{graph_id}").status_code == 204
            assert http.get(f"/graphs/{graph_id}").status_code == 404
    finally:
        server.stop()


def test_start_up_removes_what_crashes_leave(fresh_server: Server, files: GraphFiles) -> None:
    server = fresh_server.start()
    with server.client() as client:
        graph_id = client.upload(files.path("cyclic.gra"), wait=True)["id"]
    server.stop()
    data = server.data_dir
    leftovers = [
        data / "uploads" / "0123456789ab",
        data / "graphs" / graph_id / ".record.json.tmp",
        data / "staging" / "feedbeef0000" / "decompressed",
        data / "trash" / "0000deadbeef.1234" / "record.json",
        data / "graphs" / "abcdefabcdef" / "index" / "manifest.json",
    ]
    for path in leftovers:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
    server.start()  # the leftovers go before the server answers
    assert not any(path.exists() for path in leftovers)
    assert not (data / "graphs" / "abcdefabcdef").exists()
    with server.client() as client:
        assert client.get(graph_id)["status"] == "ready"

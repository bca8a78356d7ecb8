"""A full disk and a read-only one, on a small tmpfs mounted for the test (skipped where none can be mounted);
start-up's cleaning of what crashes leave behind."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from service.state import open_artifacts

from .conftest import GraphFiles, Server, stored_uploads, wait_until

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
            assert not stored_uploads(server.data_dir)

            # The upload fits, its index does not: the build fails as DiskFull, never stuck in building.
            filler.unlink()
            _fill(small_disk, len(upload) + index_bytes // 3)
            response = http.post("/graphs?wait=true", content=upload, headers={"Content-Type": "text/x-grail-gra"})
            assert response.status_code == 507, response.text
            record = response.json()["graph"]
            assert record["status"] == "failed" and record["error"]["type"] == "DiskFull"
            assert http.get(f"/graphs/{record['id']}").json()["status"] == "failed"
            # The failure is reported before the build's staging folder goes (in the same step's cleanup).
            wait_until(lambda: not list((server.data_dir / "staging").iterdir()))
            (small_disk / "filler").unlink()
            again = http.post("/graphs?wait=true", content=upload, headers={"Content-Type": "text/x-grail-gra"})
            assert again.status_code == 201
    finally:
        server.stop()


def test_read_only_store(small_disk: Path, tmp_path: Path) -> None:
    """The artifact store's disk turns read-only (the metadata database, which holds its files open for writing,
    lives elsewhere): uploads are refused with 503 and Retry-After, queries go on, a deletion is recorded at
    once and its files go once the disk is writable again."""
    store = small_disk / "store"
    server = Server(
        tmp_path / "data", tmp_path / "server.log", "--store", f"file://{store}", "--version-grace-s", "0.5"
    )
    server.start()
    try:
        with httpx.Client(base_url=server.url, timeout=60) as http:
            graph_id = http.post("/graphs?wait=true", content=b"0 1\n1 2\n").json()["id"]
            assert (store / "graphs" / graph_id / "v1").is_dir()
            assert subprocess.run(["mount", "-o", "remount,ro", str(small_disk)]).returncode == 0
            try:
                upload = http.post("/graphs", content=b"0 1\n")
                assert upload.status_code == 503 and upload.headers["retry-after"], upload.text
                assert upload.json()["error"] == "ReadOnlyStorage"
                assert http.get(f"/graphs/{graph_id}/reachable", params={"source": 0, "target": 2}).json()["reachable"]
                assert http.delete(f"/graphs/{graph_id}").status_code == 204
                assert http.get(f"/graphs/{graph_id}").status_code == 404
                wait_until(lambda: "read-only" in server.log())  # the sweep tried, and will again
                assert (store / "graphs" / graph_id / "v1").is_dir()
            finally:
                subprocess.run(["mount", "-o", "remount,rw", str(small_disk)], check=True)
            wait_until(lambda: not (store / "graphs" / graph_id).exists())
    finally:
        server.stop()


def test_start_up_removes_what_crashes_leave(fresh_server: Server, files: GraphFiles) -> None:
    """What a server killed at any moment can leave: a publish or an upload cut short (hidden folders), a
    build's staging folder, a whole version or upload stored before the row that would refer to it, and the
    trash of the JSON-record layout. The next start removes each (it holds the data directory's lock: no
    other process can be writing them); the graphs stay as they were."""
    server = fresh_server.start()
    with server.client() as client:
        graph_id = client.upload(files.path("cyclic.gra"), wait=True)["id"]
    server.stop()
    data = server.data_dir
    version = data / "graphs" / graph_id / "v1"
    leftovers = [
        data / "graphs" / graph_id / f".v2.tmp-{'0' * 32}" / "manifest.json",
        data / "uploads" / f".feedbeef0000.tmp-{'1' * 32}" / "data",
        data / "staging" / "feedbeef0000-7-1" / "decompressed",
        data / "trash" / "0000deadbeef.1234" / "record.json",
    ]
    for path in leftovers:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
    artifacts = open_artifacts(None, data)
    artifacts.publish(graph_id, 9, version)  # a rebuild's version stored, its row never written
    artifacts.put_upload("abcdefabcdef", [b"0 1\n"])  # an upload whose graph was never added
    server.start()
    assert not any(path.exists() for path in leftovers)
    assert not (data / "trash").exists()
    assert artifacts.versions(graph_id) == [1] and stored_uploads(data) == []
    with server.client() as client:
        assert client.wait_until_ready(graph_id)["status"] == "ready"


def test_updates_on_a_full_disk_change_nothing_and_survive_a_sigkill(small_disk: Path, tmp_path: Path) -> None:
    """Edge updates while the disk (the metadata database's and the index versions') fills: each is answered
    200 once journaled or 507 with a message, a refused one changes nothing (the version and the answers stay
    those of the acknowledged ones), the graph stays ready through the failing rebuilds, updates go on once
    there is space again, and after a SIGKILL every acknowledged update is there."""
    server = Server(small_disk / "data", tmp_path / "server.log").start()
    try:
        with httpx.Client(base_url=server.url, timeout=60) as http:
            graph_id = http.post("/graphs?wait=true", content=b"c0 c0\n").json()["id"]
            version = 1

            def update() -> httpx.Response:
                nonlocal version
                reply = http.post(f"/graphs/{graph_id}/edges", json={"add": [[f"c{version - 1}", f"c{version}"]]})
                if reply.status_code == 200:
                    version += 1
                    assert reply.json()["version"] == version
                return reply

            def holds(k: int, http: httpx.Client = http) -> bool:
                params = {"source": "c0", "target": f"c{k}", "unknown": "false"}
                reply = http.get(f"/graphs/{graph_id}/reachable", params=params)
                assert reply.status_code == 200 and int(reply.headers["grail-graph-version"]) == version
                return bool(reply.json()["reachable"])

            filler = _fill(small_disk, 32 << 10)
            refused = 0
            for _ in range(400):
                reply = update()
                if reply.status_code == 200:
                    continue
                assert reply.status_code == 507, reply.text
                assert reply.json()["error"] == "DiskFull" and "disk is full" in reply.json()["detail"]
                refused += 1
                assert http.get(f"/graphs/{graph_id}").json()["version"] == version  # nothing changed
                assert holds(version - 1) and not holds(version)
                if refused == 5:
                    break
            assert refused == 5, "the disk never filled"
            assert http.get(f"/graphs/{graph_id}").json()["status"] == "ready"

            filler.unlink()
            for _ in range(3):
                assert update().status_code == 200
            assert holds(version - 1) and not holds(version)
        server.kill()
        server.start()
        with server.client() as client:
            record = client.wait_until_ready(graph_id, timeout=120)
            assert record["version"] == version
            assert holds(version - 1, client.http) and not holds(version, client.http)
    finally:
        server.stop()


def test_a_rebuild_on_a_full_disk_keeps_the_old_version_and_is_tried_again(small_disk: Path, tmp_path: Path) -> None:
    """Updates journaled while the disk has room for their rows but not for the index a rebuild writes: the
    rebuild fails as DiskFull, the graph's record says so and when it is tried again, the published version
    serves the journaled updates meanwhile; once there is room the rebuild folds them in, and after a SIGKILL
    every acknowledged update is there."""
    chain = 20_000  # an index of some hundreds of KiB, next to journal rows of some bytes
    server = Server(small_disk / "data", tmp_path / "server.log").start()
    try:
        with httpx.Client(base_url=server.url, timeout=120) as http:
            edges = "".join(f"{k} {k + 1}\n" for k in range(chain)).encode()
            built = http.post("/graphs?wait=true", content=edges, headers={"Content-Type": "text/plain"})
            assert built.status_code == 201, built.text
            graph_id = built.json()["id"]
            versions = server.data_dir / "graphs" / graph_id
            published = sorted(p.name for p in versions.iterdir())
            index_bytes = sum(p.stat().st_size for p in versions.rglob("*") if p.is_file())

            def update(k: int) -> None:
                reply = http.post(f"/graphs/{graph_id}/edges", json={"add": [[chain + k, chain + k + 1]]})
                assert reply.status_code == 200 and reply.json()["version"] == k + 2, reply.text

            def holds(k: int, http: httpx.Client = http) -> None:
                """The graph answers for version k + 1: the chain reaches chain + k, not chain + k + 1."""
                params = {"pairs": f"0,{chain + k};0,{chain + k + 1}", "unknown": "false"}
                reply = http.get(f"/graphs/{graph_id}/reachable", params=params)
                assert reply.status_code == 200 and int(reply.headers["grail-graph-version"]) == k + 1, reply.text
                assert reply.json()["reachable"] == [True, False], (k, reply.json())

            filler = _fill(small_disk, index_bytes // 3)
            for k in range(3):
                update(k)

            def rebuild_refused() -> dict[str, Any] | None:
                rebuild = http.get(f"/graphs/{graph_id}").json()["rebuild"]
                return rebuild if rebuild is not None and rebuild["error"] is not None else None

            rebuild = wait_until(rebuild_refused, timeout=120)
            assert rebuild["error"]["type"] == "DiskFull" and "disk is full" in rebuild["error"]["message"], rebuild
            assert rebuild["attempts"] >= 1 and rebuild["state"] in ("queued", "running", "failed"), rebuild
            record = http.get(f"/graphs/{graph_id}").json()
            assert record["status"] == "ready" and record["version"] == 4 and record["pending_updates"]["updates"] == 3
            holds(3)
            assert sorted(p.name for p in versions.iterdir()) == published  # the old version, and no part of one
            assert not list((server.data_dir / "staging").iterdir())

            filler.unlink()
            update(3)  # updates go on, and ask for a rebuild should the refused one have failed for good
            wait_until(lambda: http.get(f"/graphs/{graph_id}").json()["pending_updates"]["updates"] == 0, timeout=120)
            holds(4)
        server.kill()
        server.start()
        with server.client() as client:
            record = client.wait_until_ready(graph_id, timeout=120)
            assert record["version"] == 5
            holds(4, client.http)
    finally:
        server.stop()

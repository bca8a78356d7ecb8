"""Restarts and crashes: ready graphs come back without a rebuild; a killed build is never served half-built;
a damaged index is reported, never served."""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import pytest

from service.options import UploadOptions
from service.state import open_metadata
from service.worker import BuildJob, BuildOutcome, BuildWorker

from .conftest import GraphFiles, Server, stored_uploads, wait_until

pytestmark = pytest.mark.timeout(300)  # a hang guard: a restart on a busy 2-core machine takes minutes


def test_restart_serves_without_rebuilding(fresh_server: Server, files: GraphFiles) -> None:
    server = fresh_server.start()
    with server.client() as client:
        kegg = client.upload(files.path("dag.gra"), wait=True)
        amaze = client.upload(files.path("cyclic.gra"), name="amaze", dims=3, seed=7, wait=True)
    manifest = server.data_dir / "graphs" / kegg["id"] / "v1" / "manifest.json"
    before = manifest.stat().st_mtime_ns
    assert not stored_uploads(server.data_dir), "uploads are removed once their index is published"

    server.restart()
    with server.client() as client:
        for record in (kegg, amaze):
            client.wait_until_ready(record["id"], timeout=120)  # loaded after the start
        records = {r["id"]: r for r in client.list()}
        assert records == {kegg["id"]: kegg, amaze["id"]: amaze}  # same records, stats, timestamps: no rebuild
        for record, stem in ((kegg, "dag"), (amaze, "cyclic")):
            for kind in ("", ".pos"):
                got = client.query_batch(record["id"], files.pairs(f"{stem}{kind}.que"))
                assert np.array_equal(got, files.answers(f"{stem}{kind}.ans"))
    assert manifest.stat().st_mtime_ns == before
    assert "built in" not in server.log().split("Started server process")[-1]


def _wait_until_building(server: Server, graph_id: str, timeout: float = 120.0) -> None:
    """Until the build is in an early phase (the metadata store's row, which the server answers from): killing
    it there leaves no published index behind."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        record = httpx.get(f"{server.url}/graphs/{graph_id}", timeout=10).json()
        if record["status"] == "building" and record["phase"] in ("read", "graph", "condense"):
            return
        assert record["status"] == "queued", f"the build got past its early phases before the kill: {record}"
        time.sleep(0.002)
    raise AssertionError(f"graph {graph_id} never started building")


def test_sigkill_during_build_is_never_served_half_built(tmp_path: Path, big_files: GraphFiles) -> None:
    """Kill -9 while a large graph builds and a second one waits in the queue (one main lane that the first
    fills, a small lane that neither fits).

    After the restart the interrupted build is redone from its saved upload; the queued graph whose
    upload we delete while the server is down is marked failed. Neither is ever answered before it is
    rebuilt, and the rebuilt one answers exactly.
    """
    files = big_files
    server = Server(tmp_path / "data", tmp_path / "server.log", "--max-build-memory-mb", "400", "--build-workers", "1")
    server.start()
    try:
        _kill_mid_build(server, files)
    finally:
        server.stop()


def _kill_mid_build(server: Server, files: GraphFiles) -> None:
    with server.client() as client:
        big = client.upload(files.path("big.gra"), name="big")
        small = client.upload(files.path("big.gra"), name="waiting")
        _wait_until_building(server, big["id"])
        assert client.get(small["id"])["status"] == "queued"
    server.kill()

    graphs = server.data_dir / "graphs"
    with open_metadata(None, server.data_dir) as metadata:
        on_disk = metadata.get_graph(big["id"])
        assert (on_disk.status, on_disk.published_version) == ("building", None)
    assert not (graphs / big["id"]).exists()  # nothing of it published
    shutil.rmtree(server.data_dir / "uploads" / small["id"])

    server.start()
    with server.client() as client:
        pairs = files.pairs("big.pos.que")
        expected = files.answers("big.pos.ans")
        while True:
            response = client.http.post(
                f"/graphs/{big['id']}/queries",
                content=pairs[:2000].tobytes(),
                headers={"Content-Type": "application/octet-stream", "Accept": "application/octet-stream"},
            )
            if response.status_code == 200:
                break
            assert response.status_code == 409, response.text  # not ready: refused, never a half-built answer
            time.sleep(0.02)
        assert np.frombuffer(response.content, dtype=np.uint8).astype(bool).tolist() == expected[:2000].tolist()
        record = client.get(big["id"])
        assert record["status"] == "ready" and record["stats"]["nodes"] == files.graphs["big"].num_nodes
        assert np.array_equal(client.query_batch(big["id"], pairs), expected)
        failed = wait_until(lambda: (r := client.get(small["id"]))["status"] not in ("queued", "building") and r)
        assert failed["status"] == "failed" and "upload" in failed["error"]["message"]
        lost = client.http.get(f"/graphs/{small['id']}/reachable", params={"source": 0, "target": 1})
        assert lost.status_code == 424 and lost.json()["error"] == "GraphFailed"  # failed for good
    assert "jobs that were running when the server stopped are queued again" in server.log()
    assert sorted(p.name for p in (graphs / big["id"]).iterdir()) == ["v1"]
    assert not stored_uploads(server.data_dir)


def test_corrupt_index_is_reported_not_served(fresh_server: Server, files: GraphFiles) -> None:
    server = fresh_server.start()
    with server.client() as client:
        graph_id = client.upload(files.path("cyclic.gra"), wait=True)["id"]
    server.stop()
    index_dir = server.data_dir / "graphs" / graph_id / "v1"
    victim = next(p for p in sorted(index_dir.glob("*.npy")) if p.stat().st_size > 1000)
    data = bytearray(victim.read_bytes())
    data[-1] ^= 0xFF
    victim.write_bytes(bytes(data))
    server.start()
    with server.client() as client:
        record = wait_until(lambda: (r := client.get(graph_id))["loading"] is None and r)
        assert record["status"] == "failed" and record["error"]["type"] == "IndexFileError"
        response = client.http.get(f"/graphs/{graph_id}/reachable", params={"source": 0, "target": 1})
        assert response.status_code == 424 and response.json()["build"]["type"] == "IndexFileError"
        client.delete(graph_id)
    wait_until(lambda: not (server.data_dir / "graphs" / graph_id).exists())  # after the grace period


def test_a_data_dir_of_the_json_record_layout_is_imported_at_start(tmp_path: Path) -> None:
    """A data directory the JSON-record releases wrote (tests/legacy_layout.py) served by a real server: the
    ready graph answers with its journaled updates applied (the torn last line dropped), the queued one builds
    from its upload, the failed and the damaged ones answer 424; a restart imports nothing again."""
    from tests.legacy_layout import write_graph

    data = tmp_path / "data"
    edges = b"a b\nb c\nc a\nc d\nd e\nf f\n"
    updates = [([["e", "g"]], []), ([], [["c", "d"]])]
    ready = write_graph(data, "aaaaaaaaaaa1", name="deps", status="ready", edges=edges, updates=updates)
    with open(ready.journal, "ab") as journal:
        journal.write(b'{"version":4,"add":[["x"')  # a crash cut the last line short: never acknowledged
    queued = write_graph(data, "aaaaaaaaaaa2", name="deps", status="queued", edges=edges, built=False, upload=True)
    failed = write_graph(
        data,
        "aaaaaaaaaaa3",
        name="broken",
        status="failed",
        edges=b"a b\n",
        built=False,
        error={"type": "GraphFormatError", "message": "line 3: not an edge", "line": 3},
    )
    server = Server(data, tmp_path / "server.log").start()
    try:
        with server.client() as client:
            record = client.wait_until_ready("deps", timeout=120)
            assert (record["id"], record["version"]) == (ready.id, 3)
            pairs = [("a", "g"), ("c", "d"), ("a", "e"), ("f", "f"), ("g", "a")]
            assert list(client.query_batch("deps", pairs)) == [False, False, False, True, False]
            assert client.reachable("deps", "e", "g")
            built = client.wait_until_ready(queued.id, timeout=120)
            assert built["name"] == queued.id  # "deps" was the first graph's
            assert list(client.query_batch(queued.id, pairs, unknown="false")) == [False, True, True, True, False]
            lost = client.http.get(f"/graphs/{failed.id}/reachable", params={"source": "a", "target": "b"})
            assert lost.status_code == 424 and lost.json()["build"]["type"] == "GraphFormatError"
        assert not list(data.glob("graphs/*/record.json")) and not list(data.glob("graphs/*/updates.jsonl"))
        server.restart()
        with server.client() as client:
            assert client.wait_until_ready("deps", timeout=120)["version"] == 3
            assert {r["id"] for r in client.list()} == {ready.id, queued.id, failed.id}
    finally:
        server.stop()


def test_worker_stopped_during_a_build_drops_it(tmp_path: Path) -> None:
    """A shutdown stops the build workers under their builds: each build is dropped (None: its job stays
    claimed, and the next start queues it again), neither failed nor an error. The upload is a FIFO that the
    build blocks on, so the stop comes while it runs."""
    upload = tmp_path / "upload"
    os.mkfifo(upload)
    worker = BuildWorker("test", "cpu", "info", "text")
    job = BuildJob(
        graph_id="0123456789ab",
        staging=tmp_path / "staging",
        options=UploadOptions(backend="cpu"),
        memory_bytes=1 << 30,
        max_graph_bytes=1 << 20,
        max_name_bytes=1 << 10,
        request_id="-",
        upload=upload,
    )
    outcome: list[BuildOutcome | BaseException | None] = []

    def build() -> None:
        try:
            outcome.append(worker.run(job, lambda phase, fraction: True))
        except BaseException as exc:  # reported by the assertion below
            outcome.append(exc)

    thread = threading.Thread(target=build)
    thread.start()
    try:
        with open(upload, "wb"):  # returns once the worker opened the upload: its build is running
            worker.stop()
            thread.join(timeout=60)
    finally:
        worker.stop()
    assert not thread.is_alive() and outcome == [None]

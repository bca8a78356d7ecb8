"""Restarts and crashes: ready graphs come back without a rebuild; a killed build is never served half-built."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import pytest

from service.options import UploadOptions
from service.worker import BuildJob, BuildOutcome, BuildWorker

from .conftest import GraphFiles, Server

pytestmark = pytest.mark.timeout(300)  # a hang guard: a restart on a busy 2-core machine takes minutes


def test_restart_serves_without_rebuilding(fresh_server: Server, files: GraphFiles) -> None:
    server = fresh_server.start()
    with server.client() as client:
        kegg = client.upload(files.path("dag.gra"), wait=True)
        amaze = client.upload(files.path("cyclic.gra"), name="amaze", dims=3, seed=7, wait=True)
    manifest = server.data_dir / "graphs" / kegg["id"] / "index" / "manifest.json"
    before = manifest.stat().st_mtime_ns
    assert not list((server.data_dir / "uploads").iterdir()), "uploads are removed once their index is published"

    server.restart()
    with server.client() as client:
        records = {r["id"]: r for r in client.list()}
        assert records == {kegg["id"]: kegg, amaze["id"]: amaze}  # same records, stats, timestamps: no rebuild
        for record, stem in ((kegg, "dag"), (amaze, "cyclic")):
            for kind in ("", ".pos"):
                got = client.query_batch(record["id"], files.pairs(f"{stem}{kind}.que"))
                assert np.array_equal(got, files.answers(f"{stem}{kind}.ans"))
    assert manifest.stat().st_mtime_ns == before
    assert "built in" not in server.log().split("Started server process")[-1]


def _wait_until_building(server: Server, graph_id: str, timeout: float = 120.0) -> None:
    """Until the build is in an early phase and its record on disk says so (the server answers ``building`` a
    moment before that record is written): killing it there leaves no published index behind."""
    on_disk = server.data_dir / "graphs" / graph_id / "record.json"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        record = httpx.get(f"{server.url}/graphs/{graph_id}", timeout=10).json()
        early = record["status"] == "building" and record["phase"] in ("read", "graph", "condense")
        if early and json.loads(on_disk.read_text())["status"] == "building":
            return
        assert early or record["status"] == "queued", f"the build got past its early phases before the kill: {record}"
        time.sleep(0.002)
    raise AssertionError(f"graph {graph_id} never started building")


def test_sigkill_during_build_is_never_served_half_built(fresh_server: Server, big_files: GraphFiles) -> None:
    """Kill -9 while a large graph builds and a second one waits in the queue.

    After the restart the interrupted build is redone from its saved upload; the queued graph whose
    upload we delete while the server is down is marked failed. Neither is ever answered before it is
    rebuilt, and the rebuilt one answers exactly.
    """
    files = big_files
    # 400 MiB for builds: the main lane (300 MiB, one worker) takes the large graph (about 170 MiB), too large
    # for the small lane (100 MiB), one at a time, so that the second one waits whatever the machine's speed.
    fresh_server.args = ("--max-build-memory-mb", "400")
    server = fresh_server.start()
    with server.client() as client:
        big = client.upload(files.path("big.gra"), name="big")
        second = client.upload(files.path("big.gra"), name="second")
        _wait_until_building(server, big["id"])
        assert client.get(second["id"])["status"] == "queued"
    server.kill()

    graphs = server.data_dir / "graphs"
    on_disk = json.loads((graphs / big["id"] / "record.json").read_text())
    assert on_disk["status"] == "building"
    assert not (graphs / big["id"] / "index").exists()
    (server.data_dir / "uploads" / second["id"]).unlink()

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
        failed = client.get(second["id"])
        assert failed["status"] == "failed" and "upload" in failed["error"]["message"]
        lost = client.http.get(f"/graphs/{second['id']}/reachable", params={"source": 0, "target": 1})
        assert lost.status_code == 424 and lost.json()["error"] == "GraphFailed"  # failed for good
    assert "rebuilding from the saved upload" in server.log()
    assert sorted(p.name for p in (graphs / big["id"]).iterdir()) == ["index", "record.json"]
    assert not list((server.data_dir / "uploads").iterdir())


def test_corrupt_index_is_reported_not_served(fresh_server: Server, files: GraphFiles) -> None:
    server = fresh_server.start()
    with server.client() as client:
        graph_id = client.upload(files.path("cyclic.gra"), wait=True)["id"]
    server.stop()
    index_dir = server.data_dir / "graphs" / graph_id / "index"
    victim = next(p for p in sorted(index_dir.glob("*.npy")) if p.stat().st_size > 1000)
    data = bytearray(victim.read_bytes())
    data[-1] ^= 0xFF
    victim.write_bytes(bytes(data))
    server.start()
    with server.client() as client:
        record = client.get(graph_id)
        assert record["status"] == "failed" and record["error"]["type"] == "IndexFileError"
        response = client.http.get(f"/graphs/{graph_id}/reachable", params={"source": 0, "target": 1})
        assert response.status_code == 424 and response.json()["build"]["type"] == "IndexFileError"
        client.delete(graph_id)
    assert not (server.data_dir / "graphs" / graph_id).exists()


def test_worker_stopped_during_a_build_drops_it(tmp_path: Path) -> None:
    """A shutdown stops the build workers under their builds: each build is dropped (None: its record stays as
    it was, and the next start redoes it), neither failed nor an error. The upload is a FIFO that the build
    blocks on, so the stop comes while it runs."""
    upload = tmp_path / "upload"
    os.mkfifo(upload)
    worker = BuildWorker("test", "cpu", "info", "text")
    job = BuildJob(
        graph_id="0123456789ab",
        name="blocked",
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

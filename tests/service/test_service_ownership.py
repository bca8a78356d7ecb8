"""Who owns the state, and what survives its owner: one server per data directory (a second is refused naming
the first, a dead one's lock is taken over), SIGKILLs at random moments of uploads, builds, updates, rebuilds,
replacements (PUT) and deletes (nothing acknowledged lost, nothing half-done served), and a restart that
replays the journal while /health answers and the graph says 409 with Retry-After until it is current."""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import pytest

from service.client import GrailClient
from service.state import open_metadata
from service.state.datadir import LOCK_FILE
from service.updates import encode

from .conftest import REPO, GraphFiles, Server, wait_until

pytestmark = pytest.mark.timeout(300)

# Rounds of the kill loop in the suite (each: start, load, work, SIGKILL); set higher to soak.
KILL_ROUNDS = int(os.environ.get("GRAIL_TEST_KILL_ROUNDS", "3"))


def _second_server(data_dir: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "service.main", "--port", "0", "--data-dir", str(data_dir), "--backend", "cpu"]
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120)


def _answers_right(client: GrailClient, graph_id: str, files: GraphFiles, stem: str) -> bool:
    return bool(np.array_equal(client.query_batch(graph_id, files.pairs(f"{stem}.que")), files.answers(f"{stem}.ans")))


def test_a_second_server_is_refused_and_a_dead_ones_lock_is_taken_over(fresh_server: Server, files: GraphFiles) -> None:
    first = fresh_server.start()
    with first.client() as client:
        ready = client.upload(files.path("dag.gra"), name="ready", wait=True)
        building = client.upload(files.path("cyclic.gra"), name="building")  # queued or building during the try

        refused = _second_server(first.data_dir)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        message = refused.stderr.strip().splitlines()[-1]
        assert f"pid {first.pid()} on host {socket.gethostname()}" in message, message
        assert "in use by another grail server" in message and "--database-url" in message

        owner = json.loads((first.data_dir / LOCK_FILE).read_text())
        assert owner["pid"] == first.pid()  # the refused server wrote nothing
        for record, stem in ((ready, "dag"), (building, "cyclic")):
            client.wait_until_ready(record["id"], timeout=120)
            assert _answers_right(client, record["id"], files, stem)

    first.kill()  # its lock file stays behind, naming a process that is gone
    assert json.loads((first.data_dir / LOCK_FILE).read_text())["pid"] == first.pid()
    dead = first.pid()
    second = first.start()
    assert f"taking over the data directory lock of pid {dead}" in second.log()
    assert json.loads((second.data_dir / LOCK_FILE).read_text())["pid"] == second.pid()
    with second.client() as client:
        for name, stem in (("ready", "dag"), ("building", "cyclic")):
            client.wait_until_ready(name, timeout=120)
            assert _answers_right(client, name, files, stem)


class _Updater(threading.Thread):
    """Edge updates one after another, each extending a chain c0 -> c1 -> ... by one edge: update k (making
    version k + 1) adds (c{k-1}, c{k}). ``acknowledged`` is the last version the server answered."""

    def __init__(self, url: str, graph_id: str, version: int) -> None:
        super().__init__(daemon=True)
        self.url, self.graph_id, self.acknowledged = url, graph_id, version

    def run(self) -> None:
        with httpx.Client(base_url=self.url, timeout=30) as http:
            while True:
                k = self.acknowledged  # the next update makes version k + 1
                try:
                    reply = http.post(f"/graphs/{self.graph_id}/edges", json={"add": [[f"c{k - 1}", f"c{k}"]]})
                except httpx.TransportError:
                    return  # killed
                if reply.status_code == 200:
                    assert reply.json()["version"] == k + 1, reply.text
                    self.acknowledged = k + 1
                elif reply.status_code not in (409, 503):  # a rebuild swapping, or a load after a start
                    raise AssertionError(reply.text)


def _check_chain(http: httpx.Client, graph_id: str, acknowledged: int) -> int:
    """The graph holds every acknowledged update, and exactly the updates of its version: answers the version
    it has (at least the last acknowledged one)."""
    record = http.get(f"/graphs/{graph_id}").json()
    version = record["version"]
    assert version >= acknowledged, f"acknowledged version {acknowledged} lost: the graph is at {version}"
    last = version - 1  # the chain c0 -> ... -> c{last}, made by the updates of versions 2 .. version
    params = {"pairs": f"c0,c{last};c{last},c0;c0,c{last + 1}", "unknown": "false"}
    reply = http.get(f"/graphs/{graph_id}/reachable", params=params)
    assert reply.status_code == 200 and int(reply.headers["grail-graph-version"]) == version, reply.text
    assert reply.json()["reachable"] == [True, last == 0, False], (version, reply.json())
    return int(version)


class _Deleter(threading.Thread):
    """A DELETE of one graph; ``acknowledged`` once the server answered 204."""

    def __init__(self, url: str, graph_id: str) -> None:
        super().__init__(daemon=True)
        self.url, self.graph_id, self.acknowledged = url, graph_id, False

    def run(self) -> None:
        with httpx.Client(base_url=self.url, timeout=30) as http:
            try:
                reply = http.delete(f"/graphs/{self.graph_id}")
            except httpx.TransportError:
                return  # killed
            assert reply.status_code == 204, reply.text
            self.acknowledged = True


def _check_nightly(client: GrailClient, replacements: list[tuple[str, int]]) -> None:
    """The name answers from a whole graph of its acknowledged replacements (k: the graph x{k} -> y) at once,
    and from the last one once that is built; the others are gone."""
    http = client.http
    ids = {graph_id: k for graph_id, k in replacements}
    reply = http.get("/graphs/nightly")
    assert reply.status_code == 200 and reply.json()["id"] in ids, reply.text
    last_id, last = replacements[-1]
    client.wait_until_ready(last_id, timeout=120)  # BuildFailedError fails the test
    record = http.get("/graphs/nightly").json()
    assert record["id"] == last_id and record["status"] == "ready", record
    params = {"pairs": ";".join(f"x{k},y" for k in ids.values()), "unknown": "false"}
    reply = http.get("/graphs/nightly/reachable", params=params)
    assert reply.status_code == 200 and reply.json()["reachable"] == [k == last for k in ids.values()], reply.text
    for graph_id in ids:
        if graph_id != last_id:
            assert http.get(f"/graphs/{graph_id}").status_code == 404, graph_id


@pytest.mark.timeout(120 + 60 * KILL_ROUNDS)
def test_sigkills_during_uploads_builds_updates_rebuilds_replacements_and_deletes_lose_nothing(
    fresh_server: Server, files: GraphFiles
) -> None:
    """KILL_ROUNDS rounds: while edge updates stream to one graph (and rebuilds fold them in), another graph
    uploads and builds, a named graph is replaced (PUT) and an earlier upload is deleted; the server is killed
    at a random moment. After every restart: every acknowledged update, upload, replacement and delete is
    there, every upload builds to the right answers, nothing failed, nothing half-done served."""
    rng = random.Random(21)
    server = fresh_server.start()
    with httpx.Client(base_url=server.url, timeout=60) as http:
        chain = http.post("/graphs?wait=true&name=chain", content=b"c0 c0\n").json()["id"]
        replacements = [(http.put("/graphs/nightly?wait=true", content=b"x0 y\n").json()["id"], 0)]
    acknowledged, uploads = 1, []  # uploads: (graph id, stem) of acknowledged uploads
    deleted: set[str] = set()  # graphs whose DELETE was acknowledged
    for round_number in range(KILL_ROUNDS):
        with server.client() as client:
            for graph_id in deleted:
                assert client.http.get(f"/graphs/{graph_id}").status_code == 404, graph_id
            _check_nightly(client, replacements)
            for graph_id in [chain, *(graph_id for graph_id, _ in uploads)]:
                record = client.wait_until_ready(graph_id, timeout=120)  # BuildFailedError fails the test
                assert record["status"] == "ready"
            acknowledged = _check_chain(client.http, chain, acknowledged)
            for graph_id, stem in uploads:
                assert _answers_right(client, graph_id, files, stem), (round_number, graph_id)
        updater = _Updater(server.url, chain, acknowledged)
        updater.start()
        stem = rng.choice(["dag", "cyclic"])
        with httpx.Client(base_url=server.url, timeout=60) as http:
            reply = http.post("/graphs", content=files.path(f"{stem}.gra").read_bytes())
            assert reply.status_code == 202, reply.text
            uploads.append((reply.json()["id"], stem))
            reply = http.put("/graphs/nightly", content=f"x{round_number + 1} y\n".encode())
            assert reply.status_code == 202, reply.text
            replacements.append((reply.json()["id"], round_number + 1))
        deleter = _Deleter(server.url, uploads[-2][0]) if len(uploads) > 1 else None
        wait_until(lambda u=updater, a=acknowledged: u.acknowledged > a)  # the round did some work
        if deleter is not None:
            deleter.start()
        time.sleep(rng.uniform(0.0, 0.4))
        server.kill()
        updater.join(timeout=30)
        acknowledged = updater.acknowledged
        server.start()
        if deleter is not None:
            deleter.join(timeout=30)
            uploads = [(graph_id, stem) for graph_id, stem in uploads if graph_id != deleter.graph_id]
            with httpx.Client(base_url=server.url, timeout=60) as http:
                left = http.get(f"/graphs/{deleter.graph_id}").status_code
                assert left == 404 if deleter.acknowledged else left in (200, 404)
                if left == 200:  # killed before the DELETE committed: the graph is whole, and deleted now
                    assert http.delete(f"/graphs/{deleter.graph_id}").status_code == 204
            deleted.add(deleter.graph_id)
    with server.client() as client:
        client.wait_until_ready(chain, timeout=120)
        _check_chain(client.http, chain, acknowledged)
        _check_nightly(client, replacements)
        listed = {record["id"] for record in client.list()}
        assert listed == {chain, replacements[-1][0], *(graph_id for graph_id, _ in uploads)}
        for graph_id, stem in uploads:
            client.wait_until_ready(graph_id, timeout=120)
            assert _answers_right(client, graph_id, files, stem)
    assert "Traceback" not in server.log()


def test_restart_replays_the_journal_while_health_answers(fresh_server: Server) -> None:
    """Journaled updates past the published version are replayed at start: /health answers at once, the
    graph answers 409 GraphLoading with Retry-After until it is current."""
    server = fresh_server.start()
    with httpx.Client(base_url=server.url, timeout=60) as http:
        graph_id = http.post("/graphs?wait=true", content=b"c0 c0\n").json()["id"]
    server.stop()
    updates = 2000
    metadata = open_metadata(None, server.data_dir)
    try:
        for k in range(1, updates + 1):  # as the server journals them, with no rebuild to fold them in
            metadata.append_update(graph_id, k, encode([[f"c{k - 1}", f"c{k}"]], []))
    finally:
        metadata.close()

    server.start(workers=False)  # the first request as soon as /health answers, before the workers warm up
    seen_loading = False
    with httpx.Client(base_url=server.url, timeout=60) as http:
        while True:
            assert http.get("/health").status_code == 200
            reply = http.get(f"/graphs/{graph_id}/reachable", params={"source": "c0", "target": f"c{updates}"})
            if reply.status_code == 200:
                break
            assert reply.status_code == 409 and reply.json()["error"] == "GraphLoading", reply.text
            assert int(reply.headers["retry-after"]) >= 1
            seen_loading = True
        assert reply.json()["reachable"] is True
        assert int(reply.headers["grail-graph-version"]) == updates + 1
    assert seen_loading, "the replay ended before the first request: make the journal longer"

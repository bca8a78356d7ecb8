"""Roles on one machine, with a real PostgreSQL and real server processes: two API replicas and a builder share
one database and one artifact store (a folder); answers through either replica equal the truth; an update made
through one is read through the other with ``min_version``; a builder killed mid-build loses its job to another
builder, which publishes the same index; an API replica killed under load costs a retrying client nothing."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest

from service.cli import main as cli_main
from service.main import main as serve_main

from .conftest import Cluster, GraphFiles, Server, wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(300)]

# Short enough that a dead builder's job is taken over within seconds, long enough for a loaded machine's heartbeats.
_LEASE_S = "6"


def _cluster(root: Path, database_url: str) -> Cluster:
    """The cluster's artifact store a folder (``_store_folder``)."""
    options = ("--job-lease-s", _LEASE_S, "--version-grace-s", "1")
    return Cluster(root, database_url, f"file://{_store_folder(root)}", *options)


def _store_folder(root: Path) -> Path:
    return root / "store"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, postgres_server: object) -> Iterator[Cluster]:
    database_url = str(postgres_server.create_database(f"roles_{uuid.uuid4().hex[:12]}"))  # type: ignore[attr-defined]
    cluster = _cluster(tmp_path_factory.mktemp("cluster"), database_url)
    try:
        cluster.server("api-a", "api")
        cluster.server("api-b", "api", "--replica-cache-mb", "0")  # keeps only the graph it used last
        cluster.server("builder-1", "builder")
        yield cluster
    finally:
        cluster.stop()


def _get(server: Server, path: str, **kwargs: object) -> httpx.Response:
    return httpx.get(f"{server.url}{path}", timeout=60.0, **kwargs)  # type: ignore[arg-type]


def _cache_metrics(server: Server) -> dict[str, float]:
    text = _get(server, "/metrics").text
    return {
        line.split()[0]: float(line.split()[1])
        for line in text.splitlines()
        if line.startswith("grail_cache_") and " " in line
    }


def test_roles_that_share_state_need_postgresql(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    for role in ("api", "builder"):
        assert serve_main(["--role", role, "--data-dir", str(tmp_path)]) == 2
        assert "needs a PostgreSQL --database-url" in capsys.readouterr().err


def test_replicas_and_a_builder_share_a_graph(cluster: Cluster, files: GraphFiles) -> None:
    api_a, api_b, builder = (cluster.servers[name] for name in ("api-a", "api-b", "builder-1"))
    assert not api_a.children() and not api_b.children(), "an API replica starts no build worker"
    assert builder.children(), "a builder runs its builds in worker processes"
    with api_a.client() as a, api_b.client() as b:
        graph_id = a.upload(files.path("cyclic.gra"), name="cyclic", wait=True)["id"]
        assert b.wait_until_ready("cyclic", timeout=120)["id"] == graph_id
        pairs, truth = files.pairs("cyclic.que"), files.answers("cyclic.ans")
        assert truth.any() and not truth.all()
        assert np.array_equal(a.query_batch("cyclic", pairs), truth)
        assert np.array_equal(b.query_batch("cyclic", pairs), truth)
    assert f"graph {graph_id}: version 1 published" in builder.log(), "the builder built it"
    # B keeps one graph at a time: each turn drops the other graph and loads this one again, exactly.
    with api_a.client() as a, api_b.client() as b:
        a.upload(files.path("dag.gra"), name="dag-b", wait=True)  # "dag" is another test's
        b.wait_until_ready("dag-b", timeout=120)
        before = _cache_metrics(api_b)
        for name, ref in (("dag", "dag-b"), ("cyclic", "cyclic"), ("dag", "dag-b"), ("cyclic", "cyclic")):
            truth = files.answers(f"{name}.ans")
            assert np.array_equal(b.query_batch(ref, files.pairs(f"{name}.que")), truth), name
        after = _cache_metrics(api_b)
        assert after["grail_cache_loads_total"] - before["grail_cache_loads_total"] >= 3
        assert after["grail_cache_evictions_total"] - before["grail_cache_evictions_total"] >= 3
        assert after["grail_cache_graphs"] == 1 and after["grail_cache_limit_bytes"] == 0
    assert f"graph {graph_id}: version 1 published" not in api_a.log() + api_b.log()
    # A builder answers its probes and metrics, and no graph route.
    assert _get(builder, "/health").status_code == 200
    assert _get(builder, "/ready").status_code in (200, 503)
    assert _get(builder, "/graphs").status_code == 404
    assert _get(builder, f"/graphs/{graph_id}").status_code == 404


def test_an_update_through_one_replica_is_read_through_the_other(
    cluster: Cluster, files: GraphFiles, capsys: pytest.CaptureFixture[str]
) -> None:
    api_a, api_b = cluster.servers["api-a"], cluster.servers["api-b"]
    with api_a.client() as a, api_b.client() as b:
        a.upload(b"r0 r1\n", name="ryw", wait=True)
        b.wait_until_ready("ryw", timeout=120)
        for k in range(2, 12):
            writer, reader = (b, api_a) if k % 2 else (a, api_b)
            version = writer.update_edges("ryw", add=[[f"r{k - 1}", f"r{k}"]])["version"]
            # Asked at once, through the other replica: the answer holds the update, and says its version.
            use_header = k % 4 < 2
            params = {"source": "r0", "target": f"r{k}"}
            answer = _get(
                reader,
                "/graphs/ryw/reachable",
                params={**params, **({} if use_header else {"min_version": version})},
                headers={"Grail-Min-Version": str(version)} if use_header else {},
            )
            assert answer.status_code == 200, answer.text
            assert answer.json()["reachable"] is True
            assert int(answer.headers["Grail-Graph-Version"]) >= version
            batch = _get(reader, "/graphs/ryw/reachable", params={"pairs": f"r{k},r0", "min_version": version})
            assert batch.status_code == 200 and batch.json() == {"reachable": [False]}
        # The client's read-your-writes is one line: the update's version passed on as min_version.
        assert b.reachable("ryw", "r0", "r12", min_version=a.update_edges("ryw", add=[["r11", "r12"]])["version"])
        version = b.update_edges("ryw", add=[["r12", "r13"]])["version"]
        assert a.path("ryw", "r11", "r13", min_version=version) == ["r11", "r12", "r13"]
        command = ["--url", api_a.url, "count", "ryw", "r0", "--min-version", str(version), "--json"]
        assert cli_main(command) == 0
        assert json.loads(capsys.readouterr().out)["count"] == 13  # r1 to r13
    # A version no replica holds: 503 with Retry-After after the timeout; a malformed one: 422.
    missing = _get(api_a, "/graphs/ryw/reachable", params={"source": "r0", "target": "r1", "min_version": 10**9})
    assert missing.status_code == 503 and missing.json()["error"] == "VersionNotHere", missing.text
    assert missing.headers["Retry-After"] == "1"
    bad = _get(api_a, "/graphs/ryw/reachable", params={"source": "r0", "target": "r1", "min_version": "two"})
    assert bad.status_code == 422 and "min_version" in bad.json()["detail"]


def test_a_builder_killed_mid_build_loses_its_job_to_another(cluster: Cluster, big_files: GraphFiles) -> None:
    api_a = cluster.servers["api-a"]
    second = cluster.server("builder-2", "builder")
    builders = {server.pid(): server for name, server in cluster.servers.items() if name.startswith("builder")}
    assert len(builders) == 2
    with api_a.client() as a:
        taken_over = a.upload(big_files.path("big.gra"), name="big-taken-over")["id"]

        def running_owner() -> str | None:
            rows = cluster.rows(
                "SELECT lease_owner FROM jobs WHERE graph_id = %s AND state = 'running' AND kind = 'build'",
                taken_over,
            )
            return rows[0][0] if rows else None

        owner = wait_until(running_owner, timeout=120)
        victim = next(server for pid, server in builders.items() if f":{pid}:" in owner)
        wait_until(lambda: (_store_folder(cluster.root) / "uploads").exists() and victim.children(), timeout=30)
        victim.kill()  # SIGKILL: its lease is neither renewed nor given back
        record = a.wait_until_ready("big-taken-over", timeout=240)
        assert record["status"] == "ready"
        ((attempts, state),) = cluster.rows(
            "SELECT attempts, state FROM jobs WHERE graph_id = %s AND kind = 'build'", taken_over
        )
        survivor = second if victim is not second else cluster.servers["builder-1"]
        assert (attempts, state) == (2, "done")
        assert f"graph {taken_over}: version 1 published" in survivor.log()
        # The same graph built once without interruption: the same index, array by array.
        reference = a.upload(big_files.path("big.gra"), name="big-reference", wait=True)["id"]
    assert _array_checksums(cluster, taken_over) == _array_checksums(cluster, reference)
    truth = big_files.answers("big.ans")
    with cluster.servers["api-b"].client() as b:
        assert np.array_equal(b.query_batch("big-taken-over", big_files.pairs("big.que")), truth)


def _array_checksums(cluster: Cluster, graph_id: str) -> dict[str, str]:
    """The sha256 of every array of the graph's published index (its manifest's build timings aside)."""
    ((version, checksum),) = cluster.rows(
        "SELECT version, checksum FROM versions WHERE graph_id = %s AND status = 'published'", graph_id
    )
    assert checksum.startswith("sha256:")
    folder = _store_folder(cluster.root) / "graphs" / graph_id / f"v{version}"
    manifests = [json.loads(path.read_text()) for path in folder.rglob("manifest.json")]
    arrays = next(m["arrays"] for m in manifests if "arrays" in m)
    return {name: entry["sha256"] for name, entry in arrays.items()}


def test_an_api_replica_killed_under_load_costs_a_retrying_client_nothing(cluster: Cluster, files: GraphFiles) -> None:
    api_b = cluster.servers["api-b"]
    doomed = cluster.server("api-doomed", "api")
    with doomed.client() as c:
        c.upload(files.path("dag.gra"), name="dag", wait=True)
    wait_until(lambda: _get(api_b, "/graphs/dag").json().get("status") == "ready", timeout=120)
    pairs, truth = files.pairs("dag.que"), files.answers("dag.ans")
    query = ";".join(f"{u},{v}" for u, v in pairs[:200])
    expected = truth[:200].tolist()
    served = {"doomed": 0, "other": 0}
    wrong: list[object] = []
    stop = threading.Event()

    def client() -> None:
        replicas = [("doomed", doomed.url), ("other", api_b.url)]
        with httpx.Client(timeout=30.0) as http:
            while not stop.is_set():
                for name, url in replicas:  # the first replica, else the next: a retry of an idempotent GET
                    try:
                        answer = http.get(f"{url}/graphs/dag/reachable", params={"pairs": query})
                    except httpx.TransportError:
                        continue
                    if answer.status_code != 200 or answer.json()["reachable"] != expected:
                        wrong.append((name, answer.status_code, answer.text[:200]))
                    served[name] += 1
                    break
                else:
                    wrong.append("no replica answered")

    thread = threading.Thread(target=client)
    thread.start()
    try:
        wait_until(lambda: served["doomed"] >= 20, timeout=60)
        doomed.kill()
        before = served["other"]
        wait_until(lambda: served["other"] >= before + 50, timeout=60)
    finally:
        stop.set()
        thread.join(timeout=60)
    assert not wrong, wrong[:5]


def test_postgresql_stopped_and_started_again(tmp_path: Path) -> None:
    """While the database is away, replicas answer queries from the versions they hold and writes answer 503 with
    Retry-After; once it is back, everything resumes by itself and nothing acknowledged is lost."""
    from tests.postgres_server import PostgresServer

    with PostgresServer() as postgres:
        cluster = _cluster(tmp_path, postgres.url)
        try:
            writer = cluster.server("all", "all")
            replica = cluster.server("api", "api")
            with writer.client() as w, replica.client() as r:
                w.upload(b"s0 s1\n", name="steady", wait=True)
                r.wait_until_ready("steady", timeout=120)
                acknowledged = w.update_edges("steady", add=[["s1", "s2"]])["version"]
            params = {"source": "s0", "target": "s2", "min_version": acknowledged}
            assert _get(replica, "/graphs/steady/reachable", params=params).json()["reachable"] is True
            postgres.pause()
            try:
                for server in (writer, replica):
                    answer = _get(server, "/graphs/steady/reachable", params=params)
                    assert answer.status_code == 200 and answer.json()["reachable"] is True, answer.text
                refused = httpx.post(f"{replica.url}/graphs/steady/edges", json={"add": [["s2", "s3"]]}, timeout=60)
                assert refused.status_code == 503 and refused.json()["error"] == "StoreUnavailable", refused.text
                assert int(refused.headers["Retry-After"]) > 0
            finally:
                postgres.resume()

            def update() -> int | None:
                reply = httpx.post(f"{replica.url}/graphs/steady/edges", json={"add": [["s2", "s3"]]}, timeout=60)
                assert reply.status_code in (200, 503), reply.text
                return int(reply.json()["version"]) if reply.status_code == 200 else None

            version = wait_until(update, timeout=120, interval=0.5)
            assert version == acknowledged + 1, "the refused update changed nothing"
            params = {"source": "s0", "target": "s3", "min_version": version}
            answer = _get(writer, "/graphs/steady/reachable", params=params)
            assert answer.status_code == 200 and answer.json()["reachable"] is True, answer.text
        finally:
            cluster.stop()

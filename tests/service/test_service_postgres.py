"""The service on PostgreSQL (a real server, tests/postgres_server.py; GRAIL_TEST_SKIP_POSTGRES=1 skips where
none can run, never in CI): uploads, queries, edge updates and deletes as on SQLite, nothing acknowledged lost to
a SIGKILL, and two servers sharing one database and one artifact store."""

from __future__ import annotations

import uuid
from pathlib import Path

import numpy as np
import pytest

from .conftest import GraphFiles, Server, wait_until

pytestmark = pytest.mark.timeout(240)


@pytest.fixture()
def database_url(postgres_server: object) -> str:
    return str(postgres_server.create_database(f"svc_{uuid.uuid4().hex[:12]}"))  # type: ignore[attr-defined]


def _server(tmp_path: Path, name: str, database_url: str, store: Path) -> Server:
    return Server(
        tmp_path / name,
        tmp_path / f"{name}.log",
        "--database-url",
        database_url,
        "--store",
        f"file://{store}",
        "--version-grace-s",
        "1",
    )


def test_graphs_updates_and_a_sigkill_on_postgresql(tmp_path: Path, database_url: str, files: GraphFiles) -> None:
    server = _server(tmp_path, "one", database_url, tmp_path / "store").start()
    try:
        with server.client() as client:
            dag = client.upload(files.path("dag.gra"), name="dag", wait=True)
            assert np.array_equal(client.query_batch("dag", files.pairs("dag.que")), files.answers("dag.ans"))
            chain = client.upload(b"c0 c0\n", name="chain", wait=True)["id"]
            for k in range(1, 21):
                assert client.update_edges("chain", add=[[f"c{k - 1}", f"c{k}"]])["version"] == k + 1
            doomed = client.upload(b"0 1\n", name="doomed", wait=True)["id"]
            client.delete("doomed")
        server.kill()
        server.start()
        with server.client() as client:
            assert client.wait_until_ready("chain", timeout=120)["version"] == 21
            assert list(client.query_batch("chain", [("c0", "c20"), ("c20", "c0")])) == [True, False]
            assert client.wait_until_ready("dag", timeout=120)["id"] == dag["id"]
            assert np.array_equal(client.query_batch("dag", files.pairs("dag.que")), files.answers("dag.ans"))
            assert {r["id"] for r in client.list()} == {dag["id"], chain}
            assert client.http.get(f"/graphs/{doomed}").status_code == 404
    finally:
        server.stop()


def test_two_servers_share_one_database(tmp_path: Path, database_url: str, files: GraphFiles) -> None:
    """No data directory lock with a shared database: both start; a graph uploaded to one is served by the
    other, and an update made through either is read through both."""
    store = tmp_path / "store"
    first = _server(tmp_path, "first", database_url, store).start()
    second = _server(tmp_path, "second", database_url, store).start()
    try:
        with first.client() as one, second.client() as two:
            graph_id = one.upload(files.path("cyclic.gra"), name="shared", wait=True)["id"]
            assert two.wait_until_ready("shared", timeout=120)["id"] == graph_id
            expected = files.answers("cyclic.ans")
            assert np.array_equal(two.query_batch("shared", files.pairs("cyclic.que")), expected)
            n = files.graphs["cyclic"].num_nodes  # new nodes: n, n + 1, n + 2
            version = two.update_edges("shared", add=[[n, n + 1]])["version"]
            wait_until(lambda: one.get("shared")["version"] == version)
            assert one.reachable("shared", n, n + 1)
            assert one.update_edges("shared", add=[[n + 1, n + 2]])["version"] == version + 1
            wait_until(lambda: two.get("shared")["version"] == version + 1)
            assert two.reachable("shared", n, n + 2) and not two.reachable("shared", n + 2, n)
    finally:
        first.stop()
        second.stop()

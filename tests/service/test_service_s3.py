"""The artifact store in an S3-compatible bucket, with a real PostgreSQL and real server processes: two API
replicas and a builder over ``--store s3://BUCKET/PREFIX``, the bucket moto's server mode (tests/s3_server.py)
behind a TCP proxy that the tests cut and restore. A graph uploaded through one replica is answered exactly
through the other, which loads it from the bucket; an object changed in the bucket is refused on load, never
answered from; a version is published once (create-only); while the bucket cannot be reached the replicas answer
from the versions they hold, writes to the bucket answer 503 with Retry-After, and an acknowledged upload is
built once the bucket is back."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest

from service.state import open_artifacts
from service.state.errors import ArtifactExists
from tests.s3_server import S3_CREDENTIALS, MotoServer, StoreProxy

from .conftest import Cluster, GraphFiles, Server, wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(300)]

_BUCKET = "grail-cluster"
_PREFIX = "shared"


class S3Cluster(Cluster):
    """The cluster's store a bucket of moto's server, reached through a proxy that the tests cut."""

    def __init__(self, root: Path, database_url: str, moto: MotoServer, proxy: StoreProxy) -> None:
        env = {
            **os.environ,
            "AWS_ENDPOINT_URL": proxy.endpoint,
            "AWS_ACCESS_KEY_ID": S3_CREDENTIALS["access_key_id"],
            "AWS_SECRET_ACCESS_KEY": S3_CREDENTIALS["secret_access_key"],
            "AWS_REGION": S3_CREDENTIALS["region"],
            "AWS_ALLOW_HTTP": "true",
        }
        super().__init__(root, database_url, f"s3://{_BUCKET}/{_PREFIX}", env=env)
        self.moto = moto
        self.proxy = proxy


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, postgres_server: object) -> Iterator[S3Cluster]:
    database_url = str(postgres_server.create_database(f"s3_{uuid.uuid4().hex[:12]}"))  # type: ignore[attr-defined]
    with MotoServer(_BUCKET) as moto, StoreProxy(moto.port) as proxy:
        cluster = S3Cluster(tmp_path_factory.mktemp("s3-cluster"), database_url, moto, proxy)
        try:
            cluster.server("api-a", "api")
            cluster.server("api-b", "api")
            cluster.server("builder", "builder")
            yield cluster
        finally:
            cluster.stop()


def _query(server: Server, graph: str, pairs: np.ndarray) -> httpx.Response:
    body = "\n".join(f"{u} {v}" for u, v in pairs.tolist()).encode()
    return httpx.post(
        f"{server.url}/graphs/{graph}/queries",
        content=body,
        headers={"Content-Type": "text/plain", "Accept": "text/plain"},
        timeout=60.0,
    )


def _version_keys(cluster: S3Cluster, graph_id: str) -> list[str]:
    return cluster.moto.keys(f"{_PREFIX}/graphs/{graph_id}/v1/")


def test_a_graph_uploaded_through_one_replica_is_answered_through_the_other(
    cluster: S3Cluster, files: GraphFiles
) -> None:
    api_a, api_b = cluster.servers["api-a"], cluster.servers["api-b"]
    with api_a.client() as a, api_b.client() as b:
        graph_id = a.upload(files.path("cyclic.gra"), name="cyclic", wait=True)["id"]
        assert b.wait_until_ready("cyclic", timeout=120)["id"] == graph_id
        pairs, truth = files.pairs("cyclic.que"), files.answers("cyclic.ans")
        assert truth.any() and not truth.all()
        assert np.array_equal(b.query_batch("cyclic", pairs), truth)
        assert np.array_equal(a.query_batch("cyclic", pairs), truth)
    # The version is in the bucket (its manifest and objects under a token of its own), and B's copy came from it.
    manifest_key = f"{_PREFIX}/graphs/{graph_id}/v1/artifact.json"
    objects = set(_version_keys(cluster, graph_id)) - {manifest_key}
    manifest = json.loads(cluster.moto.get(manifest_key))
    token = manifest["objects"]
    assert objects == {f"{_PREFIX}/graphs/{graph_id}/v1/{token}/{entry['path']}" for entry in manifest["files"]}
    assert (api_b.data_dir / "cache" / graph_id / "v1" / "artifact.json").read_bytes() == cluster.moto.get(manifest_key)
    assert not (api_b.data_dir / "graphs").exists(), "nothing of the store is kept in the replica's data dir"


def test_a_version_changed_in_the_bucket_is_refused_on_load(cluster: S3Cluster, files: GraphFiles) -> None:
    api_a, api_b = cluster.servers["api-a"], cluster.servers["api-b"]
    with api_a.client() as a:
        graph_id = a.upload(files.path("dag.gra"), name="tampered", wait=True)["id"]
    manifest = json.loads(cluster.moto.get(f"{_PREFIX}/graphs/{graph_id}/v1/artifact.json"))
    largest = max(manifest["files"], key=lambda entry: entry["size"])
    key = f"{_PREFIX}/graphs/{graph_id}/v1/{manifest['objects']}/{largest['path']}"
    data = bytearray(cluster.moto.get(key))
    data[len(data) // 2] ^= 0xFF  # one byte changed, the size kept: only the checksum can tell
    cluster.moto.put(key, bytes(data))
    # B has never loaded it: its first use fetches the changed object, and refuses it.
    pairs = files.pairs("dag.que")[:50]
    answer = _query(api_b, "tampered", pairs)
    assert answer.status_code == 424, answer.text
    assert answer.json()["build"]["type"] == "IndexFileError", answer.text
    assert f"graph {graph_id}: version 1 does not load" in api_b.log()
    assert f"{largest['path']} does not match its checksum" in api_b.log()
    assert not (api_b.data_dir / "cache" / graph_id / "v1").exists(), "nothing half-fetched is kept"


def test_a_version_is_published_once(cluster: S3Cluster, tmp_path: Path) -> None:
    api_a = cluster.servers["api-a"]
    with api_a.client() as a:
        graph_id = a.upload(b"p0 p1\np1 p2\n", name="once", wait=True)["id"]
    manifest_key = f"{_PREFIX}/graphs/{graph_id}/v1/artifact.json"
    before = cluster.moto.get(manifest_key), _version_keys(cluster, graph_id)
    store = open_artifacts(
        f"s3://{_BUCKET}/{_PREFIX}",
        tmp_path / "data",
        endpoint=cluster.moto.endpoint,
        client_options={"allow_http": True},
        **S3_CREDENTIALS,
    )
    other = tmp_path / "other-index"
    other.mkdir()
    (other / "index.bin").write_bytes(b"another build of the same version")
    with pytest.raises(ArtifactExists):
        store.publish(graph_id, 1, other)
    assert (cluster.moto.get(manifest_key), _version_keys(cluster, graph_id)) == before, "the loser left nothing"
    with api_a.client() as a:
        assert a.reachable("once", "p0", "p2") is True


def test_the_bucket_cut_off_and_restored(cluster: S3Cluster, files: GraphFiles) -> None:
    api_a, api_b, builder = cluster.servers["api-a"], cluster.servers["api-b"], cluster.servers["builder"]
    pairs, truth = files.pairs("dag.que"), files.answers("dag.ans")
    with api_a.client() as a, api_b.client() as b:
        a.upload(files.path("dag.gra"), name="held", wait=True)
        for client in (a, b):  # both replicas load it now
            assert np.array_equal(client.query_batch("held", pairs), truth)
        assert b.reachable("held", 1, 0) is False  # until the update below
        builder.stop()  # its jobs given back: the next upload's build waits for a builder
        pending = a.upload(files.path("cyclic.gra"), name="pending")
        assert pending["status"] == "queued"
        cluster.proxy.cut()
        try:
            # Queries answer from the versions held; an update goes to the journal (the database) and is read back.
            for client in (a, b):
                assert np.array_equal(client.query_batch("held", pairs), truth)
            assert b.reachable("held", 1, 0, min_version=a.update_edges("held", add=[[1, 0]])["version"]) is True
            # An upload must write the bucket: 503 with Retry-After, nothing acknowledged.
            refused = httpx.post(f"{api_b.url}/graphs", params={"name": "refused"}, content=b"x y\n", timeout=120.0)
            assert refused.status_code == 503, refused.text
            assert refused.json()["error"] == "StoreUnavailable" and int(refused.headers["Retry-After"]) > 0
            assert httpx.get(f"{api_a.url}/graphs/refused", timeout=60.0).status_code == 404
            # The builder comes back while the bucket is away: the acknowledged upload's build is put off, not
            # failed.
            builder.start()

            def put_off() -> bool:
                rows = cluster.rows(
                    "SELECT state, error FROM jobs WHERE graph_id = %s AND kind = 'build'", pending["id"]
                )
                return bool(rows) and rows[0][0] == "queued" and "StoreUnavailable" in json.dumps(rows[0][1])

            wait_until(put_off, timeout=120)
            assert b.get("pending")["status"] in ("queued", "building")
        finally:
            cluster.proxy.restore()
        # Everything resumes by itself: the build runs, and B answers it exactly; uploads are taken again.
        record = b.wait_until_ready("pending", timeout=180)
        assert record["id"] == pending["id"]
        assert np.array_equal(b.query_batch("pending", files.pairs("cyclic.que")), files.answers("cyclic.ans"))
        ((attempts, state),) = cluster.rows(
            "SELECT attempts, state FROM jobs WHERE graph_id = %s AND kind = 'build'", pending["id"]
        )
        assert (attempts, state) == (1, "done"), "the attempts the bucket's absence cost are not counted"
        assert b.upload(b"x y\n", name="refused", wait=True)["status"] == "ready"
        assert b.reachable("held", 1, 0) is True

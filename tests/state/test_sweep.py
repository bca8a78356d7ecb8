"""The sweep of the artifact store's orphans, on each metadata store and each artifact store: versions and uploads
no row refers to, and what interrupted writes left, removed once older than the grace period, and nothing else."""

from __future__ import annotations

import uuid
from pathlib import Path

import obstore

from service.state import ArtifactStore
from service.state.artifacts import LocalArtifactStore, artifact_key
from service.state.metadata import MetadataStore
from service.state.sweep import sweep_orphans

from .test_artifacts import index_folder
from .test_metadata import PARAMS
from .test_uploads import raw


def published(store: MetadataStore, artifacts: ArtifactStore, tmp_path: Path, graph_id: str, publish: bool) -> None:
    """A graph whose version 1 is stored and staged, and published when ``publish``."""
    manifest = artifacts.publish(graph_id, 1, index_folder(tmp_path))
    store.stage_version(
        graph_id, 1, artifact_key=artifact_key(graph_id, 1), checksum=manifest.checksum, size_bytes=manifest.size_bytes
    )
    if publish:
        store.publish_version(graph_id, 1)


def interrupted_writes(artifacts: ArtifactStore) -> list[str]:
    """What a publish and a put cut short leave (and the loser of a race on a version's manifest), as the store
    names it."""
    token = uuid.uuid4().hex
    if isinstance(artifacts, LocalArtifactStore):
        left = [f"graphs/aaaaaaaaaaaa/.v2.tmp-{token}", f"uploads/.zzzzzzzzzzzz.tmp-{token}"]
        for path in left:
            (artifacts.root / path).mkdir(parents=True)
            (artifacts.root / path / "part").write_bytes(b"partial")
        return left
    bucket = raw(artifacts)
    obstore.put(bucket, f"graphs/aaaaaaaaaaaa/v2/{token}/query_low.npy", b"partial")  # no manifest
    obstore.put(bucket, f"graphs/aaaaaaaaaaaa/v1/{token}/query_low.npy", b"loser")  # not the manifest's token
    obstore.put(bucket, f"uploads/zzzzzzzzzzzz/{token}/data", b"partial")  # no record
    return [
        f"graphs/aaaaaaaaaaaa/v1/{token}/",
        f"graphs/aaaaaaaaaaaa/v2/{token}/",
        f"uploads/zzzzzzzzzzzz/{token}/",
    ]


def test_orphans_go_once_older_than_the_grace_period(
    store: MetadataStore, artifacts: ArtifactStore, tmp_path: Path
) -> None:
    # Referred to: a published version, a staged one (a build about to publish it), a queued graph's upload.
    store.create_graph("aaaaaaaaaaaa", PARAMS)
    published(store, artifacts, tmp_path, "aaaaaaaaaaaa", publish=True)
    store.create_graph("gggggggggggg", PARAMS)
    published(store, artifacts, tmp_path, "gggggggggggg", publish=False)
    artifacts.put_upload("upload-c", [b"a b\n"])
    store.create_graph("cccccccccccc", PARAMS, upload_key="upload-c")
    # Orphans: a version a builder stored and never recorded (it crashed), an upload whose graph was never
    # created, one of a deleted graph, one of a graph that was built since.
    artifacts.publish("bbbbbbbbbbbb", 1, index_folder(tmp_path))
    artifacts.put_upload("upload-d", [b"a b\n"])
    artifacts.put_upload("upload-e", [b"a b\n"])
    store.create_graph("eeeeeeeeeeee", PARAMS, upload_key="upload-e")
    store.delete_graph("eeeeeeeeeeee")
    artifacts.put_upload("upload-f", [b"a b\n"])
    store.create_graph("ffffffffffff", PARAMS, upload_key="upload-f")
    published(store, artifacts, tmp_path, "ffffffffffff", publish=True)
    left = interrupted_writes(artifacts)

    young = sweep_orphans(store, artifacts, grace_s=3600)
    assert (young.versions, young.uploads, young.incomplete) == ([], [], [])
    assert artifacts.graphs() == ["aaaaaaaaaaaa", "bbbbbbbbbbbb", "ffffffffffff", "gggggggggggg"]
    assert [u.key for u in artifacts.uploads()] == ["upload-c", "upload-d", "upload-e", "upload-f"]

    old = sweep_orphans(store, artifacts, grace_s=0)
    assert old.versions == [("bbbbbbbbbbbb", 1)]
    assert old.uploads == ["upload-d", "upload-e", "upload-f"]
    assert old.incomplete == left
    assert artifacts.graphs() == ["aaaaaaaaaaaa", "ffffffffffff", "gggggggggggg"]
    assert [u.key for u in artifacts.uploads()] == ["upload-c"]
    for graph_id in ("aaaaaaaaaaaa", "gggggggggggg"):  # what is referred to is whole
        assert (artifacts.fetch(graph_id, 1) / "query_low.npy").is_file()
    artifacts.fetch_upload("upload-c", tmp_path / "upload-c")
    again = sweep_orphans(store, artifacts, grace_s=0)
    assert (again.versions, again.uploads, again.incomplete) == ([], [], [])

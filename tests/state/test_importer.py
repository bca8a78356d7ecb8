"""A data directory written by the JSON-record layout's own code (service.registry, service.updates) is imported
into the metadata and artifact stores: the same graphs, names, indexes and pending updates, the same answers."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

from grail_core import ReachabilityIndex
from service.state.artifacts import LocalArtifactStore
from service.state.importer import import_data_dir, needs_import
from service.state.metadata import GraphStatus, JobKind, JobState, MetadataStore
from tests.legacy_layout import write_graph

EDGES = b"a b\nb c\nc a\nc d\nd e\nf f\n"
UPDATES = [([["e", "g"]], []), ([], [["c", "d"]]), ([["g", "a"], ["h", "i"]], [["f", "f"]])]


def legacy_data_dir(data: Path) -> dict[str, str]:
    ready = write_graph(
        data, "aaaaaaaaaaa1", name="deps", status="ready", edges=EDGES, updates=UPDATES, torn_last_line=True
    )
    # Labels were not unique: a second "deps", waiting for its build.
    queued = write_graph(data, "aaaaaaaaaaa2", name="deps", status="queued", edges=EDGES, built=False, upload=True)
    failed = write_graph(
        data,
        "aaaaaaaaaaa3",
        name="broken input",
        status="failed",
        edges=b"a b\n",
        built=False,
        error={"type": "GraphFormatError", "message": "line 3: not an edge", "line": 3},
    )
    corrupt = write_graph(data, "aaaaaaaaaaa4", name="corrupt", status="ready", edges=EDGES)
    npy = next(corrupt.index.glob("query_*.npy"))
    npy.write_bytes(npy.read_bytes()[:-8] + b"\xff" * 8)
    return {"ready": ready.id, "queued": queued.id, "failed": failed.id, "corrupt": corrupt.id}


def test_import_of_a_json_record_data_dir(store: MetadataStore, tmp_path: Path) -> None:
    data = tmp_path / "data"
    ids = legacy_data_dir(data)
    legacy = ReachabilityIndex.load(data / "graphs" / ids["ready"] / "index", backend="cpu")
    for entry in (data / "graphs" / ids["ready"] / "updates.jsonl").read_bytes().splitlines()[:-1]:
        update = json.loads(entry)
        legacy.update(add=update["add"], remove=update["remove"])
    assert legacy.version == 1 + len(UPDATES)

    artifacts = LocalArtifactStore(data)
    assert needs_import(data)
    report = import_data_dir(data, store, artifacts)
    assert report.ready == [ids["ready"]] and report.queued == [ids["queued"]]
    assert sorted(report.failed) == sorted([ids["failed"], ids["corrupt"]])
    assert report.updates == len(UPDATES) and report.skipped == []

    graph = store.get_graph("deps")
    assert (graph.id, graph.status, graph.published_version, graph.head_version) == (ids["ready"], "ready", 1, 4)
    assert graph.params == {
        "format": None,
        "dims": 2,
        "seed": 7,
        "backend": "cpu",
        "source_column": None,
        "target_column": None,
        "header": None,
    }
    assert graph.stats is not None and graph.stats["nodes"] == 6
    version = store.get_version(graph.id, 1)
    assert version.checksum == artifacts.manifest(graph.id, 1).checksum
    # The stored index plus the journal rows answer as the old index with its journal did.
    imported = ReachabilityIndex.load(artifacts.fetch(graph.id, 1), backend="cpu")
    for row in store.read_updates(graph.id, imported.version):
        update = row.decoded()
        imported.update(add=update["add"], remove=update["remove"])
    assert imported.version == legacy.version
    names = list("abcdefghi")
    assert [imported.reachable(u, v) for u, v in itertools.product(names, names)] == [
        legacy.reachable(u, v) for u, v in itertools.product(names, names)
    ]

    queued = store.get_graph(ids["queued"])
    assert queued.name == ids["queued"]  # "deps" was taken by the first graph
    assert (queued.status, queued.upload_key) == (GraphStatus.queued, ids["queued"])  # its upload, in the store
    assert artifacts.fetch_upload(ids["queued"], tmp_path / "fetched").size == len(EDGES)
    assert (tmp_path / "fetched").read_bytes() == EDGES
    assert [u.key for u in artifacts.uploads()] == [ids["queued"]]
    assert [(j.kind, j.state) for j in store.list_jobs(ids["queued"])] == [(JobKind.build, JobState.queued)]
    failed = store.get_graph(ids["failed"])
    assert failed.status is GraphStatus.failed and failed.error == {
        "type": "GraphFormatError",
        "message": "line 3: not an edge",
        "line": 3,
    }
    corrupt = store.get_graph("corrupt")
    assert corrupt.status is GraphStatus.failed and corrupt.error["type"] == "IndexFileError"  # type: ignore[index]

    # The old files are gone, the new layout stays; a second start imports nothing.
    assert not list(data.glob("graphs/*/record.json")) and not list(data.glob("graphs/*/updates.jsonl"))
    assert artifacts.versions(ids["ready"]) == [1] and not (data / "graphs" / ids["ready"] / "index").exists()
    assert not needs_import(data)
    again = import_data_dir(data, store, artifacts)
    assert (again.ready, again.queued, again.failed, again.updates) == ([], [], [], 0)


def test_import_cut_short_after_moving_an_upload_aside_resumes(store: MetadataStore, tmp_path: Path) -> None:
    data = tmp_path / "data"
    ids = legacy_data_dir(data)
    (data / "uploads" / ids["queued"]).rename(data / "uploads" / f".{ids['queued']}.import")  # where a crash left it
    artifacts = LocalArtifactStore(data)
    import_data_dir(data, store, artifacts)
    assert store.get_graph(ids["queued"]).upload_key == ids["queued"]
    artifacts.fetch_upload(ids["queued"], tmp_path / "fetched")
    assert (tmp_path / "fetched").read_bytes() == EDGES
    assert not (data / "uploads" / f".{ids['queued']}.import").exists()


def test_import_cut_short_after_storing_an_index_resumes(store: MetadataStore, tmp_path: Path) -> None:
    """The index moved into the artifact store, the crash came before its row: the next start records it."""
    data = tmp_path / "data"
    ids = legacy_data_dir(data)
    artifacts = LocalArtifactStore(data)
    artifacts.publish(ids["ready"], 1, data / "graphs" / ids["ready"] / "index", move=True)
    report = import_data_dir(data, store, artifacts)
    assert ids["ready"] in report.ready and report.updates == len(UPDATES)
    graph = store.get_graph("deps")
    assert (graph.id, graph.published_version, graph.head_version) == (ids["ready"], 1, 4)

"""A data directory written by the JSON-record layout's own code (service.registry, service.updates) is imported
into the metadata and artifact stores: the same graphs, names, indexes and pending updates, the same answers."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

from grail_core import ReachabilityIndex, read_graph
from service.registry import BuildParams, GraphRegistry
from service.state.artifacts import LocalArtifactStore
from service.state.importer import import_data_dir, needs_import
from service.state.metadata import GraphStatus, JobKind, JobState, MetadataStore

EDGES = b"a b\nb c\nc a\nc d\nd e\nf f\n"
UPDATES = [([["e", "g"]], []), ([], [["c", "d"]]), ([["g", "a"], ["h", "i"]], [["f", "f"]])]
PARAMS = BuildParams(format=None, dims=2, seed=7, backend="cpu")


def built_graph(registry: GraphRegistry, label: str) -> str:
    """Upload, build and publish as the running service does."""
    graph_id, upload = registry.new_upload_file()
    upload.write_bytes(EDGES)
    registry.add(graph_id, label, PARAMS, len(EDGES))
    staged = registry.staging_path(graph_id) / "index"
    ReachabilityIndex.build(read_graph(EDGES), dims=PARAMS.dims, seed=PARAMS.seed, backend="cpu").save(staged)
    assert registry.publish(graph_id, staged) is not None
    return graph_id


def legacy_data_dir(data: Path) -> dict[str, str]:
    registry = GraphRegistry(data)
    registry.recover()
    ready = built_graph(registry, "deps")
    index, journal = registry.updatable(ready)
    for add, remove in UPDATES:  # as POST /graphs/{id}/edges does: applied, then journaled
        with journal.lock:
            index.update(add=add, remove=remove)
            journal.append(index.version, add, remove)
    with open(journal.path, "ab") as handle:  # a line a crash cut short: never answered
        handle.write(b'{"version": 5, "add": [["x"')

    queued, upload = registry.new_upload_file()
    upload.write_bytes(EDGES)
    registry.add(queued, "deps", PARAMS, len(EDGES))  # labels were not unique

    failed, _ = registry.new_upload_file()
    registry.add(failed, "broken input", PARAMS, 3)
    registry.fail(failed, "GraphFormatError", "line 3: not an edge", 3)

    corrupt = built_graph(registry, "corrupt")
    npy = next((data / "graphs" / corrupt / "index").glob("query_*.npy"))
    npy.write_bytes(npy.read_bytes()[:-8] + b"\xff" * 8)
    return {"ready": ready, "queued": queued, "failed": failed, "corrupt": corrupt}


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

"""Index files: round trip, atomic writes, and rejection of anything missing, truncated or altered."""

from __future__ import annotations

import json
import mmap
from pathlib import Path

import numpy as np
import pytest

from grail_core import IndexFileError, ReachabilityIndex


@pytest.fixture(scope="module")
def index() -> ReachabilityIndex:
    edges = np.array([[0, 1], [1, 2], [2, 0], [2, 3], [3, 4], [5, 4]])
    return ReachabilityIndex.from_edges(edges, backend="cpu", dims=3, seed=11)


ALL_PAIRS = np.array([[u, v] for u in range(6) for v in range(6)])


@pytest.mark.parametrize("mmap", [True, False])
def test_round_trip_answers_and_stats(tmp_path: Path, index: ReachabilityIndex, mmap: bool) -> None:
    index.save(tmp_path / "idx")
    loaded = ReachabilityIndex.load(tmp_path / "idx", mmap=mmap)
    np.testing.assert_array_equal(loaded.query_batch(ALL_PAIRS), index.query_batch(ALL_PAIRS))
    assert loaded.stats == index.stats
    plan = loaded.stats.build_plan  # the build's cost model, per phase: its prediction and where it ran
    assert set(plan) == {"graph", "condense", "labels", "hubs"}
    for name, phase in plan.items():
        assert set(phase) == {"cpu", "ran"} and phase["ran"] == loaded.stats.phase_backends[name], name
    for name in index.arrays._fields:
        np.testing.assert_array_equal(getattr(loaded.arrays, name), getattr(index.arrays, name))
    for name in ("out_indptr", "out_indices", "in_indptr", "in_indices"):
        np.testing.assert_array_equal(getattr(loaded.graph, name), getattr(index.graph, name))
    assert loaded.graph.num_edges == 6
    assert [p.name for p in tmp_path.iterdir()] == ["idx"]  # no temporary folder left behind


def test_string_names_survive_a_round_trip(tmp_path: Path) -> None:
    index = ReachabilityIndex.from_bytes(b"a b\nb c\n", backend="cpu")
    index.save(tmp_path / "idx")
    loaded = ReachabilityIndex.load(tmp_path / "idx")
    assert loaded.reachable("a", "c") and not loaded.reachable("c", "a")
    assert not loaded.names_are_integers


def test_existing_directory_is_kept_unless_overwrite(tmp_path: Path, index: ReachabilityIndex) -> None:
    index.save(tmp_path / "idx")
    with pytest.raises(IndexFileError, match="exists"):
        index.save(tmp_path / "idx")
    index.save(tmp_path / "idx", overwrite=True)
    assert ReachabilityIndex.load(tmp_path / "idx").stats == index.stats
    assert [p.name for p in tmp_path.iterdir()] == ["idx"]


def _saved(tmp_path: Path, index: ReachabilityIndex) -> Path:
    index.save(tmp_path / "idx")
    return tmp_path / "idx"


def test_corrupted_array_is_rejected(tmp_path: Path, index: ReachabilityIndex) -> None:
    path = _saved(tmp_path, index) / "query_hi.npy"
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(IndexFileError, match="corrupted"):
        ReachabilityIndex.load(path.parent)


def test_truncated_array_is_rejected(tmp_path: Path, index: ReachabilityIndex) -> None:
    path = _saved(tmp_path, index) / "query_comp.npy"
    path.write_bytes(path.read_bytes()[:-3])
    with pytest.raises(IndexFileError, match="truncated"):
        ReachabilityIndex.load(path.parent)


def test_missing_array_and_missing_manifest_are_rejected(tmp_path: Path, index: ReachabilityIndex) -> None:
    root = _saved(tmp_path, index)
    (root / "query_fwd.npy").unlink()
    with pytest.raises(IndexFileError, match="missing"):
        ReachabilityIndex.load(root)
    (root / "manifest.json").unlink()
    with pytest.raises(IndexFileError, match="not an index"):
        ReachabilityIndex.load(root)


def test_unknown_version_and_garbled_manifest_are_rejected(tmp_path: Path, index: ReachabilityIndex) -> None:
    root = _saved(tmp_path, index)
    manifest = json.loads((root / "manifest.json").read_text())
    manifest["version"] = 999
    (root / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(IndexFileError, match="version"):
        ReachabilityIndex.load(root)
    (root / "manifest.json").write_text('{"format": "grail-index", "version": 1')
    with pytest.raises(IndexFileError, match="unreadable"):
        ReachabilityIndex.load(root)


def test_failed_write_leaves_nothing(tmp_path: Path, index: ReachabilityIndex, monkeypatch: pytest.MonkeyPatch) -> None:
    import grail_core.storage as storage

    def broken_save(*args: object, **kwargs: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(storage.np, "save", broken_save)
    with pytest.raises(OSError):
        index.save(tmp_path / "idx")
    assert list(tmp_path.iterdir()) == []


def _memory_mapped(array: object) -> bool:
    while array is not None:
        if isinstance(array, (np.memmap, mmap.mmap)):
            return True
        array = getattr(array, "base", None)
    return False


V1_GRAPHS = {
    # Written by the release before the name tables (index format version 1: sorted names), from these edges.
    "strings": "zürich bern\nbern 東京\n東京 zürich\nbern basel\nbasel lugano\ngenf lugano\n",
    "integers": "1000000 -7\n-7 42\n42 1000000\n42 9000000000\n9000000000 5\n",
}


@pytest.mark.parametrize("name", sorted(V1_GRAPHS))
def test_format_version_1_still_loads_and_saves_as_version_2(tmp_path: Path, name: str) -> None:
    folder = Path(__file__).parent / "data" / f"index-v1-{name}"
    assert json.loads((folder / "manifest.json").read_text())["version"] == 1
    old = ReachabilityIndex.load(folder)
    new = ReachabilityIndex.from_bytes(V1_GRAPHS[name].encode(), format="edgelist", backend="cpu")
    names = new.names.names_of(range(new.names.size))
    assert sorted(old.names.names_of(range(old.names.size)), key=str) == sorted(names, key=str)
    pairs = [[u, v] for u in names for v in names]
    assert old.query_batch(pairs).tolist() == new.query_batch(pairs).tolist()
    assert old.query_batch(pairs).sum() > len(names)  # some pairs reach, some do not
    old.save(tmp_path / "again")
    assert json.loads((tmp_path / "again" / "manifest.json").read_text())["version"] == 2
    again = ReachabilityIndex.load(tmp_path / "again")
    assert again.query_batch(pairs).tolist() == new.query_batch(pairs).tolist()


def test_name_tables_are_saved_checksummed_and_memory_mapped(tmp_path: Path) -> None:
    index = ReachabilityIndex.from_bytes("a b\nb c\né a\n".encode(), backend="cpu")
    index.save(tmp_path / "idx")
    manifest = json.loads((tmp_path / "idx" / "manifest.json").read_text())
    assert {"names_slots", "names_data", "names_offsets"} <= set(manifest["arrays"])
    assert all(entry["sha256"] for entry in manifest["arrays"].values())
    loaded = ReachabilityIndex.load(tmp_path / "idx", mmap=True)
    for array in (loaded.names.slots, loaded.names.data, loaded.names.offsets):
        assert _memory_mapped(array)
    assert loaded.reachable("é", "c") and not loaded.reachable("c", "é")
    path = tmp_path / "idx" / "names_data.npy"
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(IndexFileError, match="corrupted"):
        ReachabilityIndex.load(tmp_path / "idx")

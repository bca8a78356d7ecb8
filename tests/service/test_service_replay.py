"""A start replays a graph's journal in one fold, whatever number of pages it is read in."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from grail_core.version import Version
from service import registry as registry_module
from service.registry import GraphRegistry
from service.state import open_artifacts, open_metadata
from service.updates import encode

from .conftest import publish_in_process


def test_a_journal_of_many_pages_is_folded_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    metadata, artifacts = open_metadata(None, tmp_path / "data"), open_artifacts(None, tmp_path / "data")
    try:
        writer = GraphRegistry(metadata, artifacts)
        writer.start()
        graph_id = "aaaaaaaaaaaa"
        publish_in_process(writer, tmp_path, graph_id, "chain", b"c0 c1\nx y\n")
        updates = 25
        for k in range(1, updates + 1):  # a chain grows by a node per update; every fifth cuts x -> y and adds it
            add, remove = ([["x", "y"]], []) if k % 10 == 0 else ([], [["x", "y"]]) if k % 5 == 0 else ([], [])
            metadata.append_update(graph_id, k, encode([[f"c{k}", f"c{k + 1}"], *add], remove))
        monkeypatch.setattr(registry_module, "JOURNAL_PAGE", 4)  # read in seven pages
        folds: list[int] = []
        fold = Version.folded

        def counted(self: Version, journal: Iterable[tuple[Any, Any]], number: int | None = None) -> Version:
            journal = list(journal)
            folds.append(len(journal))
            return fold(self, journal, number)

        monkeypatch.setattr(Version, "folded", counted)
        reader = GraphRegistry(metadata, artifacts)
        assert reader.start() == [graph_id]
        reader.load(graph_id)
        version = reader.ready_version(graph_id)
        assert folds == [updates] and version.number == updates + 1
        assert version.reachable("c0", f"c{updates + 1}") and not version.reachable("x", "y")
        assert reader.loading() == []
    finally:
        metadata.close()

"""A data directory of the JSON-record layout (the releases before the metadata store), written file for file as
their service wrote it (service/registry.py and service/updates.py at b38363c): ``graphs/<id>/record.json``
(the record, rewritten whole), ``graphs/<id>/index/`` (the index, saved by grail_core's storage),
``graphs/<id>/updates.jsonl`` (one JSON line per edge update past the index, with the version it makes) and
``uploads/<id>`` (an upload waiting for its build). For the importer's tests, in process and through a server."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from grail_core import read_graph
from grail_core.labels import Labels
from grail_core.storage import save_labels

__all__ = ["PARAMS", "LegacyGraph", "write_graph"]

# The record's params as those releases kept them (flat: format, dims, seed, backend, reading options).
PARAMS = {
    "format": None,
    "dims": 2,
    "seed": 7,
    "backend": "cpu",
    "source_column": None,
    "target_column": None,
    "header": None,
}

Update = tuple[list[list[Any]], list[list[Any]]]


class LegacyGraph:
    def __init__(self, graph_id: str, folder: Path) -> None:
        self.id = graph_id
        self.folder = folder

    @property
    def index(self) -> Path:
        return self.folder / "index"

    @property
    def journal(self) -> Path:
        return self.folder / "updates.jsonl"


def write_graph(
    data: Path,
    graph_id: str,
    *,
    name: str,
    status: str,
    edges: bytes,
    built: bool = True,
    updates: Sequence[Update] = (),
    torn_last_line: bool = False,
    upload: bool = False,
    error: dict[str, Any] | None = None,
) -> LegacyGraph:
    """One graph: ``built``, its index (version 1) and the journal of ``updates`` (versions 2, 3 ...), a last
    line a crash cut short with ``torn_last_line``; ``upload``, its upload file (a graph waiting for its build)."""
    folder = data / "graphs" / graph_id
    folder.mkdir(parents=True, exist_ok=True)
    stats = None
    if built:
        labels = Labels.build(read_graph(edges), dims=PARAMS["dims"], seed=PARAMS["seed"], backend="cpu")
        save_labels(labels, folder / "index", version=1)
        stats = labels.stats.to_dict()
    if updates or torn_last_line:
        with open(folder / "updates.jsonl", "wb") as handle:
            for version, (add, remove) in enumerate(updates, start=2):
                line = json.dumps({"version": version, "add": add, "remove": remove}, separators=(",", ":"))
                handle.write(line.encode() + b"\n")
            if torn_last_line:
                handle.write(b'{"version":%d,"add":[["x"' % (len(updates) + 2))
    if upload:
        (data / "uploads").mkdir(parents=True, exist_ok=True)
        (data / "uploads" / graph_id).write_bytes(edges)
    now = time.time()
    record = {
        "id": graph_id,
        "name": name,
        "params": PARAMS,
        "status": status,
        "created_at": now,
        "updated_at": now,
        "upload_bytes": len(edges),
        "phase": None,
        "progress": None,
        "error": error,
        "stats": stats if status == "ready" else None,
    }
    (folder / "record.json").write_text(json.dumps(record, indent=1))
    return LegacyGraph(graph_id, folder)

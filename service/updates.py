"""Edge updates of ready graphs: journaled before they are answered, applied in order, folded into a new index
by a background rebuild.

An update is checked against the graph's current version (grail_core: ``Version.plan_update``, nothing changes),
written to the graph's journal (``graphs/<id>/updates.jsonl``: one JSON line per update, with the version it
makes, flushed and fsynced), then applied (``Version.apply``: the next version, which every query after the
answer reads). One lock per graph keeps the three in order. A start (after a crash too) replays the
journal's lines past the saved index's version; a last line a crash cut short was never answered and is
dropped.

A rebuild is queued once updates are pending and none runs: a build worker loads the index, applies the
journal up to the version it was queued at, builds new labels and saves them (service.worker); the registry
swaps the new index in under the graph's lock, with the updates that came meanwhile applied to it, and only
then drops the folded lines from the journal (``GraphRegistry.publish_rebuild``).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grail_core import IndexFileError
from grail_core.version import Version

__all__ = ["JOURNAL_FILE", "Journal", "RebuildState", "replay"]

log = logging.getLogger("grail.service.updates")

JOURNAL_FILE = "updates.jsonl"


@dataclass
class RebuildState:
    """A graph's background rebuild, as its record shows it."""

    version: int  # the version it folds in
    phase: str = "queued"
    progress: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"version": self.version, "phase": self.phase, "progress": round(self.progress, 4)}


class Journal:
    """One graph's journal file; callers hold the graph's update lock."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = threading.Lock()  # the graph's update lock: plan, journal, apply; and a rebuild's swap

    def append(self, version: int, add: list[Any], remove: list[Any]) -> None:
        """Write one update durably (the line, then fsync); OSError when the disk refuses it, with the file as
        it was (a partial line is cut off again)."""
        line = (json.dumps({"version": version, "add": add, "remove": remove}, separators=(",", ":")) + "\n").encode()
        new = not self.path.exists()
        with open(self.path, "ab") as fh:
            start = fh.tell()
            try:
                fh.write(line)
                fh.flush()
                os.fsync(fh.fileno())
            except OSError:
                fh.truncate(start)
                raise
        if new:  # the file's name must survive a crash too
            _fsync_dir(self.path.parent)

    def entries(self, after: int = 0) -> Iterator[dict[str, Any]]:
        """The updates past version ``after``, in order; a last line without its newline (a write a crash cut
        short, never answered) is skipped."""
        if not self.path.exists():
            return
        with open(self.path, "rb") as fh:
            for raw in fh:
                if not raw.endswith(b"\n"):
                    log.warning("%s: dropping an unfinished last line (%d bytes)", self.path, len(raw))
                    return
                entry = json.loads(raw)
                if int(entry["version"]) > after:
                    yield entry

    def drop_through(self, version: int) -> None:
        """Keep only the updates past ``version`` (a temporary file renamed over the journal)."""
        keep = list(self.entries(after=version))
        if not keep:
            self.path.unlink(missing_ok=True)
            return
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "wb") as fh:
            for entry in keep:
                fh.write((json.dumps(entry, separators=(",", ":")) + "\n").encode())
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)
        _fsync_dir(self.path.parent)


def replay(version: Version, journal: Journal, through: int | None = None) -> Version:
    """``version`` with the journal's updates past it (up to ``through``) applied in order: the version they
    make. IndexFileError when the journal does not continue the versions."""
    for entry in journal.entries(after=version.number):
        number = int(entry["version"])
        if through is not None and number > through:
            break
        if number != version.number + 1:
            raise IndexFileError(f"{journal.path}: update {number} does not follow version {version.number}")
        version = version.updated(add=entry["add"], remove=entry["remove"])
    return version


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

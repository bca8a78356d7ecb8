"""Edge updates as the journal keeps them, and the one place that applies journaled updates to a version.

An update is journaled as one row of the metadata store (service.state: ``append_update``), numbered by the
version it makes; its payload is ``encode``'s JSON text of the edges as the client named them. Journaled
updates are applied to a version by ``apply_journal`` alone (or in its two steps, ``Journal.read`` then
``fold_journal``, where the rows are read before the version is at hand): a restart replaying a graph's
journal, a rebuild folding it into new labels (in the build worker, from a file of rows:
``write_rows``/``read_rows``), a server catching up with what another server journaled, and a rebuilt version
taking the updates that came meanwhile.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grail_core.version import Version

from .wire import compact_json

__all__ = [
    "encode",
    "decode",
    "apply_journal",
    "fold_journal",
    "Journal",
    "write_rows",
    "read_rows",
    "JournalGap",
    "Row",
    "PROGRESS_ROWS",
]

# (the version an update makes, its payload)
Row = tuple[int, str]
# Progress is reported after this many rows (and at the end).
PROGRESS_ROWS = 1000


class JournalGap(Exception):
    """Journal rows that do not continue the version they are applied to."""


def encode(add: list[Any], remove: list[Any]) -> str:
    return compact_json({"add": add, "remove": remove})


def decode(payload: str) -> tuple[list[Any], list[Any]]:
    body = json.loads(payload)
    return body.get("add", []), body.get("remove", [])


@dataclass
class Journal:
    """Journal rows read and decoded: the updates that make versions ``after + 1`` to ``last``."""

    after: int
    updates: list[tuple[list[Any], list[Any]]] = field(default_factory=list)

    @property
    def last(self) -> int:
        return self.after + len(self.updates)

    def read(self, rows: Iterable[Row], total: int = 0, progress: Callable[[int, int], None] | None = None) -> Journal:
        """The rows decoded onto the end (no call into grail_core: read beside anything that holds it);
        ``progress(done, total)`` after every ``PROGRESS_ROWS`` rows. JournalGap when a row does not make the
        next version."""
        for number, payload in rows:
            if number != self.last + 1:
                raise JournalGap(f"journal row {number} does not follow version {self.last}")
            self.updates.append(decode(payload))
            if progress is not None and len(self.updates) % PROGRESS_ROWS == 0:
                progress(len(self.updates) - 1, max(total, len(self.updates)))
        return self


def apply_journal(
    version: Version, rows: Iterable[Row], total: int = 0, progress: Callable[[int, int], None] | None = None
) -> Version:
    """``version`` with the journaled updates ``rows`` applied in order: the version the last one makes, folded
    at once (``fold_journal``). ``progress(done, total)`` after every ``PROGRESS_ROWS`` rows read, and once
    they are applied. JournalGap when a row does not make the next version."""
    return fold_journal(version, Journal(version.number).read(rows, total, progress), total, progress)


def fold_journal(
    version: Version, journal: Journal, total: int = 0, progress: Callable[[int, int], None] | None = None
) -> Version:
    """``version`` with a journal read for it applied: folded at once (``Version.folded``: in time linear in the
    graph and the updates on a version with none pending)."""
    if journal.after != version.number:
        raise JournalGap(f"a journal past version {journal.after} does not follow version {version.number}")
    version = version.folded(journal.updates)
    if progress is not None:
        progress(len(journal.updates), max(total, len(journal.updates)))
    return version


def write_rows(path: Path, rows: Iterable[Row]) -> int:
    """Rows as JSON lines in ``path`` (for a build worker); returns how many."""
    count = 0
    with open(path, "w", encoding="utf-8") as handle:
        for number, payload in rows:
            handle.write(json.dumps([number, payload]) + "\n")
            count += 1
    return count


def read_rows(path: Path) -> Iterator[Row]:
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            number, payload = json.loads(line)
            yield int(number), str(payload)

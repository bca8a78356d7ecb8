"""Background work of a server beside its requests and builds.

- ``Housekeeping``: the server's heartbeat in the servers table; versions no query uses any more removed once
  retired for ``--version-grace-s`` (their rows forgotten after the files); deleted graphs' rows forgotten once
  their versions are; and, less often, the artifact store's orphans (``sweep_orphans``), the change feed and
  the rows of jobs that ended long ago.
- ``Follower`` (shared metadata stores only): what other servers write, followed through the change feed
  (PostgreSQL's LISTEN/NOTIFY, with polling behind it): each graph named by a change is brought in line with
  the store (``GraphRegistry.sync``; not in a builder, which serves none), and a queued job wakes the build
  lanes (not in an API replica, which builds none: its lanes never start).
"""

from __future__ import annotations

import logging
import threading
import time

from .jobs import BuildRunner
from .registry import GraphRegistry
from .state.errors import StateError
from .state.metadata import Change, ChangeKind
from .state.sweep import DEFAULT_GRACE_S, sweep_orphans
from .stores import SERVER_TTL_S, Stores

__all__ = ["Housekeeping", "Follower"]

log = logging.getLogger("grail.service.housekeeping")

# The slower chores (listing the artifact store, pruning tables) run this often.
_SLOW_CHORES_S = 3600.0
_CHANGES_KEPT_S = 3600.0
_JOBS_KEPT_S = 86400.0
# After a read that found changes the follower waits this long before the next one: under a stream of commits
# (each notifies) one read takes the changes of many, instead of a read per commit.
_FOLLOW_SPACING_S = 0.02


class Housekeeping:
    def __init__(self, stores: Stores, version_grace_s: float) -> None:
        self._stores = stores
        self._grace_s = version_grace_s
        self._interval_s = min(max(version_grace_s / 2, 0.5), SERVER_TTL_S / 4)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="grail-housekeeping", daemon=True)
        self._slow_due = time.monotonic() + _SLOW_CHORES_S

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            try:
                self.run_once()
            except StateError as exc:  # the store is away or full: next time
                log.warning("housekeeping: %s", exc.message)
            except Exception:
                log.exception("housekeeping failed")

    def run_once(self) -> None:
        metadata, artifacts = self._stores.metadata, self._stores.artifacts
        if not metadata.heartbeat_server(self._stores.server_id, SERVER_TTL_S):
            log.warning("this server's row had expired; it is registered again")
        for version in metadata.garbage(self._grace_s):
            artifacts.delete(version.graph_id, version.version)
            metadata.forget_version(version.graph_id, version.version)
            log.info("graph %s: version %d removed (%s)", version.graph_id, version.version, version.status.value)
        metadata.forget_deleted_graphs(self._grace_s)
        if time.monotonic() >= self._slow_due:
            self._slow_due = time.monotonic() + _SLOW_CHORES_S
            sweep_orphans(metadata, artifacts, DEFAULT_GRACE_S)
            metadata.prune_changes(_CHANGES_KEPT_S)
            metadata.prune_jobs(_JOBS_KEPT_S)


class Follower:
    """See the module doc."""

    def __init__(self, stores: Stores, registry: GraphRegistry, runner: BuildRunner) -> None:
        self._stores = stores
        self._registry = registry
        self._runner = runner
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="grail-follower", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        subscription = None
        while not self._stop.is_set():
            try:
                if subscription is None:
                    subscription = self._stores.metadata.subscribe(poll_s=1.0)
                changes = subscription.wait(1.0)
                self._follow(changes)
                if changes:
                    self._stop.wait(_FOLLOW_SPACING_S)
            except StateError as exc:
                log.warning("following the changes of other servers: %s", exc.message)
                self._stop.wait(1.0)
            except Exception:
                log.exception("following the changes of other servers failed")
                self._stop.wait(1.0)
        if subscription is not None:
            subscription.close()

    def _follow(self, changes: list[Change]) -> None:
        graphs: dict[str, None] = {}
        # The newest journal and version change of each graph: a server that holds it holds the older ones.
        newest: dict[tuple[str, ChangeKind], Change] = {}
        jobs = False
        for change in changes:
            if change.kind is ChangeKind.job:
                # A job changes nothing a server answers from (a record reads its graph's jobs from the store).
                jobs = True
                continue
            if change.graph_id is None or not self._registry.serving:  # a builder serves no version
                continue
            if change.kind in (ChangeKind.journal, ChangeKind.version) and change.version is not None:
                key = (change.graph_id, change.kind)
                seen = newest.get(key)
                if seen is None or change.version > (seen.version or 0):
                    newest[key] = change
                continue
            graphs[change.graph_id] = None
        if jobs:
            self._runner.wake()
        for (graph_id, _), change in newest.items():
            if graph_id not in graphs and not self._registry.holds(change):
                graphs[graph_id] = None  # not this server's own change, nor one it has applied
        for graph_id in graphs:
            self._registry.sync(graph_id)

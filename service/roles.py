"""What one ``grail-serve`` process does (``--role``): one table, read by the settings and the app factory.

- ``all`` (the default): everything in one process, today's single server; SQLite in the data directory (its
  owner lock held) or PostgreSQL.
- ``api``: answers every route; uploads go to the artifact store with a build job row, edge updates to the
  journal; published versions are loaded from the store on first use into a cache bounded by memory
  (``--replica-cache-mb``, least recently used out; service.cache) and followed (the change feed); builds run
  elsewhere.
- ``builder``: claims build and rebuild jobs (a lease renewed by a heartbeat; a dead builder's job is taken
  over once its lease runs out) and publishes their versions; it answers ``/health``, ``/ready`` and
  ``/metrics`` only, and serves no version.

``api`` and ``builder`` share the state with other processes, which needs a shared metadata store (PostgreSQL):
the embedded SQLite belongs to the one process that holds the data directory's lock (service.state.datadir),
which also puts right at its start what a crash left (jobs given back, the staging folder emptied), a clean-up
that would break the work of other processes on a shared store.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["Role", "ROLES", "RoleName"]

RoleName = Literal["all", "api", "builder"]


@dataclass(frozen=True)
class Role:
    name: RoleName
    serves: bool  # loads and follows versions; answers the graph, query and update routes
    builds: bool  # claims build and rebuild jobs and runs them in worker processes
    needs_shared_database: bool  # refused on the embedded SQLite store
    loads_on_use: bool  # loads a graph's version on its first use, into a bounded cache (else all at start)


ROLES: dict[str, Role] = {
    "all": Role("all", serves=True, builds=True, needs_shared_database=False, loads_on_use=False),
    "api": Role("api", serves=True, builds=False, needs_shared_database=True, loads_on_use=True),
    "builder": Role("builder", serves=False, builds=True, needs_shared_database=True, loads_on_use=False),
}

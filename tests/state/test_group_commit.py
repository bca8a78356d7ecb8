"""Group commit of edge updates: appends that arrive while a commit is in flight are committed together, each
answered after that commit; a refused one changes nothing and refuses no other. The group committer alone, then
the journal on SQLite and on a real PostgreSQL."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from service.state import open_metadata
from service.state.errors import GraphNotFound, GraphNotReady, StorageFull, VersionConflict
from service.state.groupcommit import GroupCommit
from service.state.metadata import ChangeKind, GroupStats
from service.state.sql import SqlMetadataStore

from .conftest import wait_until
from .test_metadata import PARAMS, ready_graph

# ---- the group committer ----------------------------------------------------------------------------------


class Recorder:
    """A commit function that records its groups; the first commit waits for ``release`` (a commit in flight)."""

    def __init__(self, outcome: Callable[[str], Any]) -> None:
        self.groups: list[list[str]] = []
        self.release = threading.Event()
        self.outcome = outcome

    def __call__(self, requests: list[str]) -> Sequence[Any]:
        self.groups.append(list(requests))
        if len(self.groups) == 1:
            assert self.release.wait(30)
        return [self.outcome(request) for request in requests]


def submit_all(committer: GroupCommit[str, Any], requests: list[str]) -> tuple[dict[str, Any], list[threading.Thread]]:
    """Submit each request from a thread of its own, one after the other: each is queued (or leads) before the
    next is sent, so the queue's order is the list's."""
    answers: dict[str, Any] = {}

    def send(request: str) -> None:
        try:
            answers[request] = committer.submit(request)
        except Exception as exc:
            answers[request] = exc

    threads = []
    for i, request in enumerate(requests):
        threads.append(threading.Thread(target=send, args=(request,)))
        threads[-1].start()
        if i == 0:
            wait_until(lambda: committer.stats().in_flight == 1)
        else:
            wait_until(lambda i=i: committer.stats().queued == i)
    return answers, threads


def test_requests_arriving_during_a_commit_go_together_in_the_next() -> None:
    recorder = Recorder(lambda request: ValueError(request) if request == "refused" else request.upper())
    committer: GroupCommit[str, Any] = GroupCommit(recorder, max_group=3)
    answers, threads = submit_all(committer, ["first", "a", "refused", "b", "c", "d"])
    assert committer.stats() == GroupStats(commits=0, requests=0, largest=0, in_flight=1, queued=5)
    recorder.release.set()
    for thread in threads:
        thread.join(30)
    # The first alone (it led at once); the queued ones in arrival order, at most max_group per commit.
    assert recorder.groups == [["first"], ["a", "refused", "b"], ["c", "d"]]
    accepted = {"first": "FIRST", "a": "A", "b": "B", "c": "C", "d": "D"}
    assert {k: v for k, v in answers.items() if k != "refused"} == accepted
    assert isinstance(answers["refused"], ValueError) and answers["refused"].args == ("refused",)
    assert committer.stats() == GroupStats(commits=3, requests=6, largest=3, in_flight=0, queued=0)
    assert committer.submit("alone") == "ALONE" and recorder.groups[-1] == ["alone"]


def test_a_commit_that_fails_fails_its_group_only() -> None:
    def commit(requests: list[str]) -> list[str]:
        recorder.groups.append(list(requests))
        if len(recorder.groups) == 1:
            assert recorder.release.wait(30)
        if "boom" in requests:
            raise StorageFull("the disk is full")
        return [r.upper() for r in requests]

    recorder = Recorder(str.upper)
    committer: GroupCommit[str, Any] = GroupCommit(commit, max_group=2)
    answers, threads = submit_all(committer, ["first", "a", "boom", "b"])
    recorder.release.set()
    for thread in threads:
        thread.join(30)
    assert recorder.groups == [["first"], ["a", "boom"], ["b"]]
    assert answers["first"] == "FIRST" and answers["b"] == "B"
    assert isinstance(answers["a"], StorageFull) and answers["a"] is answers["boom"]


# ---- the journal ------------------------------------------------------------------------------------------


@contextlib.contextmanager
def commit_held(url: str, graph_id: str) -> Iterator[None]:
    """Another connection holds what an append of ``graph_id`` needs until the block ends: SQLite's write lock,
    PostgreSQL's row of the graph. An append made meanwhile stays in flight."""
    if url.startswith("sqlite:///"):
        conn = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            conn.execute("ROLLBACK")
            conn.close()
    else:
        import psycopg

        with psycopg.connect(url) as pg:
            pg.execute("SELECT 1 FROM graphs WHERE id = %s FOR UPDATE", (graph_id,))
            yield
            pg.rollback()


def test_a_group_refuses_only_its_refused_appends(store: SqlMetadataStore, store_url: str) -> None:
    for graph_id in ("aaaaaaaaaaaa", "bbbbbbbbbbbb", "cccccccccccc", "dddddddddddd"):
        ready_graph(store, graph_id)
    store.create_graph("eeeeeeeeeeee", PARAMS)  # queued: no version yet
    store.delete_graph("dddddddddddd")
    before = store.append_stats()
    appends = [  # (graph, expected version, payload); the first leads and waits, the others queue as one group
        ("aaaaaaaaaaaa", 1, "a2"),
        ("bbbbbbbbbbbb", 1, "b2"),
        ("cccccccccccc", 1, "c2"),
        ("cccccccccccc", 1, "c-late"),  # its group-mate came first: a conflict
        ("cccccccccccc", 2, "c3"),  # expects the version its group-mate makes
        ("bbbbbbbbbbbb", 7, "b-stale"),
        ("dddddddddddd", 1, "d-deleted"),
        ("eeeeeeeeeeee", 0, "e-unready"),
        ("aaaaaaaaaaaa", 1, "a-late"),  # the leader's append committed before this group
    ]
    answers: dict[str, Any] = {}

    def send(graph_id: str, expected: int, payload: str) -> None:
        try:
            answers[payload] = store.append_update(graph_id, expected, payload)
        except Exception as exc:
            answers[payload] = exc

    threads = []
    with commit_held(store_url, "aaaaaaaaaaaa"):
        for i, append in enumerate(appends):
            threads.append(threading.Thread(target=send, args=append))
            threads[-1].start()
            if i == 0:
                wait_until(lambda: store.append_stats().in_flight == 1)
            else:
                wait_until(lambda i=i: store.append_stats().queued == i)
    for thread in threads:
        thread.join(60)

    stats = store.append_stats()
    assert (stats.commits - before.commits, stats.requests - before.requests, stats.largest) == (2, 9, 8)
    assert {p: v for p, v in answers.items() if isinstance(v, int)} == {"a2": 2, "b2": 2, "c2": 2, "c3": 3}
    refusals = {p: v for p, v in answers.items() if not isinstance(v, int)}
    assert {p: type(v) for p, v in refusals.items()} == {
        "c-late": VersionConflict,
        "b-stale": VersionConflict,
        "d-deleted": GraphNotFound,
        "e-unready": GraphNotReady,
        "a-late": VersionConflict,
    }
    assert (refusals["c-late"].current, refusals["b-stale"].current, refusals["a-late"].current) == (3, 2, 2)
    # What committed is exactly the answered appends; the refused ones left no row, no change, no version.
    journal = {
        graph_id: [(row.version, row.payload) for row in store.read_updates(graph_id, 0)]
        for graph_id in ("aaaaaaaaaaaa", "bbbbbbbbbbbb", "cccccccccccc", "dddddddddddd", "eeeeeeeeeeee")
    }
    assert journal == {
        "aaaaaaaaaaaa": [(2, "a2")],
        "bbbbbbbbbbbb": [(2, "b2")],
        "cccccccccccc": [(2, "c2"), (3, "c3")],
        "dddddddddddd": [],
        "eeeeeeeeeeee": [],
    }
    heads = {g.id: g.head_version for g in store.list_graphs()}
    assert heads == {"aaaaaaaaaaaa": 2, "bbbbbbbbbbbb": 2, "cccccccccccc": 3, "eeeeeeeeeeee": 0}
    journal_changes = sorted((c.graph_id, c.version) for c in store.changes_since(0)[0] if c.kind is ChangeKind.journal)
    assert journal_changes == [("aaaaaaaaaaaa", 2), ("bbbbbbbbbbbb", 2), ("cccccccccccc", 2), ("cccccccccccc", 3)]


def test_appends_of_one_call_commit_together_each_refused_alone(store: SqlMetadataStore) -> None:
    """``append_updates``: a batch in one transaction; a refused append writes nothing and refuses no other."""
    for graph_id in ("aaaaaaaaaaaa", "bbbbbbbbbbbb", "cccccccccccc"):
        ready_graph(store, graph_id)
    store.delete_graph("cccccccccccc")
    answers = store.append_updates(
        [("bbbbbbbbbbbb", 1, "b2"), ("aaaaaaaaaaaa", 1, "a2"), ("cccccccccccc", 1, "c2"), ("dddddddddddd", 1, "d2")]
    )
    assert answers[:2] == [2, 2]
    assert isinstance(answers[2], GraphNotFound) and isinstance(answers[3], GraphNotFound)
    answers = store.append_updates([("aaaaaaaaaaaa", 1, "a-stale"), ("bbbbbbbbbbbb", 2, "b3")])
    assert isinstance(answers[0], VersionConflict) and answers[0].current == 2 and answers[1] == 3
    journal = {g: [(r.version, r.payload) for r in store.read_updates(g, 0)] for g in ("aaaaaaaaaaaa", "bbbbbbbbbbbb")}
    assert journal == {"aaaaaaaaaaaa": [(2, "a2")], "bbbbbbbbbbbb": [(2, "b2"), (3, "b3")]}


def test_many_writers_of_many_graphs(store: SqlMetadataStore) -> None:
    """16 writers, each on its graph, their appends grouped as they come: every answered append is in the
    journal, in its graph's order, without a gap."""
    graphs = [f"{i:012x}" for i in range(16)]
    for graph_id in graphs:
        ready_graph(store, graph_id)
    answered: dict[str, list[tuple[int, str]]] = {graph_id: [] for graph_id in graphs}
    before = store.append_stats()

    def writer(graph_id: str) -> None:
        head = 1
        for n in range(25):
            head = store.append_update(graph_id, head, f"{graph_id}-{n}")
            answered[graph_id].append((head, f"{graph_id}-{n}"))

    threads = [threading.Thread(target=writer, args=(graph_id,)) for graph_id in graphs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    for graph_id in graphs:
        rows = [(row.version, row.payload) for row in store.read_updates(graph_id, 0)]
        assert rows == answered[graph_id] == [(n + 2, f"{graph_id}-{n}") for n in range(25)]
    assert store.append_stats().requests - before.requests == 16 * 25


def test_postgres_sessions_wait_for_the_wal_flush(postgres_server: Any, tmp_path: Path) -> None:
    """A database configured to acknowledge commits before their WAL is flushed gets no such session here."""
    import psycopg

    name = f"t_{uuid.uuid4().hex[:12]}"
    url = postgres_server.create_database(name)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'ALTER DATABASE "{name}" SET synchronous_commit = off')
    with psycopg.connect(url) as conn:  # a new session takes the database's setting
        assert conn.execute("SHOW synchronous_commit").fetchone() == ("off",)
    store = open_metadata(url, tmp_path, pool_size=2)
    assert isinstance(store, SqlMetadataStore)
    try:
        assert store._read(lambda tx: tx.one("SHOW synchronous_commit")) == ("on",)
    finally:
        store.close()

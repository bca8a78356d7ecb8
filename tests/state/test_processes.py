"""What several processes do to the state: writers through two processes, a change seen by another process, a
writer killed (SIGKILL) while its grouped appends commit, two servers on one data directory (real processes)."""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from service.state import DataDirLock, open_metadata
from service.state.datadir import LOCK_FILE
from service.state.errors import DataDirLocked, VersionConflict
from service.state.metadata import ChangeKind, MetadataStore

from .test_metadata import ready_graph

SPAWN = multiprocessing.get_context("spawn")
REPO = Path(__file__).resolve().parents[2]
ROUNDS = 60


def _append(url: str, data_dir: str, writer: str, start: Any, results: Any) -> None:
    """Append ROUNDS updates as ``writer``, each against the head it read, retrying on conflicts."""
    store = open_metadata(url, Path(data_dir))
    answered = []
    start.wait()
    try:
        while len(answered) < ROUNDS:
            expected = store.get_graph("aaaaaaaaaaaa").head_version
            payload = json.dumps({"writer": writer, "n": len(answered)})
            try:
                answered.append((store.append_update("aaaaaaaaaaaa", expected, payload), payload))
            except VersionConflict:
                continue
    finally:
        store.close()
    results.put(answered)


def test_two_processes_append_one_journal(store: MetadataStore, store_url: str, tmp_path: Path) -> None:
    ready_graph(store, "aaaaaaaaaaaa")
    start = SPAWN.Event()
    results = SPAWN.Queue()
    workers = [
        SPAWN.Process(target=_append, args=(store_url, str(tmp_path), name, start, results)) for name in ("p1", "p2")
    ]
    for worker in workers:
        worker.start()
    start.set()
    answered = [item for _ in workers for item in results.get(timeout=120)]
    for worker in workers:
        worker.join(60)
        assert worker.exitcode == 0
    rows = store.read_updates("aaaaaaaaaaaa", 0)
    # Exactly one winner per version: the rows are the answered appends, versions 2.. with no gap.
    assert sorted(answered) == [(row.version, row.payload) for row in rows]
    assert [row.version for row in rows] == list(range(2, 2 * ROUNDS + 2))


def _append_later(url: str, data_dir: str, go: Any) -> None:
    store = open_metadata(url, Path(data_dir))
    go.wait()
    store.append_update("aaaaaaaaaaaa", 1, "{}")
    store.close()


def test_subscriber_sees_a_commit_of_another_process(store: MetadataStore, store_url: str, tmp_path: Path) -> None:
    """PostgreSQL: LISTEN/NOTIFY; SQLite: polling (the other process's commits wake nothing here)."""
    ready_graph(store, "aaaaaaaaaaaa")
    go = SPAWN.Event()
    writer = SPAWN.Process(target=_append_later, args=(store_url, str(tmp_path), go))
    writer.start()
    with store.subscribe(poll_s=0.1) as subscription:
        go.set()
        seen: list[Any] = []
        while not any(c.kind is ChangeKind.journal for c in seen):
            changes = subscription.wait(30)
            assert changes, "the other process's update was not seen"
            seen.extend(changes)
    writer.join(60)
    assert [(c.graph_id, c.version) for c in seen if c.kind is ChangeKind.journal] == [("aaaaaaaaaaaa", 2)]


def append_until_killed(url: str, data_dir: str, graphs: list[str]) -> None:
    """A writer per graph, appending without end; each answered append is reported on stdout as one line
    (graph, version, payload, the largest group committed so far), written after ``append_update`` returned."""
    store = open_metadata(url, Path(data_dir))

    def write(graph_id: str) -> None:
        head = store.get_graph(graph_id).head_version
        while True:
            payload = os.urandom(8).hex()
            head = store.append_update(graph_id, head, payload)
            line = f"{graph_id} {head} {payload} {store.append_stats().largest}\n"
            os.write(1, line.encode())  # one write, under PIPE_BUF: whole or not at all

    for graph_id in graphs:
        threading.Thread(target=write, args=(graph_id,), daemon=True).start()
    signal.pause()


def _killed_mid_group(url: str, data_dir: Path, graphs: list[str]) -> list[tuple[str, int, str]]:
    """Start a writer process, let it append until a commit carried several appends and a random moment more,
    SIGKILL it, and return every append it reported answered."""
    code = (
        "import sys; from tests.state.test_processes import append_until_killed as a; a(*sys.argv[1:3], sys.argv[3:])"
    )
    sessions_before = _sessions(url)
    child = subprocess.Popen(
        [sys.executable, "-c", code, url, str(data_dir), *graphs], stdout=subprocess.PIPE, cwd=REPO
    )
    assert child.stdout is not None
    received = b""
    selector = selectors.DefaultSelector()
    selector.register(child.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + 120
    try:
        grouped = False
        while not grouped:
            assert time.monotonic() < deadline, "the writer never committed a group of several appends"
            assert child.poll() is None, "the writer exited"
            if selector.select(timeout=1):
                received += os.read(child.stdout.fileno(), 1 << 16)
                grouped = any(line.split()[3] != b"1" for line in received.splitlines()[-50:] if len(line.split()) == 4)
        time.sleep(random.uniform(0, 0.2))
    finally:
        child.kill()
        child.wait(30)
    received += child.stdout.read()  # what it reported before it died
    child.stdout.close()
    # PostgreSQL finishes a COMMIT that the killed writer had sent: its sessions are gone once nothing more lands.
    deadline = time.monotonic() + 60
    while _sessions(url) - sessions_before:
        assert time.monotonic() < deadline, "the killed writer's PostgreSQL sessions did not end"
        time.sleep(0.05)
    acknowledged = []
    for line in received.decode().splitlines():
        graph_id, version, payload, _ = line.split()
        acknowledged.append((graph_id, int(version), payload))
    return acknowledged


def _sessions(url: str) -> set[int]:
    """The server processes of the database's other sessions (PostgreSQL); none for SQLite."""
    if not url.startswith("postgresql"):
        return set()
    import psycopg

    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchall()
    return {int(pid) for (pid,) in rows}


def test_kill_mid_group_loses_only_unanswered_appends(store: MetadataStore, store_url: str, tmp_path: Path) -> None:
    """SIGKILL of a process whose appends commit in groups, three times: every answered append survives, and
    each graph's journal is whole (versions without a gap up to its head, a change row each): a group
    committed whole or not at all."""
    graphs = [f"{i:012x}" for i in range(8)]
    for graph_id in graphs:
        ready_graph(store, graph_id)
    acknowledged: list[tuple[str, int, str]] = []
    for _round in range(3):
        acknowledged += _killed_mid_group(store_url, tmp_path, graphs)
        journal = {(row.graph_id, row.version, row.payload) for g in graphs for row in store.read_updates(g, 0)}
        assert set(acknowledged) <= journal
        changes = {(c.graph_id, c.version) for c in store.changes_since(0)[0] if c.kind is ChangeKind.journal}
        assert changes == {(graph_id, version) for graph_id, version, _ in journal}
        for graph in store.list_graphs():
            versions = sorted(version for graph_id, version, _ in journal if graph_id == graph.id)
            assert versions == list(range(2, graph.head_version + 1))
    assert len(acknowledged) > 3 * len(graphs)


def _hold_lock(data_dir: str, port: int, ready: Any) -> None:
    DataDirLock(Path(data_dir), port=port).acquire()
    ready.set()
    signal.pause()


def test_second_server_on_a_data_directory_is_refused_until_the_first_dies(tmp_path: Path) -> None:
    ready = SPAWN.Event()
    owner = SPAWN.Process(target=_hold_lock, args=(str(tmp_path), 8123, ready))
    owner.start()
    try:
        assert ready.wait(60)
        with pytest.raises(DataDirLocked) as refused:
            DataDirLock(tmp_path, port=8124).acquire()
        message = str(refused.value)
        assert f"pid {owner.pid} on host {socket.gethostname()}" in message and "port 8123" in message
        assert refused.value.owner["pid"] == owner.pid
    finally:
        assert owner.pid is not None
        os.kill(owner.pid, signal.SIGKILL)  # a crash: its lock file stays, naming a dead process
        owner.join(30)
    assert json.loads((tmp_path / LOCK_FILE).read_text())["pid"] == owner.pid
    with DataDirLock(tmp_path, port=8124) as lock:  # a stale lock is taken over
        record = json.loads((tmp_path / LOCK_FILE).read_text())
        assert (record["pid"], record["port"]) == (os.getpid(), 8124)
        with pytest.raises(DataDirLocked):  # held: even another opening in this process is refused
            DataDirLock(tmp_path).acquire()
        assert lock.held
    assert not (tmp_path / LOCK_FILE).exists()
    DataDirLock(tmp_path).acquire().release()

"""What several processes do to the state: writers through two processes, a change seen by another process, two
servers on one data directory (real processes, spawned)."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import socket
from pathlib import Path
from typing import Any

import pytest

from service.state import DataDirLock, open_metadata
from service.state.datadir import LOCK_FILE
from service.state.errors import DataDirLocked, VersionConflict
from service.state.metadata import ChangeKind, MetadataStore

from .test_metadata import ready_graph

SPAWN = multiprocessing.get_context("spawn")
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

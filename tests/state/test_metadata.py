"""The metadata store's behaviour, the same suite on SQLite and on a real PostgreSQL (the ``store`` fixture)."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from service.state import open_metadata
from service.state.errors import (
    GraphExists,
    GraphNotFound,
    GraphNotReady,
    InvalidName,
    LeaseLost,
    NameTaken,
    SchemaTooNew,
    VersionConflict,
    VersionStateError,
)
from service.state.metadata import ChangeKind, GraphStatus, JobKind, JobState, MetadataStore, VersionStatus
from service.state.schema import SCHEMA_VERSION
from service.state.sql import SqlMetadataStore

from .conftest import TEST_BACKOFF_S, wait_until

PARAMS = {"format": "edgelist", "dims": 3, "seed": 1, "backend": "cpu"}


def ready_graph(store: MetadataStore, graph_id: str, name: str | None = None, version: int = 1) -> None:
    """A graph whose first build is published at ``version``."""
    store.create_graph(graph_id, PARAMS, name=name)
    stage(store, graph_id, version)
    store.publish_version(graph_id, version, stats={"nodes": 4})


def stage(store: MetadataStore, graph_id: str, version: int, base: int | None = None) -> None:
    store.stage_version(
        graph_id,
        version,
        artifact_key=f"graphs/{graph_id}/v{version}",
        checksum=f"sha256:{version:064x}",
        size_bytes=100 + version,
        base_version=base,
    )


def test_satisfies_the_protocol(store: SqlMetadataStore) -> None:
    assert isinstance(store, MetadataStore)
    assert store.schema_version() == SCHEMA_VERSION


# ---- graphs and names ----------------------------------------------------------------------------------------


def test_graphs_by_id_and_by_name(store: MetadataStore) -> None:
    created = store.create_graph("aaaaaaaaaaaa", PARAMS, name="deps", upload_bytes=12, upload_key="uploads/x")
    assert (created.name, created.status, created.params, created.upload_bytes) == (
        "deps",
        GraphStatus.queued,
        PARAMS,
        12,
    )
    assert store.get_graph("deps") == store.get_graph("aaaaaaaaaaaa") == created
    unnamed = store.create_graph("bbbbbbbbbbbb", PARAMS)
    assert unnamed.name == "bbbbbbbbbbbb"  # the name defaults to the id
    assert [g.id for g in store.list_graphs()] == ["aaaaaaaaaaaa", "bbbbbbbbbbbb"]
    with pytest.raises(NameTaken):
        store.create_graph("cccccccccccc", PARAMS, name="deps")
    with pytest.raises(GraphExists):
        store.create_graph("aaaaaaaaaaaa", PARAMS, name="other")
    with pytest.raises(NameTaken):  # another graph's id: lookups would be ambiguous
        store.create_graph("cccccccccccc", PARAMS, name="bbbbbbbbbbbb")
    store.create_graph("dddddddddddd", PARAMS, name="eeeeeeeeeeee")  # a name like an id, no graph's id
    with pytest.raises(GraphExists):  # an id that is another graph's name: the service draws another
        store.create_graph("eeeeeeeeeeee", PARAMS)
    with pytest.raises(InvalidName):
        store.create_graph("cccccccccccc", PARAMS, name="has space")
    with pytest.raises(GraphNotFound):
        store.get_graph("nothing")
    # The refusals changed nothing.
    assert [g.id for g in store.list_graphs()] == ["aaaaaaaaaaaa", "bbbbbbbbbbbb", "dddddddddddd"]


def test_delete_frees_the_name_and_orders_later_writes(store: MetadataStore) -> None:
    ready_graph(store, "aaaaaaaaaaaa", "deps")
    store.append_update("aaaaaaaaaaaa", 1, "{}")
    job = store.enqueue_job("aaaaaaaaaaaa", JobKind.rebuild, {})
    claimed = store.claim_job("w", 30)
    assert claimed is not None and claimed.id == job.id
    deleted = store.delete_graph("deps")
    assert deleted.id == "aaaaaaaaaaaa"
    for ref in ("deps", "aaaaaaaaaaaa"):
        with pytest.raises(GraphNotFound):
            store.get_graph(ref)
    with pytest.raises(GraphNotFound):
        store.delete_graph("aaaaaaaaaaaa")
    with pytest.raises(GraphNotFound):
        store.append_update("aaaaaaaaaaaa", 2, "{}")
    with pytest.raises(GraphNotFound):
        store.set_status("aaaaaaaaaaaa", GraphStatus.building)
    with pytest.raises(LeaseLost):  # its rebuild is cancelled: the builder stops at its next heartbeat
        store.heartbeat_job(claimed, 30)
    assert store.get_job(job.id).state is JobState.cancelled
    assert store.read_updates("aaaaaaaaaaaa", 0) == []
    assert {v.status for v in store.list_versions("aaaaaaaaaaaa")} == {VersionStatus.retired}
    assert store.create_graph("bbbbbbbbbbbb", PARAMS, name="deps").name == "deps"


def test_update_racing_delete_sees_not_found_never_a_half_state(store: MetadataStore) -> None:
    for round_ in range(20):
        graph_id = f"{round_:012x}"
        ready_graph(store, graph_id)
        outcomes: list[str] = []
        barrier = threading.Barrier(2)

        def update(
            graph_id: str = graph_id, barrier: threading.Barrier = barrier, outcomes: list[str] = outcomes
        ) -> None:
            barrier.wait()
            version = 1
            while True:
                try:
                    version = store.append_update(graph_id, version, "{}")
                except GraphNotFound:
                    outcomes.append("gone")
                    return

        thread = threading.Thread(target=update)
        thread.start()
        barrier.wait()
        store.delete_graph(graph_id)
        thread.join(30)
        assert outcomes == ["gone"]
        assert store.read_updates(graph_id, 0) == []


def test_replace_swaps_the_name_only_when_ready(store: MetadataStore) -> None:
    ready_graph(store, "aaaaaaaaaaaa", "deps")
    replacement = store.create_graph("bbbbbbbbbbbb", PARAMS, name="deps", replace=True)
    assert (replacement.name, replacement.pending_name) == ("bbbbbbbbbbbb", "deps")
    assert store.get_graph("deps").id == "aaaaaaaaaaaa"  # queries answer the old one meanwhile

    # A failed build leaves the old one in place; the next replacement supersedes the failed one.
    store.set_status("bbbbbbbbbbbb", GraphStatus.failed, error={"type": "GraphFormatError", "message": "bad"})
    assert store.get_graph("deps").id == "aaaaaaaaaaaa"
    store.create_graph("cccccccccccc", PARAMS, name="deps", replace=True)
    with pytest.raises(GraphNotFound):
        store.get_graph("bbbbbbbbbbbb")

    stage(store, "cccccccccccc", 1)
    swapped = store.publish_version("cccccccccccc", 1, stats={"nodes": 9})
    assert (swapped.id, swapped.name, swapped.pending_name, swapped.status) == ("cccccccccccc", "deps", None, "ready")
    assert store.get_graph("deps").id == "cccccccccccc"
    with pytest.raises(GraphNotFound):
        store.get_graph("aaaaaaaaaaaa")  # retired with the swap
    assert [v.status for v in store.list_versions("aaaaaaaaaaaa")] == [VersionStatus.retired]

    # With no graph of that name, a replacement takes it at once.
    fresh = store.create_graph("dddddddddddd", PARAMS, name="fresh", replace=True)
    assert (fresh.name, fresh.pending_name) == ("fresh", None)


def test_delete_takes_a_pending_replacement_with_it(store: MetadataStore) -> None:
    ready_graph(store, "aaaaaaaaaaaa", "deps")
    store.create_graph("bbbbbbbbbbbb", PARAMS, name="deps", replace=True)
    job = store.enqueue_job("bbbbbbbbbbbb", JobKind.build, {})
    store.delete_graph("deps")
    with pytest.raises(GraphNotFound):
        store.get_graph("bbbbbbbbbbbb")
    assert store.get_job(job.id).state is JobState.cancelled
    assert store.list_graphs() == []


# ---- versions -------------------------------------------------------------------------------------------


def test_versions_publish_retire_and_collect(store: MetadataStore) -> None:
    store.create_graph("aaaaaaaaaaaa", PARAMS)
    with pytest.raises(VersionStateError):
        store.publish_version("aaaaaaaaaaaa", 1)  # never staged
    with pytest.raises(GraphNotReady):
        store.append_update("aaaaaaaaaaaa", 0, "{}")  # nothing published yet
    stage(store, "aaaaaaaaaaaa", 1)
    assert store.get_version("aaaaaaaaaaaa", 1).status is VersionStatus.staged
    assert store.get_graph("aaaaaaaaaaaa").published_version is None  # staged is not served
    graph = store.publish_version("aaaaaaaaaaaa", 1, stats={"nodes": 4})
    assert (graph.status, graph.published_version, graph.head_version, graph.stats) == ("ready", 1, 1, {"nodes": 4})
    with pytest.raises(VersionStateError):  # a published version is never written again
        stage(store, "aaaaaaaaaaaa", 1)

    for expected in range(1, 6):
        assert store.append_update("aaaaaaaaaaaa", expected, json.dumps({"n": expected})) == expected + 1
    stage(store, "aaaaaaaaaaaa", 4, base=1)  # a rebuild folding in updates up to version 4
    graph = store.publish_version("aaaaaaaaaaaa", 4)
    assert (graph.published_version, graph.head_version, graph.pending_updates) == (4, 6, 2)
    assert [e.version for e in store.read_updates("aaaaaaaaaaaa", 0)] == [5, 6]  # folded rows dropped
    versions = {v.version: v for v in store.list_versions("aaaaaaaaaaaa")}
    assert versions[1].status is VersionStatus.retired and versions[1].retired_at is not None
    assert versions[4].status is VersionStatus.published and versions[4].base_version == 1
    stage(store, "aaaaaaaaaaaa", 3)
    with pytest.raises(VersionStateError):  # older than the one served
        store.publish_version("aaaaaaaaaaaa", 3)

    assert store.garbage(3600) == []  # retired too recently
    collectable = {(1, VersionStatus.retired), (3, VersionStatus.staged)}
    # Past the grace of 0 s once the database's clock (millisecond steps on SQLite) has moved on.
    wait_until(lambda: {(v.version, v.status) for v in store.garbage(0)} == collectable)
    for version, _ in collectable:
        store.forget_version("aaaaaaaaaaaa", version)
    store.forget_version("aaaaaaaaaaaa", 4)  # published: never forgotten
    assert [v.version for v in store.list_versions("aaaaaaaaaaaa")] == [4]

    store.delete_graph("aaaaaaaaaaaa")
    assert store.forget_deleted_graphs(0) == []  # its version must go first
    for version in wait_until(lambda: store.garbage(0)):
        store.forget_version(version.graph_id, version.version)
    assert wait_until(lambda: store.forget_deleted_graphs(0)) == ["aaaaaaaaaaaa"]


# ---- the journal ----------------------------------------------------------------------------------------


def test_journal_append_is_conditional(store: MetadataStore) -> None:
    ready_graph(store, "aaaaaaaaaaaa")
    assert store.append_update("aaaaaaaaaaaa", 1, '{"add": [["a", "b"]]}') == 2
    with pytest.raises(VersionConflict) as conflict:
        store.append_update("aaaaaaaaaaaa", 1, '{"add": [["x", "y"]]}')
    assert (conflict.value.expected, conflict.value.current) == (1, 2)
    with pytest.raises(VersionConflict):
        store.append_update("aaaaaaaaaaaa", 5, "{}")
    assert store.append_update("aaaaaaaaaaaa", 2, '{"remove": [["a", "b"]]}') == 3
    rows = store.read_updates("aaaaaaaaaaaa", 0)
    assert [(r.version, r.decoded()) for r in rows] == [(2, {"add": [["a", "b"]]}), (3, {"remove": [["a", "b"]]})]
    assert [r.version for r in store.read_updates("aaaaaaaaaaaa", 2)] == [3]
    assert [r.version for r in store.read_updates("aaaaaaaaaaaa", 0, through=2)] == [2]
    assert store.drop_updates_through("aaaaaaaaaaaa", 2) == 1
    assert [r.version for r in store.read_updates("aaaaaaaaaaaa", 0)] == [3]
    assert store.get_graph("aaaaaaaaaaaa").head_version == 3


def test_concurrent_appenders_serialize(store: MetadataStore) -> None:
    """Threads racing on one graph: every version has exactly one row, the one whose writer was answered."""
    ready_graph(store, "aaaaaaaaaaaa")
    answered: list[tuple[int, str]] = []
    lock = threading.Lock()

    def writer(name: str) -> None:
        for attempt in range(40):
            payload = json.dumps({"writer": name, "attempt": attempt})
            expected = store.get_graph("aaaaaaaaaaaa").head_version
            try:
                version = store.append_update("aaaaaaaaaaaa", expected, payload)
            except VersionConflict:
                continue
            with lock:
                answered.append((version, payload))

    threads = [threading.Thread(target=writer, args=(f"w{i}",)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    rows = store.read_updates("aaaaaaaaaaaa", 0)
    assert sorted(answered) == [(r.version, r.payload) for r in rows]
    assert [r.version for r in rows] == list(range(2, len(rows) + 2))
    assert store.get_graph("aaaaaaaaaaaa").head_version == len(rows) + 1
    assert len({json.loads(p)["writer"] for _, p in answered}) > 1


# ---- jobs -----------------------------------------------------------------------------------------------


def test_jobs_claim_heartbeat_complete(store: MetadataStore) -> None:
    ready_graph(store, "aaaaaaaaaaaa")
    job = store.enqueue_job("aaaaaaaaaaaa", JobKind.rebuild, {"through": 1}, through_version=1)
    assert store.enqueue_job("aaaaaaaaaaaa", JobKind.rebuild, {"other": True}).id == job.id  # one at a time
    assert store.claim_job("w1", 30, kinds=[JobKind.build]) is None
    claimed = store.claim_job("w1", 30)
    assert claimed is not None
    assert (claimed.id, claimed.state, claimed.attempts, claimed.lease_owner) == (job.id, "running", 1, "w1")
    assert claimed.payload == {"through": 1} and claimed.through_version == 1
    assert store.claim_job("w2", 30) is None  # leased
    extended = store.heartbeat_job(claimed, 60)
    assert extended.lease_expires_at is not None and claimed.lease_expires_at is not None
    assert extended.lease_expires_at > claimed.lease_expires_at
    done = store.complete_job(extended)
    assert done.state is JobState.done and done.lease_owner is None
    with pytest.raises(LeaseLost):
        store.complete_job(extended)
    assert store.enqueue_job("aaaaaaaaaaaa", JobKind.rebuild, {}).id != job.id  # the next rebuild


def test_a_job_queued_with_a_delay_is_claimed_once_due(store: MetadataStore) -> None:
    ready_graph(store, "aaaaaaaaaaaa")
    before = time.time()
    job = store.enqueue_job("aaaaaaaaaaaa", JobKind.rebuild, {}, delay_s=0.5)
    assert 0.3 < job.next_attempt_at - before < 1.5
    assert store.claim_job("w", 30) is None  # not before its time
    claimed = wait_until(lambda: store.claim_job("w", 30))
    assert claimed.id == job.id and time.time() >= job.next_attempt_at


def test_expired_lease_is_taken_over_and_fenced(store: MetadataStore) -> None:
    ready_graph(store, "aaaaaaaaaaaa")
    store.enqueue_job("aaaaaaaaaaaa", JobKind.rebuild, {}, max_attempts=2)
    first = store.claim_job("w1", 0.05)
    assert first is not None
    second = wait_until(lambda: store.claim_job("w2", 30))  # w1 stopped heartbeating: w2 takes it over
    assert (second.id, second.lease_owner, second.attempts) == (first.id, "w2", 2)
    assert second.lease_token != first.lease_token
    for stale in (lambda: store.heartbeat_job(first, 30), lambda: store.complete_job(first)):
        with pytest.raises(LeaseLost):
            stale()
    with pytest.raises(LeaseLost):
        store.fail_job(first, {"type": "X"})
    stage(store, "aaaaaaaaaaaa", 2)
    with pytest.raises(LeaseLost):  # a builder that lost its lease publishes nothing
        store.publish_version("aaaaaaaaaaaa", 2, job=first)
    assert store.get_graph("aaaaaaaaaaaa").published_version == 1
    graph = store.publish_version("aaaaaaaaaaaa", 2, job=second)
    assert graph.published_version == 2 and store.get_job(second.id).state is JobState.done


def test_lease_expiring_after_the_last_attempt_fails_the_build(store: MetadataStore) -> None:
    store.create_graph("aaaaaaaaaaaa", PARAMS)
    job = store.enqueue_job("aaaaaaaaaaaa", JobKind.build, {}, max_attempts=1)
    assert store.claim_job("w1", 0.05) is not None
    wait_until(lambda: store.claim_job("w2", 30) is None and store.get_job(job.id).state is JobState.failed)
    assert store.get_job(job.id).error["type"] == "WorkerLost"  # type: ignore[index]
    graph = store.get_graph("aaaaaaaaaaaa")
    assert graph.status is GraphStatus.failed and graph.error["type"] == "WorkerLost"  # type: ignore[index]


def test_failed_job_retries_with_backoff(store: MetadataStore) -> None:
    store.create_graph("aaaaaaaaaaaa", PARAMS)
    job = store.enqueue_job("aaaaaaaaaaaa", JobKind.build, {}, max_attempts=3)
    delays = []
    for attempt in (1, 2):
        claimed = wait_until(lambda: store.claim_job("w", 30))
        assert claimed.attempts == attempt
        before = time.time()
        retried = store.fail_job(claimed, {"type": "DiskFull", "message": "full"})
        assert retried.state is JobState.queued and retried.error == {"type": "DiskFull", "message": "full"}
        delays.append(retried.next_attempt_at - before)
        assert store.claim_job("w", 30) is None  # not before its time
    base, _cap = TEST_BACKOFF_S
    assert base * 0.5 < delays[0] < base * 1.5 and 2 * base * 0.5 < delays[1] < 2 * base * 1.5  # doubled
    last = wait_until(lambda: store.claim_job("w", 30))
    failed = store.fail_job(last, {"type": "DiskFull", "message": "full"})
    assert failed.state is JobState.failed and failed.attempts == 3
    assert store.get_graph("aaaaaaaaaaaa").status is GraphStatus.failed
    assert store.list_jobs("aaaaaaaaaaaa", [JobState.failed]) == [store.get_job(job.id)]


def test_claims_by_concurrent_workers_never_share_a_job(store: MetadataStore) -> None:
    for i in range(12):
        store.create_graph(f"{i:012x}", PARAMS)
        store.enqueue_job(f"{i:012x}", JobKind.build, {})
    claimed: list[int] = []
    lock = threading.Lock()

    def worker(name: str) -> None:
        while (job := store.claim_job(name, 60)) is not None:
            with lock:
                claimed.append(job.id)

    threads = [threading.Thread(target=worker, args=(f"w{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(claimed) == sorted(j.id for j in store.list_jobs())
    assert max(Counter(claimed).values()) == 1


def test_a_graph_and_its_build_job_are_one_transaction(store: MetadataStore) -> None:
    graph = store.create_graph(
        "aaaaaaaaaaaa", PARAMS, name="deps", upload_key="aaaaaaaaaaaa", build={"r": 1}, build_memory_bytes=77
    )
    [job] = store.list_jobs("aaaaaaaaaaaa")
    assert (graph.status, job.kind, job.state, job.payload, job.memory_bytes) == (
        "queued",
        "build",
        "queued",
        {"r": 1},
        77,
    )
    with pytest.raises(NameTaken):  # refused: neither the graph nor a job
        store.create_graph("bbbbbbbbbbbb", PARAMS, name="deps", build={})
    with pytest.raises(GraphNotFound):
        store.get_graph("bbbbbbbbbbbb")
    assert [j.graph_id for j in store.list_jobs()] == ["aaaaaaaaaaaa"]


def test_claims_take_only_jobs_that_fit(store: MetadataStore) -> None:
    for graph_id, memory in (("aaaaaaaaaaaa", 500), ("bbbbbbbbbbbb", 50)):
        store.create_graph(graph_id, PARAMS, build={}, build_memory_bytes=memory)
    assert store.claim_job("w", 30, max_memory_bytes=10) is None
    assert store.claim_job("w", 30, min_memory_bytes=501) is None
    small = store.claim_job("w", 30, max_memory_bytes=100)
    assert small is not None and small.graph_id == "bbbbbbbbbbbb"  # the older one does not fit: passed over
    large = store.claim_job("w", 30, min_memory_bytes=100)
    assert large is not None and large.graph_id == "aaaaaaaaaaaa" and large.memory_bytes == 500


def test_released_jobs_are_due_at_once_their_attempt_not_counted(store: MetadataStore) -> None:
    for graph_id in ("aaaaaaaaaaaa", "bbbbbbbbbbbb"):
        store.create_graph(graph_id, PARAMS, build={})
    mine, theirs = store.claim_job("me", 300), store.claim_job("them", 300)
    assert mine is not None and theirs is not None and mine.attempts == 1
    assert store.release_jobs("me") == 1
    again = store.claim_job("next", 300)
    assert again is not None and (again.id, again.attempts) == (mine.id, 1)  # not the one still leased
    assert again.lease_token != mine.lease_token
    with pytest.raises(LeaseLost):
        store.complete_job(mine)
    assert store.release_jobs() == 2  # a start of the embedded store: every running job
    assert {j.state for j in store.list_jobs()} == {JobState.queued}
    done = store.complete_job(store.claim_job("w", 30))  # type: ignore[arg-type]
    assert store.prune_jobs(3600) == 0
    time.sleep(0.05)
    assert store.prune_jobs(0.01) == 1 and [j.id for j in store.list_jobs()] != [done.id]


def test_a_deferred_job_waits_its_delay_and_keeps_its_attempts(store: MetadataStore) -> None:
    """A build put off because the artifact store is away: any number of times, never failed for it."""
    store.create_graph("aaaaaaaaaaaa", PARAMS)
    store.enqueue_job("aaaaaaaaaaaa", JobKind.build, {}, max_attempts=1)
    away = {"type": "StoreUnavailable", "message": "the artifact store cannot be reached now"}
    for _ in range(3):
        claimed = wait_until(lambda: store.claim_job("w", 30))
        assert claimed.attempts == 1
        before = time.time()
        deferred = store.defer_job(claimed, away, 0.2)
        assert (deferred.state, deferred.attempts, deferred.error) == (JobState.queued, 0, away)
        assert 0.1 < deferred.next_attempt_at - before < 0.3
        assert store.claim_job("w", 30) is None  # not before its time
        with pytest.raises(LeaseLost):
            store.defer_job(claimed, away, 0.2)  # given back already
    claimed = wait_until(lambda: store.claim_job("w", 30))
    by_choice = store.defer_job(claimed, None, 0.01)  # put off with no failure of its own: the last error kept
    assert (by_choice.state, by_choice.attempts, by_choice.error) == (JobState.queued, 0, away)
    done = store.complete_job(wait_until(lambda: store.claim_job("w", 30)))
    assert (done.state, done.attempts) == (JobState.done, 1)
    assert store.get_graph("aaaaaaaaaaaa").status is not GraphStatus.failed


def test_journal_pages(store: MetadataStore) -> None:
    ready_graph(store, "aaaaaaaaaaaa")
    for version in range(1, 8):
        store.append_update("aaaaaaaaaaaa", version, json.dumps({"n": version}))
    assert [e.version for e in store.read_updates("aaaaaaaaaaaa", 1, limit=3)] == [2, 3, 4]
    assert [e.version for e in store.read_updates("aaaaaaaaaaaa", 4, through=6, limit=5)] == [5, 6]
    assert [(e.version, e.decoded()["n"]) for e in store.read_updates("aaaaaaaaaaaa", 6)] == [(7, 6), (8, 7)]


def test_journal_times_are_the_rows_past_the_published_version(store: MetadataStore) -> None:
    """What a rebuild's wait is decided from, as any server sharing the store reads it: the times of the oldest,
    the newest and the one-before-newest rows its published version lacks, on the store's clock."""
    ready_graph(store, "aaaaaaaaaaaa")
    before = store.journal_times("aaaaaaaaaaaa")
    assert (before.pending, before.first_at, before.last_at, before.previous_at) == (0, None, None, None)
    assert before.published_at is not None and before.published_at <= before.now
    for version in range(1, 5):
        store.append_update("aaaaaaaaaaaa", version, json.dumps({"n": version}))
    times = store.journal_times("aaaaaaaaaaaa")
    rows = store.read_updates("aaaaaaaaaaaa", 0)
    assert times.pending == 4 and [r.version for r in rows] == [2, 3, 4, 5]
    assert (times.first_at, times.previous_at, times.last_at) == (
        rows[0].created_at,
        rows[2].created_at,
        rows[3].created_at,
    )
    assert times.first_at is not None and times.previous_at is not None and times.last_at is not None
    assert before.now <= times.first_at <= times.previous_at <= times.last_at <= times.now
    assert abs(times.now - time.time()) < 60, "seconds since the epoch"
    stage(store, "aaaaaaaaaaaa", 4, base=1)
    store.publish_version("aaaaaaaaaaaa", 4)  # folds versions 2 to 4 in
    folded = store.journal_times("aaaaaaaaaaaa")
    assert (folded.pending, folded.first_at, folded.last_at, folded.previous_at) == (
        1,
        rows[3].created_at,
        rows[3].created_at,
        None,
    )
    assert folded.published_at is not None and folded.published_at >= times.last_at
    store.delete_graph("aaaaaaaaaaaa")
    with pytest.raises(GraphNotFound):
        store.journal_times("aaaaaaaaaaaa")


# ---- servers, changes, settings, migrations ---------------------------------------------------------------


def test_servers_live_while_they_heartbeat(store: MetadataStore) -> None:
    store.register_server("s1", role="api", host="h1", pid=10, port=8000, ttl_s=30)
    store.register_server("s2", role="builder", host="h2", pid=11, port=None, ttl_s=0.05)
    assert store.heartbeat_server("s1", 30)
    wait_until(lambda: [s.id for s in store.live_servers()] == ["s1"])
    assert store.heartbeat_server("s2", 30)  # still registered: alive again
    assert {s.id for s in store.live_servers()} == {"s1", "s2"}
    store.deregister_server("s1")
    assert not store.heartbeat_server("s1", 30)
    assert [(s.id, s.role, s.host, s.pid) for s in store.live_servers()] == [("s2", "builder", "h2", 11)]


def test_subscription_sees_changes_in_order_per_graph(store: MetadataStore) -> None:
    with store.subscribe(poll_s=0.2) as subscription:
        ready_graph(store, "aaaaaaaaaaaa")
        for version in range(1, 4):
            store.append_update("aaaaaaaaaaaa", version, "{}")
        seen: list[tuple[ChangeKind, int | None]] = []
        while len(seen) < 5:
            changes = subscription.wait(10)
            assert changes, "no change arrived"
            seen.extend((c.kind, c.version) for c in changes if c.graph_id == "aaaaaaaaaaaa")
        assert seen == [
            (ChangeKind.graph, None),
            (ChangeKind.version, 1),
            (ChangeKind.journal, 2),
            (ChangeKind.journal, 3),
            (ChangeKind.journal, 4),
        ]
        assert subscription.wait(0.05) == []
    assert store.prune_changes(0) >= 5
    assert store.changes_since(0)[0] == []


def test_meta_and_migrations_are_idempotent(store: SqlMetadataStore, store_url: str, tmp_path: Path) -> None:
    store.set_meta("k", "1")
    store.set_meta("k", "2")
    assert store.get_meta("k") == "2" and store.get_meta("missing") is None
    again = open_metadata(store_url, tmp_path)  # a second opening applies nothing
    try:
        assert again.get_meta("k") == "2"
    finally:
        again.close()
    store._write(lambda tx: tx.run("UPDATE schema_version SET version = ?", (SCHEMA_VERSION + 1,)))
    with pytest.raises(SchemaTooNew):
        open_metadata(store_url, tmp_path)


def test_a_database_of_schema_1_is_migrated(store: SqlMetadataStore, store_url: str, tmp_path: Path) -> None:
    store.create_graph("aaaaaaaaaaaa", PARAMS, build={"old": True})

    def downgrade(tx: Any) -> None:  # as release 1 left it: no memory_bytes on jobs
        tx.run("ALTER TABLE jobs DROP COLUMN memory_bytes")
        tx.run("UPDATE schema_version SET version = 1")

    store._write(downgrade)
    store.close()
    migrated = open_metadata(store_url, tmp_path)
    try:
        assert isinstance(migrated, SqlMetadataStore) and migrated.schema_version() == SCHEMA_VERSION
        [job] = migrated.list_jobs()
        assert (job.payload, job.memory_bytes) == ({"old": True}, 0)
    finally:
        migrated.close()

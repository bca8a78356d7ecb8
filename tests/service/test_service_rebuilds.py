"""When a graph's journal is folded into new labels: at once after a lone update; under a stream of updates once it
pauses, at the latest after the longest wait or at the most updates pending (service.registry.rebuild_wait), as the
metadata store's journal tells it, so that every server and builder sharing the store decides alike. Times are
given (``rebuild_wait``'s ``now``, ``rebuild_delay``'s), never waited for; each test runs on SQLite and on a real
PostgreSQL."""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from grail_core import ReachabilityIndex
from grail_core.version import FORECAST_MARGIN
from service import registry as registry_module
from service.registry import GraphRegistry, rebuild_wait
from service.state import open_artifacts, open_metadata
from service.state.errors import StorageFull
from service.state.metadata import JobKind, JobState, JournalTimes
from service.warmup import CoreGate

from .conftest import publish_in_process, wait_until

GRAPH_ID = "aaaaaaaaaaaa"
HOUR = 3600.0


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The metadata store's URL: a SQLite file, or a fresh database on the session's throwaway PostgreSQL."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'grail.db'}"
    server: Any = request.getfixturevalue("postgres_server")
    return str(server.create_database(f"rebuilds_{uuid.uuid4().hex[:12]}"))


@pytest.fixture
def registry(database_url: str, tmp_path: Path) -> Iterator[GraphRegistry]:
    """A registry serving one published graph, a -> b -> c."""
    metadata, artifacts = open_metadata(database_url, tmp_path / "data"), open_artifacts(None, tmp_path / "data")
    try:
        registry = GraphRegistry(metadata, artifacts)
        registry.start()
        publish_in_process(registry, tmp_path, GRAPH_ID, "chain", b"a b\nb c\n")
        yield registry
    finally:
        metadata.close()


def _toggle(registry: GraphRegistry, times: int) -> None:
    """``times`` updates of the graph, back to back: c -> a added, removed, added ..."""
    for k in range(times):
        edge = [["c", "a"]]
        registry.update(GRAPH_ID, edge if k % 2 == 0 else [], [] if k % 2 == 0 else edge)


def _times(pending: int, first: float, previous: float, last: float, published: float = 0.0) -> JournalTimes:
    return JournalTimes(pending, first, last, previous, published, now=last)


def test_the_wait_from_the_journal_times(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry_module, "REBUILD_QUIET_S", 2.0)
    monkeypatch.setattr(registry_module, "REBUILD_MAX_WAIT_S", 30.0)
    monkeypatch.setattr(registry_module, "REBUILD_MAX_PENDING", 100)
    assert rebuild_wait(JournalTimes(0, None, None, None, 50.0, 100.0), 100.0) == 0.0, "nothing pending"
    assert rebuild_wait(JournalTimes(1, 99.0, 99.0, None, 50.0, 100.0), 100.0) == 0.0, "a lone update"
    stream = _times(5, first=90.0, previous=99.5, last=100.0)
    assert rebuild_wait(stream, 100.0) == 2.0, "until the stream pauses"
    assert rebuild_wait(stream, 101.0) == 1.0
    assert rebuild_wait(stream, 102.0) == 0.0, "paused for REBUILD_QUIET_S"
    assert rebuild_wait(_times(5, first=90.0, previous=97.5, last=100.0), 100.0) == 0.0, "came after a pause"
    long_stream = _times(50, first=70.0, previous=99.5, last=100.0)
    assert rebuild_wait(long_stream, 100.0) == 0.0, "waited REBUILD_MAX_WAIT_S since the oldest"
    republished = _times(50, first=70.0, previous=99.5, last=100.0, published=99.0)
    assert rebuild_wait(republished, 100.0) == 2.0, "the wait counts from the publication of the version before"
    assert rebuild_wait(_times(100, first=95.0, previous=99.5, last=100.0), 100.0) == 0.0, "REBUILD_MAX_PENDING"


def test_a_lone_update_is_folded_at_once(registry: GraphRegistry, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry_module, "REBUILD_QUIET_S", HOUR)
    _toggle(registry, 1)
    assert registry.rebuild_delay(GRAPH_ID) == 0.0
    assert registry.rebuild_if_pending(GRAPH_ID)
    job = registry.metadata.claim_job("builder", 60)
    assert job is not None and job.kind is JobKind.rebuild and job.graph_id == GRAPH_ID


def test_a_stream_puts_the_rebuild_off_until_it_pauses(
    registry: GraphRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(registry_module, "REBUILD_QUIET_S", HOUR)
    monkeypatch.setattr(registry_module, "REBUILD_MAX_WAIT_S", 10 * HOUR)
    _toggle(registry, 3)
    times = registry.metadata.journal_times(GRAPH_ID)
    assert times.pending == 3 and times.last_at is not None
    assert HOUR - 60 < registry.rebuild_delay(GRAPH_ID) <= HOUR
    assert registry.rebuild_delay(GRAPH_ID, times.last_at + HOUR) == 0.0, "the stream paused for REBUILD_QUIET_S"
    assert registry.rebuild_if_pending(GRAPH_ID)
    metadata = registry.metadata
    assert metadata.claim_job("builder", 60) is None, "queued, not due while the stream goes on"
    (queued,) = metadata.list_jobs(GRAPH_ID, states=[JobState.queued])
    assert queued.kind is JobKind.rebuild and queued.next_attempt_at > time.time() + HOUR - 60


def test_a_stream_waits_no_longer_than_the_longest_wait(
    registry: GraphRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(registry_module, "REBUILD_QUIET_S", 10 * HOUR)
    monkeypatch.setattr(registry_module, "REBUILD_MAX_WAIT_S", HOUR)
    _toggle(registry, 3)
    times = registry.metadata.journal_times(GRAPH_ID)
    assert times.first_at is not None
    assert HOUR - 60 < registry.rebuild_delay(GRAPH_ID) <= HOUR, "counted from the stream's first update"
    assert registry.rebuild_delay(GRAPH_ID, times.first_at + HOUR) == 0.0, "not paused, but waited long enough"


def test_a_stream_waits_for_no_more_than_the_most_pending(
    registry: GraphRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(registry_module, "REBUILD_QUIET_S", HOUR)
    monkeypatch.setattr(registry_module, "REBUILD_MAX_PENDING", 4)
    _toggle(registry, 3)
    assert registry.rebuild_delay(GRAPH_ID) > 0.0
    _toggle(registry, 1)
    assert registry.ready_version(GRAPH_ID).number == 5
    assert registry.rebuild_delay(GRAPH_ID) == 0.0, "4 updates pending"


def test_a_rebuild_claimed_during_a_stream_is_queued_again_uncounted(
    registry: GraphRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(registry_module, "REBUILD_QUIET_S", HOUR)
    monkeypatch.setattr(registry_module, "REBUILD_MAX_WAIT_S", 10 * HOUR)
    _toggle(registry, 1)
    assert registry.rebuild_if_pending(GRAPH_ID)  # due at once: a lone update
    _toggle(registry, 2)  # then a stream
    metadata = registry.metadata
    job = metadata.claim_job("builder", 60)
    assert job is not None and job.attempts == 1
    delay = registry.rebuild_delay(GRAPH_ID)
    assert delay > 0.0
    registry.rebuild_deferred(job, delay)
    assert metadata.claim_job("builder", 60) is None
    again = metadata.get_job(job.id)
    assert again.state is JobState.queued and again.attempts == 0 and again.error is None
    assert again.next_attempt_at > time.time() + HOUR - 60
    version = registry.ready_version(GRAPH_ID)  # exact meanwhile: c -> a added, added again, removed
    assert version.number == 4 and not version.reachable("c", "a") and version.reachable("a", "c")


def test_a_builder_sharing_the_store_sees_another_servers_stream(
    registry: GraphRegistry, database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A separate builder process on the same database (its own connections, no version held, none of the
    updates made through it) claims the rebuild mid-stream: it puts it off as the server that made the updates
    would, then runs it once the stream pauses."""
    monkeypatch.setattr(registry_module, "REBUILD_QUIET_S", HOUR)
    monkeypatch.setattr(registry_module, "REBUILD_MAX_WAIT_S", 10 * HOUR)
    _toggle(registry, 1)
    assert registry.rebuild_if_pending(GRAPH_ID)  # a lone update: due at once
    _toggle(registry, 2)  # then a stream, through the serving server
    metadata = open_metadata(database_url, tmp_path / "data")
    try:
        builder = GraphRegistry(metadata, open_artifacts(None, tmp_path / "data"), serving=False)
        builder.start()
        job = metadata.claim_job("builder", 60)
        assert job is not None and job.kind is JobKind.rebuild
        delay = builder.rebuild_delay(GRAPH_ID)
        assert HOUR - 60 < delay <= HOUR, "the stream seen from the store, not from memory"
        builder.rebuild_deferred(job, delay)
        assert registry.metadata.claim_job("another builder", 60) is None
        times = metadata.journal_times(GRAPH_ID)
        assert times.last_at is not None
        assert builder.rebuild_delay(GRAPH_ID, times.last_at + HOUR) == 0.0, "once paused, it runs"
        assert builder.rebuild_source(job) == (1, 4)
    finally:
        metadata.close()


@pytest.mark.parametrize("hastened_by", ["seconds", "forecast"])
def test_searches_on_the_updated_graph_make_the_rebuild_urgent(
    registry: GraphRegistry,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    hastened_by: str,
) -> None:
    """Under a stream the rebuild waits for a pause; once queries on the version have spent REBUILD_SEARCH_S on
    pairs that its updates left to searches, or a batch's searches left are forecast to take FORECAST_MARGIN
    times as long, it is due at once and urgent, and a builder runs it though the stream goes on."""
    monkeypatch.setattr(registry_module, "REBUILD_QUIET_S", HOUR)
    monkeypatch.setattr(registry_module, "REBUILD_MAX_WAIT_S", 10 * HOUR)
    monkeypatch.setattr(registry_module, "REBUILD_SEARCH_S", HOUR)
    ring_id = "bbbbbbbbbbbb"
    publish_in_process(
        registry, tmp_path, ring_id, "ring", "".join(f"{i} {(i + 1) % 60}\n" for i in range(60)).encode()
    )
    metadata = registry.metadata
    registry.update(ring_id, [], [[0, 1]])  # the ring split: most pairs need a search
    for k in range(2):  # then a stream
        registry.update(ring_id, [[70, 71]] if k % 2 == 0 else [], [] if k % 2 == 0 else [[70, 71]])
    assert registry.rebuild_if_pending(ring_id)
    assert registry.record(ring_id).rebuild["urgent"] is False
    pairs = [[u, v] for u in range(60) for v in range(60)]
    version = registry.ready_version(ring_id)
    while version.search_seconds < 0.05:
        version.query_batch(pairs)
        version = registry.ready_version(ring_id)
    assert metadata.claim_job("builder", 60) is None, "below REBUILD_SEARCH_S: it waits for the stream to pause"
    if hastened_by == "seconds":
        monkeypatch.setattr(registry_module, "REBUILD_SEARCH_S", 0.05)
        registry.ready_version(ring_id)
    else:  # a batch's stop, told how long its searches left would take
        monkeypatch.setattr(registry, "_gate", CoreGate())  # calls one at a time: the stop does not wait
        with caplog.at_level(logging.INFO, logger=registry_module.log.name):
            for forecast in (0.99 * FORECAST_MARGIN * HOUR, FORECAST_MARGIN * HOUR):
                assert "rebuild now" not in caplog.text
                stopped, _ = registry.answered(ring_id, version, lambda on, stop, forecast=forecast: stop(forecast))
                assert stopped is False, "no new labels yet"
        assert f"(a batch's searches left: {FORECAST_MARGIN * HOUR:.1f} s more): rebuild now" in caplog.text
    deadline = time.monotonic() + 60
    job = None
    while job is None and time.monotonic() < deadline:  # hastened on a thread of its own
        job = metadata.claim_job("builder", 60)
        time.sleep(0.05)
    assert job is not None and job.kind is JobKind.rebuild and job.graph_id == ring_id and job.urgent
    assert registry.record(ring_id).rebuild["urgent"] is True
    assert registry.rebuild_delay(ring_id) > HOUR - 60, "the stream has not paused"
    assert registry.rebuild_delay_of(job) == 0.0
    assert registry.rebuild_source(job) == (1, 4)


def test_a_batch_stops_its_searches_for_the_published_rebuild(
    registry: GraphRegistry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A batch whose searches on the updated graph have cost REBUILD_SEARCH_S asks, between parts of them, for
    the graph's rebuild, waits for it (its searches would take the build worker's cores), and stops them once it
    is published: the whole batch is then answered on the newest version, which the request reports."""
    monkeypatch.setattr(registry_module, "REBUILD_QUIET_S", HOUR)
    monkeypatch.setattr(registry_module, "REBUILD_MAX_WAIT_S", 10 * HOUR)
    monkeypatch.setattr(registry_module, "REBUILD_SEARCH_S", HOUR)
    ring_id, n = "cccccccccccc", 400
    publish_in_process(registry, tmp_path, ring_id, "ring", "".join(f"{i} {(i + 1) % n}\n" for i in range(n)).encode())
    registry.update(ring_id, [], [[0, 1]])  # the ring split: most pairs need a search
    for k in range(2):  # then a stream
        registry.update(ring_id, [[n + 10, n + 11]] if k % 2 == 0 else [], [] if k % 2 == 0 else [[n + 10, n + 11]])
    assert registry.rebuild_if_pending(ring_id)
    pairs = [[u, v] for u in range(0, n, 3) for v in range(0, n, 2)]
    # The path 1 -> 2 -> ... -> n-1 -> 0: u reaches v where v comes after it (0 comes last).
    truth = [u == v or v == 0 or (u != 0 and u <= v) for u, v in pairs]
    version = registry.ready_version(ring_id)
    chain = registry.ready_version(GRAPH_ID)
    asked: list[bool] = []

    def batch(on: Any, stop: Any) -> Any:
        asked.append(stop is not None)
        return on.query_batch_with_stats(pairs, stop)

    answers, answering = registry.answered(GRAPH_ID, chain, lambda on, stop: (asked.append(stop is not None), on))
    assert answering is chain and asked == [False], "nothing pending: no stop"
    asked.clear()
    (answers, stats), answering = registry.answered(ring_id, version, batch)
    assert answering is version and asked == [True] and stats.searched_updated > 0 and answers.tolist() == truth
    assert registry.metadata.claim_job("builder", 60) is None, "below REBUILD_SEARCH_S: it waits for the stream"

    monkeypatch.setattr(registry_module, "REBUILD_SEARCH_S", 0.0)
    monkeypatch.setattr(registry_module, "REBUILD_PATIENCE_S", HOUR)
    monkeypatch.setattr(registry, "_gate", CoreGate())  # calls one at a time: it must not wait, holding the gate
    (answers, stats), answering = registry.answered(ring_id, version, batch)  # its searches ask for the rebuild
    assert answering is version and answers.tolist() == truth
    monkeypatch.setattr(registry, "_gate", contextlib.nullcontext())
    asked.clear()
    with ThreadPoolExecutor(1) as pool, caplog.at_level(logging.INFO, logger=registry_module.log.name):
        waiting = pool.submit(registry.answered, ring_id, version, batch)  # it waits for the rebuild
        job = wait_until(lambda: registry.metadata.claim_job("builder", 60))
        assert job.kind is JobKind.rebuild and job.graph_id == ring_id and job.urgent
        assert not waiting.done(), "it waits for the rebuild rather than search on"
        folder = tmp_path / "rebuilt"
        ReachabilityIndex(version).rebuilt(backend="cpu").save(folder)
        assert registry.publish(job, folder, None, "cpu", base_version=1) is not None
        (answers, stats), answering = waiting.result(timeout=60)
    assert f"graph {ring_id}: a batch stopped its searches on version 4" in caplog.text
    assert asked == [True, False] and answering is not version and answering.number == version.number
    assert answering.labels is not version.labels and not answering.updates_pending
    assert answers.tolist() == truth and stats.searched_updated == 0 and stats.version == version.number


def test_a_rebuild_hastened_on_a_full_disk_is_asked_for_again(
    registry: GraphRegistry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the store refuses to make the rebuild urgent (a full disk), the next query asks again, until it
    is."""
    monkeypatch.setattr(registry_module, "REBUILD_QUIET_S", HOUR)
    monkeypatch.setattr(registry_module, "REBUILD_MAX_WAIT_S", 10 * HOUR)
    ring_id, n = "dddddddddddd", 60
    publish_in_process(registry, tmp_path, ring_id, "ring", "".join(f"{i} {(i + 1) % n}\n" for i in range(n)).encode())
    registry.update(ring_id, [], [[0, 1]])
    for k in range(2):
        registry.update(ring_id, [[n + 10, n + 11]] if k % 2 == 0 else [], [] if k % 2 == 0 else [[n + 10, n + 11]])
    assert registry.rebuild_if_pending(ring_id)
    metadata = registry.metadata
    hasten = metadata.hasten_job
    refused: list[str] = []

    def full_disk(*args: Any, **kwargs: Any) -> Any:
        refused.append(args[0])
        raise StorageFull("the disk is full (hastening a rebuild); free space and try again")

    monkeypatch.setattr(metadata, "hasten_job", full_disk)
    monkeypatch.setattr(registry_module, "REBUILD_SEARCH_S", 0.0)
    wait_until(lambda: registry.ready_version(ring_id) and len(refused) >= 2)  # asked again after the refusal
    assert set(refused) == {ring_id} and metadata.claim_job("builder", 60) is None
    monkeypatch.setattr(metadata, "hasten_job", hasten)
    job = wait_until(lambda: registry.ready_version(ring_id) and metadata.claim_job("builder", 60))
    assert job.kind is JobKind.rebuild and job.graph_id == ring_id and job.urgent

"""When a graph's journal is folded into new labels: at once after a lone update; under a stream of updates once it
pauses, at the latest after the longest wait or at the most updates pending (service.registry.rebuild_delay).
Times are given to ``rebuild_delay`` (its ``now``), never waited for."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from service import registry as registry_module
from service.registry import GraphRegistry
from service.state import open_artifacts, open_metadata
from service.state.metadata import JobKind, JobState

from .conftest import publish_in_process

GRAPH_ID = "aaaaaaaaaaaa"
HOUR = 3600.0


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[GraphRegistry]:
    """A registry serving one published graph, a -> b -> c."""
    metadata, artifacts = open_metadata(None, tmp_path / "data"), open_artifacts(None, tmp_path / "data")
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
    now = time.monotonic()
    assert HOUR - 60 < registry.rebuild_delay(GRAPH_ID, now) <= HOUR
    assert registry.rebuild_delay(GRAPH_ID, now + HOUR) == 0.0, "the stream paused for REBUILD_QUIET_S"
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
    now = time.monotonic()
    assert HOUR - 60 < registry.rebuild_delay(GRAPH_ID, now) <= HOUR, "counted from the stream's first update"
    assert registry.rebuild_delay(GRAPH_ID, now + HOUR) == 0.0, "the stream has not paused, but waited long enough"


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

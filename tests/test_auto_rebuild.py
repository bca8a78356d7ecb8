"""``ReachabilityIndex.auto_rebuild``: once the searches that pending updates leave have cost what a rebuild
would, the index rebuilds its labels (the same graph, nothing pending) and answers on them; a batch stops its
searches for it (``Version.query_ids``' ``stop``). Answers stay exact throughout."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from grail_core import ReachabilityIndex
from grail_core.errors import SearchStopped
from grail_core.index import MIN_REBUILD_S
from grail_core.version import FIRST_STOP_PART, FORECAST_MARGIN, StopCondition, Version
from tests.reference import reachable_pairs

N = 3_000


def _broken_cycle() -> tuple[ReachabilityIndex, np.ndarray, np.ndarray]:
    """A cycle through N nodes with one of its edges removed (most pairs then need a search), random pairs, and
    the graph's edges as they are after the removal."""
    src = np.arange(N)
    dst = (src + 1) % N
    index = ReachabilityIndex.from_edges(src, dst, num_nodes=N, backend="cpu")
    index.update(remove=[[5, 6]])
    edges = np.column_stack([src, dst])
    edges = edges[edges[:, 0] != 5]
    pairs = np.random.default_rng(1).integers(0, N, size=(5_000, 2)).astype(np.int64)
    return index, pairs, edges


def test_a_batch_asks_its_stop_between_parts_of_its_searches() -> None:
    index, pairs, edges = _broken_cycle()
    index.auto_rebuild = False
    version = index.current()
    asked: list[float] = []
    forecasts: list[float] = []

    def never(forecast: float) -> bool:
        asked.append(version.search_seconds)
        forecasts.append(forecast)
        return False

    answers, stats = version.query_ids(pairs, stop=never)
    np.testing.assert_array_equal(answers, reachable_pairs(N, edges, pairs))
    # Parts of 64, 128, 256 ... pairs: one question before each.
    searched = stats.searched_updated
    assert searched > 4 * FIRST_STOP_PART
    parts = int(np.ceil(np.log2(searched / FIRST_STOP_PART + 1)))
    assert len(asked) == parts and asked == sorted(asked) and asked[0] < asked[-1]
    # The forecast: the seconds per pair so far (their searches' seconds at least) times the pairs left.
    assert forecasts[0] == 0.0
    for part in range(1, parts):
        done = FIRST_STOP_PART * (2**part - 1)
        assert forecasts[part] >= (asked[part] - asked[0]) / done * (searched - done) > 0

    def after_one_part(forecast: float) -> bool:
        asked.append(version.search_seconds)
        return len(asked) > parts + 1

    before = version.search_seconds
    with pytest.raises(SearchStopped):
        version.query_ids(pairs, stop=after_one_part)
    assert version.search_seconds > before and len(asked) == parts + 2
    assert index.pending.updates == 1


def test_the_index_rebuilds_once_its_searches_cost_a_rebuild(monkeypatch: pytest.MonkeyPatch) -> None:
    index, pairs, edges = _broken_cycle()
    assert index.rebuild_seconds() >= max(MIN_REBUILD_S, index.current().stats.build_seconds)
    # A rebuild taken to cost next to nothing: the batch's first part of searches already passes it.
    monkeypatch.setattr(ReachabilityIndex, "rebuild_seconds", lambda self: 1e-9)
    updated = index.current()
    answers, stats = index.query_ids(pairs)
    np.testing.assert_array_equal(answers, reachable_pairs(N, edges, pairs))
    assert 0 < updated.search_seconds and index.auto_rebuilds == 1
    assert index.pending.updates == 0 and index.version == updated.number == stats.version
    assert stats.searched_updated == 0  # answered on the new labels

    # A single pair is not stopped: its search counts, and the next query rebuilds first.
    index.update(remove=[[300, 301]])
    edges = edges[edges[:, 0] != 300]
    searched = index.current()
    assert index.query_pair(20, 700) == (False, True, searched.number) and searched.search_seconds > 0
    assert index.auto_rebuilds == 1 and index.pending.updates == 1
    assert index.reachable(301, 5) and index.auto_rebuilds == 2 and index.pending.updates == 0
    np.testing.assert_array_equal(index.query_batch(pairs), reachable_pairs(N, edges, pairs))


def test_no_rebuild_when_off_or_past_staged_updates(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ReachabilityIndex, "rebuild_seconds", lambda self: 1e-9)
    index, pairs, edges = _broken_cycle()
    truth = reachable_pairs(N, edges, pairs)
    index.auto_rebuild = False
    np.testing.assert_array_equal(index.query_batch(pairs), truth)
    assert index.auto_rebuilds == 0 and index.pending.updates == 1

    # A rebuild would drop an update staged but not published: the batch searches on.
    index.auto_rebuild = True
    index.update(remove=[[300, 301]], publish=False)
    answers, stats = index.query_ids(pairs)
    np.testing.assert_array_equal(answers, truth)
    assert index.auto_rebuilds == 0 and stats.searched_updated > 0 and index.staged_version == index.version + 1


def test_queries_on_several_threads_rebuild_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches on several threads that each find the searches have cost a rebuild: one rebuilds, the others
    answer on its labels."""
    monkeypatch.setattr(ReachabilityIndex, "rebuild_seconds", lambda self: 1e-9)
    index, pairs, edges = _broken_cycle()
    truth = reachable_pairs(N, edges, pairs)
    with ThreadPoolExecutor(4) as pool:
        found = list(pool.map(lambda _: index.query_batch(pairs), range(8)))
    for answers in found:
        np.testing.assert_array_equal(answers, truth)
    assert index.auto_rebuilds == 1 and index.pending.updates == 0


def test_a_batch_forecast_to_search_longer_buys_the_rebuild_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch whose searches left are forecast to cost FORECAST_MARGIN rebuilds stops before they have cost
    one; a forecast under that searches on."""
    # A price no searches here come near (a first search's compilation counts in their seconds).
    price = 1_000.0
    monkeypatch.setattr(ReachabilityIndex, "rebuild_seconds", lambda self: price)
    index, pairs, edges = _broken_cycle()
    truth = reachable_pairs(N, edges, pairs)
    asked: list[bool] = []

    def batch_forecast(forecast: float) -> Callable[[Version, StopCondition | None], np.ndarray]:
        def ask(version: Version, stop: StopCondition | None) -> np.ndarray:
            if stop is not None:
                asked.append(stop(forecast))
                if asked[-1]:
                    raise SearchStopped("stopped")
            return version.query_batch(pairs)

        return ask

    np.testing.assert_array_equal(index._answered(batch_forecast(FORECAST_MARGIN * price * 0.99)), truth)
    assert asked == [False] and index.auto_rebuilds == 0 and index.pending.updates == 1
    assert 0 < index.current().search_seconds < price
    np.testing.assert_array_equal(index._answered(batch_forecast(FORECAST_MARGIN * price)), truth)
    assert asked == [False, True] and index.auto_rebuilds == 1 and index.pending.updates == 0

"""An API replica's version cache (service.cache): least recently used out by memory, one load for concurrent
requests, a graph larger than the bound served alone, graphs in use kept; and a registry with a tiny bound
answering several graphs exactly while it drops and loads them again."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from service.cache import VersionCache, memory_bytes
from service.registry import GraphRegistry
from service.state import open_artifacts, open_metadata
from tests.reference import named_reachability

from .conftest import publish_in_process, wait_until


class _Held:
    """What the cache's drop callback and installs leave in place: the keys whose version is 'loaded'."""

    def __init__(self) -> None:
        self.keys: set[str] = set()

    def put(self, key: str) -> Callable[[], None]:
        return lambda: self.keys.add(key)

    def drop(self, key: str) -> None:
        self.keys.discard(key)


def _cache(limit: int) -> tuple[VersionCache, _Held]:
    held = _Held()
    return VersionCache(limit, held.drop), held


def test_least_recently_used_out_by_bytes() -> None:
    cache, held = _cache(100)
    for key in "abc":
        cache.install(key, 40, held.put(key))
        assert cache.stats().held_bytes <= 100
    assert held.keys == {"b", "c"} and cache.stats().graphs == 2
    assert cache.acquire_held("b")  # a request on b: now more recent than c
    cache.release("b")
    cache.install("d", 40, held.put("d"))
    assert held.keys == {"b", "d"}
    stats = cache.stats()
    assert (stats.held_bytes, stats.graphs, stats.evictions) == (80, 2, 2)
    cache.install("b", 61, held.put("b"))  # b grew (updates): d goes
    assert held.keys == {"b"} and cache.stats().held_bytes == 61
    cache.discard("b")
    assert cache.stats().held_bytes == 0


def test_a_graph_larger_than_the_bound_is_served_alone() -> None:
    cache, held = _cache(100)
    cache.install("small", 30, held.put("small"))
    cache.install("huge", 500, held.put("huge"))
    assert held.keys == {"huge"} and cache.stats().held_bytes == 500
    cache.install("small", 30, held.put("small"))
    assert held.keys == {"small"} and cache.stats().held_bytes == 30


def test_a_graph_in_use_is_not_dropped_until_released() -> None:
    cache, held = _cache(100)
    cache.acquire("a", lambda: cache.install("a", 60, held.put("a")))
    cache.install("b", 60, held.put("b"))
    assert held.keys == {"a", "b"}, "a is in use: over the bound meanwhile"
    cache.release("a")
    assert held.keys == {"b"} and cache.stats().held_bytes == 60
    cache.acquire("b", lambda: None)  # held: not loaded again
    cache.release("b")
    assert held.keys == {"b"} and cache.stats().loads == 1
    assert cache.acquire_held("b") and not cache.acquire_held("a")
    cache.install("c", 60, held.put("c"))
    assert held.keys == {"b", "c"}, "b is in use"
    cache.release("b", nbytes=30)  # measured again as its request ends: now within the bound
    assert held.keys == {"b", "c"} and cache.stats().held_bytes == 90


def test_concurrent_requests_wait_on_one_load() -> None:
    cache, held = _cache(1000)
    loads = []
    go = threading.Event()

    def load() -> None:
        loads.append(1)
        go.wait(30)
        cache.install("g", 10, held.put("g"))

    threads = [threading.Thread(target=cache.acquire, args=("g", load)) for _ in range(8)]
    for thread in threads:
        thread.start()
    wait_until(lambda: cache._pins.get("g") == 8, timeout=30)  # every request is in, one of them loading
    go.set()
    for thread in threads:
        thread.join(30)
    assert len(loads) == 1 and held.keys == {"g"} and cache.stats().loads == 1
    for _ in threads:
        cache.release("g")
    assert not cache._pins


def test_a_failed_load_reaches_every_waiter_and_keeps_nothing() -> None:
    cache, _ = _cache(1000)

    def load() -> None:
        raise OSError("the store is away")

    with pytest.raises(OSError):
        cache.acquire("g", load)
    assert not cache._pins and not cache._loads and cache.stats().loads == 0


@dataclass
class _Arrays:
    a: np.ndarray
    b: tuple[np.ndarray, np.ndarray]


def test_memory_bytes_counts_each_array_once() -> None:
    a = np.zeros(100, dtype=np.int64)
    b = np.ones(10, dtype=np.int32)
    assert memory_bytes(_Arrays(a, (a[10:], b))) == a.nbytes + b.nbytes


# ---- a registry with a tiny bound, over graphs a single server published -----------------------------------

_GRAPHS = {
    "cycle": [("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")],
    "chain": [("a", "b"), ("b", "c"), ("d", "d"), ("e", "a")],
    "star": [("a", "b"), ("a", "c"), ("a", "d"), ("e", "e")],
}


def _published(tmp_path: Path) -> dict[str, str]:
    """The graphs, built and published by a registry without a cache (a single server); name -> id."""
    metadata, artifacts = open_metadata(None, tmp_path / "data"), open_artifacts(None, tmp_path / "data")
    registry = GraphRegistry(metadata, artifacts)
    registry.start()
    ids = {}
    for n, (name, edges) in enumerate(_GRAPHS.items()):
        graph_id = f"{n:012d}"
        text = "".join(f"{u} {v}\n" for u, v in edges).encode()
        publish_in_process(registry, tmp_path, graph_id, name, text)
        ids[name] = graph_id
    metadata.close()
    return ids


def test_a_replica_with_a_tiny_bound_answers_every_graph_exactly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("service.cache.MEASURE_EVERY_S", 0.0)  # measured again at the end of every request
    ids = _published(tmp_path)
    metadata, artifacts = open_metadata(None, tmp_path / "data"), open_artifacts(None, tmp_path / "data")
    registry = GraphRegistry(metadata, artifacts, cache_bytes=1)  # smaller than any graph: one at a time
    assert registry.start() == [], "nothing loads at start"
    cache = registry.cache
    assert cache is not None and cache.stats().graphs == 0
    edges = {name: list(e) for name, e in _GRAPHS.items()}
    rounds = 0
    for name in [*_GRAPHS, *reversed(_GRAPHS), *_GRAPHS]:
        graph_id = registry.acquire(name)
        assert graph_id == ids[name]
        version = registry.ready_version(name)
        assert cache.stats().graphs == 1
        present = sorted({x for e in edges[name] for x in e})
        truth = named_reachability(present, edges[name])
        for (i, u), (j, v) in itertools.product(enumerate(present), repeat=2):
            assert version.reachable(u, v) == truth[i, j], (name, u, v)
        if rounds == 4:  # an update through the replica, then dropped, then loaded again with it
            result = registry.update(name, add=[["d", "a"]], remove=[])
            edges[name].append(("d", "a"))
            assert result["version"] == 2
        registry.release(graph_id)
        held = cache.stats()  # measured again as the request ends: queries build some structures on first use
        assert held.graphs == 1 and held.held_bytes == memory_bytes(registry.ready_version(name)) > 0
        rounds += 1
    stats = cache.stats()
    # Each step asked for another graph than the one before, but where the order turns back.
    assert stats.loads == 7 and stats.evictions == 6, stats
    updated = list(_GRAPHS)[1]
    for other in _GRAPHS:  # the updated graph, dropped meanwhile, loads with its journal
        held_id = registry.acquire(other)
        assert held_id is not None
        registry.release(held_id)
    graph_id = registry.acquire(updated)
    assert graph_id is not None
    version = registry.ready_version(updated)
    present = sorted({x for e in edges[updated] for x in e})
    reached = named_reachability(present, edges[updated])[present.index("d"), present.index("b")]
    assert version.number == 2 and version.reachable("d", "b") and reached
    registry.release(graph_id)
    metadata.close()


def test_a_replica_with_room_keeps_every_graph(tmp_path: Path) -> None:
    ids = _published(tmp_path)
    metadata, artifacts = open_metadata(None, tmp_path / "data"), open_artifacts(None, tmp_path / "data")
    registry = GraphRegistry(metadata, artifacts, cache_bytes=1 << 30)
    registry.start()
    assert registry.held_number("cycle") == 1, "a graph not loaded yet answers for the version its load gives"
    for _ in range(3):
        for name in _GRAPHS:
            graph_id = registry.acquire(name)
            assert graph_id == ids[name]
            registry.release(graph_id)
    stats = registry.cache.stats() if registry.cache is not None else None
    assert stats is not None and (stats.loads, stats.evictions, stats.graphs) == (3, 0, 3)
    assert registry.acquire("no-such-graph") is None
    metadata.close()

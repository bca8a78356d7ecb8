"""``CudaSearchEngine``: the GPU search of one index on one device, as a ``grail_core.engines.SearchEngine``."""

from __future__ import annotations

import itertools
import logging
import threading
import time
import weakref
from typing import Any

import numpy as np

from grail_core.engines import SearchResult
from grail_core.records import LEVEL

from ..device import Device, devices, free_memory
from ..frontier import EngineConfig
from .device_index import DeviceCache, cache_for, index_bytes
from .host import SearchOptions, SearchStats, out_of_device_memory, run_search, with_mode, words_for
from .touched import TouchedCopies, run_touched, touched_words

__all__ = ["UPLOAD_BYTES_PER_SECOND", "CudaSearchEngine", "search_pairs", "search_pairs_with_stats"]

log = logging.getLogger(__name__)

_keys = itertools.count(1)
# What an index copy's upload is expected to move per second (host to device, then reordered there), for
# how long a batch would wait for an upload under way.
UPLOAD_BYTES_PER_SECOND = 4e9


class CudaSearchEngine:
    """The GPU bitmask search of one index (``hot``, a ``HotArrays``) on one device.

    The device copy of the index lives in the device's cache (several indexes share it; the least
    recently used go out when memory runs short) until ``release`` or until the engine is collected.
    ``prefetch`` makes the copy in a background thread (an index does so when it is built or loaded), so
    that no batch pays for it; ``ready_in`` says how long it has left. Calls take the device one at a time.
    """

    def __init__(self, hot: Any, device: Device | None = None, options: SearchOptions | None = None) -> None:
        if device is None:
            found = devices()
            device = found[0] if found else Device(0)
        self.device = device
        self.hot = hot
        self.name = f"cuda:{device.ordinal}"
        self.options = options or SearchOptions()
        self._key = next(_keys)
        self._cache: DeviceCache = cache_for(device)
        self._words = 0  # status words a pass took in the latest call (0: none yet)
        self._level: np.ndarray | None = None
        self._upload: tuple[float, float] | None = None  # (started, expected seconds) of a prefetch under way
        self._touched = TouchedCopies()
        self.touched_pairs = 0  # pairs this engine answered on versions' updated graphs
        weakref.finalize(self, _drop, self._cache, self._key)

    def level(self) -> np.ndarray:
        """The index's DAG levels on the host (for mode 'auto')."""
        if self._level is None:
            self._level = np.ascontiguousarray(self.hot.rec_dag[:, LEVEL])
        return self._level

    def prefetch(self) -> None:
        """Copies the index to the device in a background thread (no-op when it is there or under way)."""
        if self.resident or self._upload is not None:
            return
        self._upload = (time.perf_counter(), index_bytes(self.hot) / UPLOAD_BYTES_PER_SECOND)
        reference = weakref.ref(self)
        threading.Thread(target=_prefetch, args=(reference,), name=f"grail-upload-{self.name}", daemon=True).start()

    def ready_in(self) -> float:
        """Seconds until the device holds this index's copy: 0 when it does, the rest of a prefetch's expected
        time while one is under way (a call waits for it), or the whole copy's expected time."""
        if self.resident:
            return 0.0
        if self._upload is None:
            return index_bytes(self.hot) / UPLOAD_BYTES_PER_SECOND
        started, expected = self._upload
        return max(0.0, started + expected - time.perf_counter())

    def answer(self, sources: np.ndarray, targets: np.ndarray, mode: str = "auto") -> SearchResult:
        """Exact answers; raises MemoryError when the device cannot hold the index or one pass."""
        answers, stats = self.answer_with_stats(sources, targets, mode)
        return SearchResult(
            answers=answers,
            engine=self.name,
            seconds=stats.upload_seconds + stats.search_seconds,
            mode=stats.mode,
            passes=stats.passes,
            rounds=stats.rounds,
            longest=stats.longest,
            upload_seconds=stats.upload_seconds,
        )

    def answer_with_stats(
        self, sources: np.ndarray, targets: np.ndarray, mode: str = "auto"
    ) -> tuple[np.ndarray, SearchStats]:
        options = with_mode(self.options, mode)
        with self.device.lock, self.device.context():
            try:
                answers, stats = run_search(self._cache, self._key, self.hot, self.level, sources, targets, options)
                if stats.passes > 1:  # a pass held as many searches as memory allowed
                    self._words = stats.words
                return answers, stats
            except Exception as error:
                if not out_of_device_memory(error):
                    raise
                self._cache.clear()
                raise MemoryError(f"the GPU search ran out of device memory: {error}") from error

    def answer_touched(self, graph: Any, sources: np.ndarray, targets: np.ndarray) -> SearchResult:
        """Exact answers to 'node sources[i] reaches node targets[i]' on the updated graph of one version
        (``graph``: its ``grail_core.touched.TouchedGraph``, copied to the device on its first call and kept
        while it lives); raises MemoryError when the device cannot hold it."""
        searches = graph.searches(sources, targets)
        with self.device.lock, self.device.context():
            try:
                began = time.perf_counter()
                index = self._cache.index(self._key, self.hot)
                arrays, uploaded = self._touched.arrays(graph)
                uploaded += time.perf_counter() - began
                words = touched_words(sources.size, graph.num_keys, free_memory(), self.options.memory_fraction)
                cfg = self.options.config or EngineConfig.default()
                answers, stats = run_touched(arrays, index.arrays, searches, words, self._touched, cfg)
            except Exception as error:
                self._touched.drop(buffers=True)
                if not out_of_device_memory(error):
                    raise
                self._cache.clear()
                raise MemoryError(f"the GPU search ran out of device memory: {error}") from error
        self.touched_pairs += int(sources.size)
        return SearchResult(
            answers=answers,
            engine=self.name,
            seconds=uploaded + stats.search_seconds,
            mode="touched",
            passes=stats.passes,
            rounds=stats.hops,
            longest=stats.longest,
            upload_seconds=uploaded,
        )

    def release(self) -> None:
        self._touched.drop()
        _drop(self._cache, self._key)

    def pass_pairs(self) -> int:
        """Searches one pass of this index takes on the device: as many as the latest call that needed
        several passes held, else what free memory affords (asked of the device once)."""
        if not self._words:
            nodes = max(1, self.hot.rec_dag.shape[0])
            with self.device.context():
                free = free_memory()
            held = self._cache.workspace.words // nodes  # buffers already allocated are affordable too
            self._words = max(held, words_for(1 << 40, nodes, free, self.options.memory_fraction))
        return 64 * self._words

    @property
    def resident(self) -> bool:
        """Whether the device holds this index's copy now."""
        return self._key in self._cache.entries


def _prefetch(reference: weakref.ref[CudaSearchEngine]) -> None:
    engine = reference()
    if engine is None:
        return
    try:
        with engine.device.lock, engine.device.context():
            engine._cache.index(engine._key, engine.hot)
    except Exception as error:  # the first call that needs the copy tries again, and says why if it fails
        log.warning("copying an index of %d nodes to %s failed: %s", engine.hot.rec_dag.shape[0], engine.name, error)
    finally:
        engine._upload = None


def _drop(cache: DeviceCache, key: int) -> None:
    with cache.device.lock:
        cache.drop(key)


def search_pairs_with_stats(
    hot: Any, sources: np.ndarray, targets: np.ndarray, options: SearchOptions | None = None
) -> tuple[np.ndarray, SearchStats]:
    """One call of a throwaway engine (the index is copied to the device and dropped after): for tests
    and one-off batches; an index keeps its engines (``grail_core.search.Searcher``)."""
    engine = CudaSearchEngine(hot, options=options)
    try:
        return engine.answer_with_stats(sources, targets)
    finally:
        engine.release()


def search_pairs(
    hot: Any, sources: np.ndarray, targets: np.ndarray, options: SearchOptions | None = None
) -> np.ndarray:
    """Exact answers (bool per pair) to 'DAG node sources[i] reaches DAG node targets[i]' (see
    ``search_pairs_with_stats``). The pairs may be any DAG node ids: the seed step applies the label
    filter to each pair first, so decided pairs cost nothing."""
    return search_pairs_with_stats(hot, sources, targets, options)[0]

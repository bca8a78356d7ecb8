"""Search engines: what answers the pairs the label filter leaves undecided.

An engine answers a batch of DAG-node pairs exactly and can release what it holds on a device. The CPU
engine (``CpuEngine``, with the fused filter + search that an index without a GPU uses for whole
batches) is here; the CUDA engine, bound to one device, is ``kernels.search.CudaSearchEngine``, reached
through ``grail_core.backends``; ``SplitEngine`` spreads a large batch over several engines (one per
GPU) and answers the parts side by side. Every engine gives the same answers.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from .query import HotArrays, SearchBuffers, answer_pairs, search_pairs_cpu

__all__ = ["CpuEngine", "SearchEngine", "SearchResult", "SplitEngine"]


@dataclass(frozen=True)
class SearchResult:
    """Answers of one engine call and what the call did."""

    answers: np.ndarray  # bool per pair
    engine: str  # which engine answered ('cpu', 'cuda:0', 'cuda:0+cuda:1')
    seconds: float  # wall time of the call
    mode: str = "dfs"  # 'dfs' (CPU), 'levels' or 'frontier' (GPU)
    passes: int = 0  # GPU passes
    rounds: int = 0  # levels swept or hops taken, over all passes
    longest: int = 0  # the most rounds of one pass
    upload_seconds: float = 0.0  # the index copied to a device within this call (once per index and device)


@runtime_checkable
class SearchEngine(Protocol):
    """Answers 'DAG node sources[i] reaches DAG node targets[i]' for a batch of pairs."""

    name: str

    def answer(self, sources: np.ndarray, targets: np.ndarray, mode: str = "auto") -> SearchResult:
        """Exact answers; ``mode`` is a GPU search mode ('auto', 'levels', 'frontier'), ignored by the CPU."""
        ...

    def release(self) -> None:
        """Frees what the engine holds on a device (a later call uploads it again)."""
        ...


class CpuEngine:
    """The all-core CPU search: a pruned DFS per pair, pairs spread over numba's threads."""

    name = "cpu"

    def __init__(self, hot: HotArrays, buffers: SearchBuffers | None = None) -> None:
        """``buffers``: the stamps of small batches, kept across them (the index's pool of single-pair searches,
        so that an index holds one; a pool of the engine's own when None)."""
        self.hot = hot
        self._buffers = buffers if buffers is not None else SearchBuffers(hot.rec_dag.shape[0])

    def answer_ids(self, pairs: np.ndarray) -> tuple[np.ndarray, int, int]:
        """Filter and search fused in one pass over (M, 2) node ids: answers, searched, positives."""
        return answer_pairs(self.hot, pairs, self._buffers)

    def answer(self, sources: np.ndarray, targets: np.ndarray, mode: str = "auto") -> SearchResult:
        start = time.perf_counter()
        answers = search_pairs_cpu(self.hot, sources, targets)
        return SearchResult(answers, self.name, time.perf_counter() - start)

    def release(self) -> None:
        pass


class SplitEngine:
    """Several engines as one (one per GPU): a batch of at least ``min_part`` pairs per engine is split in
    equal parts, answered side by side, one thread per part; a smaller one goes whole to the engines in
    turn. ``concurrent`` False answers the parts one after another (the CUDA simulator runs one kernel at
    a time)."""

    def __init__(self, engines: Sequence[SearchEngine], min_part: int = 1 << 16, concurrent: bool = True) -> None:
        if not engines:
            raise ValueError("a split engine needs at least one engine")
        self.engines = list(engines)
        self.name = "+".join(engine.name for engine in self.engines)
        self.min_part = min_part
        self._pool = ThreadPoolExecutor(len(self.engines)) if concurrent and len(self.engines) > 1 else None
        self._turn = 0
        self._turn_lock = threading.Lock()

    def parts(self, count: int) -> int:
        """How many engines a batch of ``count`` pairs is split over."""
        return max(1, min(len(self.engines), count // max(1, self.min_part)))

    def answer(self, sources: np.ndarray, targets: np.ndarray, mode: str = "auto") -> SearchResult:
        start = time.perf_counter()
        parts = self.parts(sources.size)
        if parts == 1:
            with self._turn_lock:
                engine = self.engines[self._turn % len(self.engines)]
                self._turn += 1
            return engine.answer(sources, targets, mode)
        bounds = np.linspace(0, sources.size, parts + 1).astype(np.int64)
        slices = [slice(bounds[k], bounds[k + 1]) for k in range(parts)]

        def run(k: int) -> SearchResult:
            return self.engines[k].answer(sources[slices[k]], targets[slices[k]], mode)

        results = list(self._pool.map(run, range(parts))) if self._pool else [run(k) for k in range(parts)]
        return SearchResult(
            answers=np.concatenate([result.answers for result in results]),
            engine="+".join(result.engine for result in results),
            seconds=time.perf_counter() - start,
            mode="+".join(sorted({result.mode for result in results})),
            passes=sum(result.passes for result in results),
            rounds=max(result.rounds for result in results),
            longest=max(result.longest for result in results),
            upload_seconds=max(result.upload_seconds for result in results),
        )

    def release(self) -> None:
        for engine in self.engines:
            engine.release()

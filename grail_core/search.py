"""The search side of one loaded index: what answers pairs the labels leave open, shared by all its versions.

``Searcher`` holds the CPU engine's packed records (``query.pack``), the buffers that single searches and
the searches over updated graphs reuse, and the hybrid scheduler (``grail_core.scheduler``) with its engines:
the CPU's, and on 'cuda' one per GPU (``grail_core.backends``). Each is made on first use, so a process that
only builds or updates an index (a build worker) makes none of them; the first scheduler on a GPU starts the
machine's cost-model calibration (``grail_core.calibration``) in the background, once per process.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from . import backends
from .calibration import calibrate
from .engines import CpuEngine, SplitEngine
from .labels import Labels
from .query import UNDECIDED, YES, HotArrays, SearchBuffers, answer_pair, filter_pairs, pack
from .scheduler import Decision, Scheduler, machine_model

__all__ = ["Searcher", "PathBuffers", "search_scheduler", "start_calibration"]

log = logging.getLogger(__name__)


class PathBuffers:
    """Visit stamps, parents, depths and the two queues of path searches, reused like ``SearchBuffers``."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._free: list[list[Any]] = []

    @contextmanager
    def take(self) -> Iterator[tuple[np.ndarray, ...]]:
        try:
            buffers = self._free.pop()
        except IndexError:
            arrays = [np.zeros(self.size, dtype=np.int32)] + [np.empty(self.size, dtype=np.int32) for _ in range(4)]
            buffers = [*arrays, 0]
        if buffers[-1] > np.iinfo(np.int32).max - 3:
            buffers[0][:] = 0
            buffers[-1] = 0
        buffers[-1] += 3
        try:
            yield (*buffers[:5], np.int32(buffers[-1] - 2))
        finally:
            self._free.append(buffers)


class Searcher:
    """One index's engines, scheduler and search buffers; ``backend`` ('cpu' or 'cuda', resolved) says where
    undecided pairs may be searched."""

    def __init__(self, labels: Labels, backend: str = "cpu") -> None:
        self.labels = labels
        self.backend = backend
        self._lock = threading.Lock()
        self._packed: tuple[HotArrays, SearchBuffers] | None = None
        self._scheduler: Scheduler | None = None
        self._walk_buffers = SearchBuffers(0)
        self._path_buffers = PathBuffers(0)

    def _records(self) -> tuple[HotArrays, SearchBuffers]:
        """The CPU engine's records of the labels and the buffers of single-pair searches over them."""
        if self._packed is None:
            with self._lock:
                if self._packed is None:
                    hot = pack(self.labels.arrays)
                    self._packed = (hot, SearchBuffers(hot.rec_dag.shape[0]))
        return self._packed

    @property
    def hot(self) -> HotArrays:
        """The CPU engine's records of the labels."""
        return self._records()[0]

    @property
    def buffers(self) -> SearchBuffers:
        """Stamps and stacks of single-pair searches over the DAG."""
        return self._records()[1]

    @property
    def scheduler(self) -> Scheduler:
        """The engines and the scheduler that picks one per batch."""
        if self._scheduler is None:
            hot = self.hot
            with self._lock:
                if self._scheduler is None:
                    self._scheduler = search_scheduler(hot, self.backend)
        return self._scheduler

    @scheduler.setter
    def scheduler(self, scheduler: Scheduler) -> None:
        self._scheduler = scheduler

    def release(self) -> None:
        """Frees the index's copies on GPUs now (a later batch copies it again)."""
        if self._scheduler is not None:
            self._scheduler.release()

    def answer_pair(self, u: int, v: int) -> tuple[bool, bool]:
        """(reachable, needed a search) by the labels' graph, on the calling thread."""
        return answer_pair(self.hot, self.buffers, u, v)

    def answer_ids(self, pairs: np.ndarray) -> tuple[np.ndarray, int, int, Decision | None]:
        """The labels' answers (exact for the labels' graph) of an (M, 2) array of node ids: answers, pairs
        searched, positives, and the scheduler's decision (None when the CPU answered the whole batch)."""
        scheduler = self.scheduler
        if scheduler.gpu is None:
            answers, searched, positives = scheduler.cpu.answer_ids(pairs)
            return answers, searched, positives, None
        hot = self.hot
        codes = filter_pairs(hot, pairs)
        answers = codes == YES
        undecided = np.flatnonzero(codes == UNDECIDED)
        decision = None
        if undecided.size:
            comp = self.labels.arrays.comp
            found, decision = scheduler.search(comp[pairs[undecided, 0]], comp[pairs[undecided, 1]])
            answers[undecided] = found
        return answers, int(undecided.size), int(np.count_nonzero(answers)), decision

    def walk_buffers(self, size: int) -> SearchBuffers:
        """Stamps and queues for searches over ``size`` keys (updated graphs, listings)."""
        pool = self._walk_buffers
        if pool._size < size:
            pool = self._walk_buffers = SearchBuffers(max(size, 2 * pool._size))
        return pool

    def path_buffers(self, size: int) -> PathBuffers:
        """Buffers for path searches over ``size`` nodes."""
        pool = self._path_buffers
        if pool.size < size:
            pool = self._path_buffers = PathBuffers(max(size, 2 * pool.size))
        return pool


def search_scheduler(hot: HotArrays, backend: str) -> Scheduler:
    """An index's search: its CPU engine and, for backend 'cuda', one GPU engine per device (a batch split
    over all of them when there are several), under a scheduler that picks per batch."""
    cpu = CpuEngine(hot)
    if backend != "cuda":
        return Scheduler(hot, cpu, None)
    engines, concurrent = backends.cuda_search_engines(hot)
    start_calibration()
    if len(engines) == 1:
        return Scheduler(hot, cpu, engines[0], pass_pairs=engines[0].pass_pairs)
    split = SplitEngine(engines, concurrent=concurrent)
    return Scheduler(hot, cpu, split, pass_pairs=engines[0].pass_pairs, parts=split.parts)


_calibration: threading.Thread | None = None
_calibration_lock = threading.Lock()


def start_calibration() -> None:
    """Fits the machine's search cost model once per process, in the background (``grail_core.calibration``);
    until it ends, schedulers predict from the model's defaults."""
    global _calibration
    with _calibration_lock:
        if _calibration is not None or machine_model().fitted:
            return
        _calibration = threading.Thread(target=_calibrate, name="grail-search-calibration", daemon=True)
        _calibration.start()


def _calibrate() -> None:
    try:
        calibrate(machine_model(), backends.cuda_search_engine)
    except Exception:  # a failed calibration leaves the defaults; searches are exact either way
        log.exception("search cost calibration failed; the scheduler keeps its default constants")

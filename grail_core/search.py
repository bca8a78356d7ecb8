"""The search side of one loaded index: what answers pairs the labels leave open, shared by all its versions.

``Searcher`` holds the CPU engine's packed records (``query.pack``), the buffers that single searches and
the searches over updated graphs reuse, and the hybrid scheduler (``grail_core.scheduler``) with its engines:
the CPU's, and on 'cuda' one per GPU (``grail_core.backends``). Each is made on first use, or on 'cuda' when
the index is built or loaded (``Searcher.prefetch``: the GPU engines then copy the index to their devices in the
background, so that no batch waits for the copy); a process that only builds labels or updates them (a build
worker) makes none of them. The machine's search cost model (``grail_core.calibration``) is fitted once per
machine and kept in the cache folder: ``start_calibration``, which the warm-up calls at a start on a GPU
(``grail_core.warmup``), reads it there or fits it in the background.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numba
import numpy as np

from . import backends
from .calibration import calibrate, load_model, save_model
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
            hot, buffers = self._records()
            with self._lock:
                if self._scheduler is None:
                    self._scheduler = search_scheduler(hot, self.backend, buffers)
        return self._scheduler

    @scheduler.setter
    def scheduler(self, scheduler: Scheduler) -> None:
        self._scheduler = scheduler

    def prefetch(self) -> None:
        """On 'cuda', makes the engines now: they copy the index to their devices in the background (a built or
        loaded index does so at once: ``Version.of``)."""
        if self.backend == "cuda":
            _ = self.scheduler  # made for its engines, which start their copies

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


def search_scheduler(hot: HotArrays, backend: str, buffers: SearchBuffers | None = None) -> Scheduler:
    """An index's search: its CPU engine (small batches on ``buffers``) and, for backend 'cuda', one GPU engine
    per device (a batch split over all of them when there are several), under a scheduler that picks per
    batch. The GPU engines start copying the index to their devices in the background at once; until they
    hold it, the scheduler counts the wait in the GPU's predictions."""
    cpu = CpuEngine(hot, buffers)
    if backend != "cuda":
        return Scheduler(hot, cpu, None)
    engines, concurrent = backends.cuda_search_engines(hot)
    for engine in engines:
        engine.prefetch()
    if len(engines) == 1:
        return Scheduler(hot, cpu, engines[0], pass_pairs=engines[0].pass_pairs)
    split = SplitEngine(engines, concurrent=concurrent)
    return Scheduler(hot, cpu, split, pass_pairs=engines[0].pass_pairs, parts=split.parts)


_calibration: threading.Thread | None = None
_calibration_lock = threading.Lock()


def start_calibration(wait: bool = False) -> None:
    """Fits the machine's search cost model once per process (``grail_core.calibration``): read from the
    cache folder when this machine's fit is kept there, else measured in a background thread and kept.
    Until it ends, schedulers predict from the model's defaults. ``wait`` returns only once it has."""
    global _calibration
    with _calibration_lock:
        if _calibration is None and not machine_model().fitted:
            _calibration = threading.Thread(target=_calibrate, name="grail-search-calibration", daemon=True)
            _calibration.start()
        thread = _calibration
    if wait and thread is not None:
        thread.join()


def _calibrate() -> None:
    try:
        key = _machine_key()
        if load_model(machine_model(), key):
            log.info("search cost model read from the cache folder")
            return
        calibrate(machine_model(), backends.cuda_search_engine)
        save_model(machine_model(), key)
    except Exception:  # a failed calibration leaves the defaults; searches are exact either way
        log.exception("search cost calibration failed; the scheduler keeps its default constants")


def _machine_key() -> dict[str, object]:
    """What a kept fit holds for: the GPUs and the search kernels' sources (``backends.device_key``), the CPU
    threads, and the model's terms and how they are fitted (the sources of ``calibration`` and ``scheduler``)."""
    model = hashlib.sha256()
    for source in ("calibration.py", "scheduler.py"):
        model.update(Path(__file__).with_name(source).read_bytes())
    return {**backends.device_key(), "cpu_threads": numba.get_num_threads(), "model": model.hexdigest()}

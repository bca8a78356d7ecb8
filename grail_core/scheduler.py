"""The hybrid scheduler: each batch's undecided pairs go to the engine a cost model predicts faster.

Per batch the scheduler looks at what the label filter left: the pairs, the levels the GPU's passes
would span, and a sample of ``PROBE_PAIRS`` pairs searched on the calling thread (their answers are
kept): how long the CPU search took for them, and how many hops and tested children a hop-by-hop
search (the GPU's way) needs. From these a ``CostModel`` predicts the CPU search and both GPU modes
(levels sweep, frontier queue); the batch goes whole to the cheapest. It is never sent to an engine
to measure it. The model's constants are the machine's (one ``CostModel`` per process, fitted by
``CostModel.fit`` at start where a GPU is used, see ``grail_core.backends``) and are refined from the
actual time of every batch of any index; each index's scheduler also keeps its own corrections, per
kind of batch, for what the machine's constants miss about its graph.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numba
import numpy as np

from .engines import CpuEngine, SearchEngine, SearchResult
from .query import HotArrays, SearchBuffers, probe_pairs

__all__ = [
    "GPU_MODES",
    "MIN_SCHEDULED_PAIRS",
    "PROBE_PAIRS",
    "BatchFeatures",
    "CostModel",
    "Decision",
    "Scheduler",
    "machine_model",
    "pass_spans",
]

log = logging.getLogger(__name__)

# Below this many undecided pairs the CPU searches: one GPU round trip (~1.5 ms) never pays there, and
# the probe would cost a good part of the batch.
MIN_SCHEDULED_PAIRS = 4096
PROBE_PAIRS = 16
GPU_MODES = ("levels", "frontier")
# A frontier pass takes as many hops as its longest search: a sample of 16 sees the typical search,
# not the longest of 100,000 (on a 340,000-level DAG: 16 at the 99th percentile, ~1,000 at most).
HOP_TAIL = 8
HOP_FLOOR = 16
SPAN_SAMPLE = 1024
_EMA = 0.5  # weight of the newest batch in every correction
_CORRECTION_RANGE = (0.05, 20.0)


def pass_spans(levels: np.ndarray, sources: np.ndarray, targets: np.ndarray, per_pass: int) -> np.ndarray:
    """Levels each pass of ``per_pass`` searches spans: its highest target level minus its lowest source
    level (``levels`` per DAG node), as a levels-sweep launch would sweep them if every search stayed open.
    Read from at most ``SPAN_SAMPLE`` pairs a pass, spread over it: the extremes of a large pass sit at
    the ends of the level range anyway, and a gather of every pair's levels would cost milliseconds."""
    if sources.size == 0:
        return np.zeros(0, dtype=np.int64)
    count = -(-sources.size // per_pass)
    step = max(1, per_pass // SPAN_SAMPLE)
    positions = np.arange(count)[:, None] * per_pass + np.arange(0, per_pass, step)[None, :]
    positions = np.minimum(positions, sources.size - 1)
    low = levels[sources[positions]].min(axis=1)
    high = levels[targets[positions]].max(axis=1)
    return np.maximum(high.astype(np.int64) - low, 0)


@dataclass(frozen=True)
class BatchFeatures:
    """What the filter and the probe tell about a batch's search."""

    pairs: int  # undecided pairs to search
    passes: int  # GPU passes at the device's pass size
    span: int  # levels those passes span, summed
    dfs_seconds: float  # CPU search seconds per sampled pair, one thread
    edges: float  # children a hop-by-hop search tests, per sampled pair
    hops: int  # most hops a sampled search took
    parts: int = 1  # GPUs the batch is split over

    def signature(self) -> tuple[int, int]:
        """The kind of batch, for an index's own corrections: sizes and depths within a factor of two."""
        mean_span = self.span / max(1, self.passes)
        return round(math.log2(1 + self.pairs)), round(math.log2(1 + mean_span))


@dataclass
class CostModel:
    """Seconds an engine takes for a batch, from its ``BatchFeatures``: the machine's constants.

    CPU: fixed + pairs x sampled seconds per pair / effective threads. GPU, per part: fixed + pairs x
    (copy, seed, answers) + either every level each pass spans (levels sweep) or the hops of each pass
    (frontier queue) + pairs x tested children x seconds per test. Each kind's predictions are scaled by
    a correction, the running ratio of actual to predicted time over every batch of any index.
    """

    cpu_fixed: float = 1e-4
    cpu_threads: float = 0.0  # effective parallel threads; 0: three quarters of numba's threads
    gpu_fixed: float = 1.5e-3
    gpu_pair: float = 5e-9
    gpu_level: float = 18e-6
    gpu_hop: float = 6e-6
    gpu_edge_levels: float = 1e-9
    gpu_edge_frontier: float = 2e-9
    split_fixed: float = 3e-4
    corrections: dict[str, float] = field(default_factory=dict)
    fitted: bool = False  # whether ``fit`` ran on this machine
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def raw(self, kind: str, f: BatchFeatures) -> float:
        """Uncorrected seconds of ``kind`` ('cpu', 'levels' or 'frontier') for a batch."""
        if kind == "cpu":
            threads = self.cpu_threads or 0.75 * numba.get_num_threads()
            return self.cpu_fixed + f.pairs * f.dfs_seconds / max(1.0, threads)
        parts = max(1, f.parts)
        pairs = f.pairs / parts
        passes = max(1.0, f.passes / parts)
        seconds = self.gpu_fixed + pairs * self.gpu_pair + (self.split_fixed if parts > 1 else 0.0)
        if kind == "levels":
            return seconds + f.span / parts * self.gpu_level + pairs * f.edges * self.gpu_edge_levels
        if kind == "frontier":
            span = f.span / max(1, f.passes)
            hops = min(span, max(HOP_FLOOR, HOP_TAIL * f.hops))
            return seconds + passes * hops * self.gpu_hop + pairs * f.edges * self.gpu_edge_frontier
        raise ValueError(f"unknown engine kind {kind!r}")

    def correction(self, kind: str) -> float:
        return self.corrections.get(kind, 1.0)

    def observe(self, kind: str, raw: float, actual: float) -> None:
        """Folds one batch's actual time into ``kind``'s correction."""
        with self._lock:
            self.corrections[kind] = _blend(self.corrections.get(kind), actual / max(raw, 1e-9))

    def fit(self, samples: Sequence[tuple[str, BatchFeatures, float]]) -> None:
        """Least-squares constants from (kind, features, seconds) runs: the machine's calibration.

        Every term keeps its default where the runs cannot tell it (a coefficient that comes out
        negative), so a partial calibration (no GPU) still leaves a usable model.
        """
        with self._lock:
            for kind, names in (
                ("cpu", ("cpu_fixed", "cpu_threads")),
                ("levels", ("gpu_fixed", "gpu_pair", "gpu_level", "gpu_edge_levels")),
                ("frontier", ("gpu_fixed", "gpu_pair", "gpu_hop", "gpu_edge_frontier")),
            ):
                rows = [(f, seconds) for k, f, seconds in samples if k == kind]
                if len(rows) < len(names):
                    continue
                design = np.array([self._terms(kind, f) for f, _ in rows])
                actual = np.array([seconds for _, seconds in rows])
                # Relative errors count alike for short and long runs.
                weights = 1.0 / np.maximum(actual, 1e-6)
                coefficients = np.linalg.lstsq(design * weights[:, None], actual * weights, rcond=None)[0]
                if kind == "cpu":
                    # An effective thread count the machine cannot have means the runs could not tell it.
                    if 0 < 1.0 / max(float(coefficients[1]), 1e-12) <= 2 * numba.config.NUMBA_NUM_THREADS:
                        self.cpu_fixed = max(0.0, float(coefficients[0]))
                        self.cpu_threads = 1.0 / float(coefficients[1])
                    continue
                for name, value in zip(names, coefficients, strict=True):
                    if value > 0 and not (kind == "frontier" and name in ("gpu_fixed", "gpu_pair")):
                        setattr(self, name, float(value))
            self.corrections.clear()
            self.fitted = True

    @staticmethod
    def _terms(kind: str, f: BatchFeatures) -> list[float]:
        if kind == "cpu":
            return [1.0, f.pairs * f.dfs_seconds]
        span = f.span / max(1, f.passes)
        if kind == "levels":
            return [1.0, f.pairs, f.span, f.pairs * f.edges]
        hops = min(span, max(HOP_FLOOR, HOP_TAIL * f.hops))
        return [1.0, f.pairs, max(1, f.passes) * hops, f.pairs * f.edges]


def _blend(old: float | None, ratio: float) -> float:
    ratio = min(max(ratio, _CORRECTION_RANGE[0]), _CORRECTION_RANGE[1])
    return ratio if old is None else (1 - _EMA) * old + _EMA * ratio


def _blend_value(old: float | None, value: float) -> float:
    return value if old is None else (1 - _EMA) * old + _EMA * value


_machine = CostModel()


def machine_model() -> CostModel:
    """This process's cost model: the machine's constants, shared by every index."""
    return _machine


@dataclass(frozen=True)
class Decision:
    """Where a batch was searched, what the model predicted for each engine, and what it took."""

    engine: str  # 'cpu' or the GPU engine's name ('cuda:0', 'cuda:0+cuda:1')
    mode: str  # 'dfs', 'levels' or 'frontier'
    predicted: dict[str, float]  # 'cpu' and GPU mode -> predicted seconds (empty when not scheduled)
    seconds: float  # the search's actual time (probe included)
    probe_pairs: int = 0
    probe_seconds: float = 0.0


class Scheduler:
    """One index's hybrid search: its CPU engine, its GPU engine if any, and its own corrections."""

    def __init__(
        self,
        hot: HotArrays,
        cpu: CpuEngine,
        gpu: SearchEngine | None,
        model: CostModel | None = None,
        pass_pairs: Callable[[], int] | None = None,
        parts: Callable[[int], int] | None = None,
        min_pairs: int = MIN_SCHEDULED_PAIRS,
    ) -> None:
        self.hot = hot
        self.cpu = cpu
        self.gpu = gpu
        self.model = model or machine_model()
        self.levels = np.ascontiguousarray(hot.rec_dag[:, 1])
        self._pass_pairs = pass_pairs or (lambda: 1 << 16)
        self._parts = parts or (lambda count: 1)
        self.min_pairs = min_pairs
        self._buffers = SearchBuffers(hot.rec_dag.shape[0])
        self._corrections: dict[tuple[str, tuple[int, int]], float] = {}
        self._cpu_pair: float | None = None  # this index's CPU search seconds per pair, one thread (running)
        self._lock = threading.Lock()

    def release(self) -> None:
        """Frees what the engines hold on devices."""
        if self.gpu is not None:
            self.gpu.release()

    def features(
        self, sources: np.ndarray, targets: np.ndarray, dfs_seconds: float, hops: np.ndarray, edges: np.ndarray
    ) -> BatchFeatures:
        spans = pass_spans(self.levels, sources, targets, max(64, self._pass_pairs()))
        return BatchFeatures(
            pairs=int(sources.size),
            passes=int(spans.size),
            span=int(spans.sum()),
            dfs_seconds=dfs_seconds,
            edges=float(edges.mean()) if edges.size else 0.0,
            hops=int(hops.max()) if hops.size else 0,
            parts=self._parts(int(sources.size)),
        )

    def predict(self, f: BatchFeatures) -> dict[str, float]:
        """Predicted seconds per kind ('cpu', and each GPU mode when there is a GPU engine)."""
        kinds = ("cpu", *GPU_MODES) if self.gpu is not None else ("cpu",)
        signature = f.signature()
        return {
            kind: self.model.raw(kind, f) * self.model.correction(kind) * self._corrections.get((kind, signature), 1.0)
            for kind in kinds
        }

    def look(
        self, sources: np.ndarray, targets: np.ndarray, probe: int = PROBE_PAIRS
    ) -> tuple[np.ndarray, np.ndarray, BatchFeatures]:
        """Probes ``probe`` pairs spread over the batch: (their positions, their answers, the features of
        the other pairs)."""
        sample = np.linspace(0, sources.size - 1, min(probe, sources.size)).astype(np.int64)
        rest = np.ones(sources.size, dtype=np.bool_)
        rest[sample] = False
        probed, dfs_seconds, hops, edges = probe_pairs(self.hot, self._buffers, sources[sample], targets[sample])
        return sample, probed, self.features(sources[rest], targets[rest], dfs_seconds / sample.size, hops, edges)

    def search(self, sources: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, Decision]:
        """Exact answers for undecided pairs of DAG node ids, and where they were searched."""
        start = time.perf_counter()
        if self.gpu is None or sources.size < self.min_pairs:
            result = self.cpu.answer(sources, targets)
            return result.answers, Decision("cpu", "dfs", {}, time.perf_counter() - start)
        cheap = self._cpu_below_gpu_floor(sources.size)
        if cheap is not None:
            result = self.cpu.answer(sources, targets)
            self._learn_cpu_pair(result.seconds * self._threads() / sources.size)
            return result.answers, Decision("cpu", "dfs", {"cpu": cheap}, time.perf_counter() - start)
        sample, probed, f = self.look(sources, targets)
        probe_seconds = time.perf_counter() - start
        self._learn_cpu_pair(f.dfs_seconds)
        rest = np.ones(sources.size, dtype=np.bool_)
        rest[sample] = False
        predicted = self.predict(f)
        kind = min(predicted, key=predicted.__getitem__)
        result = self._run(kind, sources[rest], targets[rest])
        gpu_used = result.engine != "cpu"
        self._observe(result.mode if gpu_used else "cpu", f, result)
        if not gpu_used and f.pairs:
            self._learn_cpu_pair(result.seconds * self._threads() / f.pairs)
        answers = np.empty(sources.size, dtype=np.bool_)
        answers[sample] = probed
        answers[rest] = result.answers
        return answers, Decision(
            engine=result.engine,
            mode=result.mode,
            predicted=predicted,
            seconds=time.perf_counter() - start,
            probe_pairs=int(sample.size),
            probe_seconds=probe_seconds,
        )

    def _threads(self) -> float:
        return self.model.cpu_threads or 0.75 * numba.get_num_threads()

    def _cpu_below_gpu_floor(self, pairs: int) -> float | None:
        """The CPU's predicted seconds when this index's earlier batches say it beats even a GPU call's fixed
        cost (no probe needed then), else None."""
        if self._cpu_pair is None:
            return None
        f = BatchFeatures(pairs=pairs, passes=1, span=0, dfs_seconds=self._cpu_pair, edges=0.0, hops=0)
        cpu = self.model.raw("cpu", f) * self.model.correction("cpu")
        floor = self.model.gpu_fixed * min(self.model.correction(kind) for kind in GPU_MODES)
        return cpu if cpu < floor else None

    def _learn_cpu_pair(self, per_pair: float) -> None:
        """Folds one batch's CPU search seconds per pair (one thread's worth) into the index's running figure."""
        with self._lock:
            self._cpu_pair = _blend_value(self._cpu_pair, per_pair)

    def _run(self, kind: str, sources: np.ndarray, targets: np.ndarray) -> SearchResult:
        if kind == "cpu":
            return self.cpu.answer(sources, targets)
        try:
            return self.gpu.answer(sources, targets, kind)
        except MemoryError as error:
            log.warning("GPU search did not fit (%s); searching %d pairs on the CPU instead", error, sources.size)
            return self.cpu.answer(sources, targets)

    def _observe(self, kind: str, f: BatchFeatures, result: SearchResult) -> None:
        if kind not in ("cpu", *GPU_MODES):
            return
        raw = self.model.raw(kind, f)
        # The one-time copy of the index to a device is not a cost of later batches.
        actual = max(result.seconds - result.upload_seconds, 1e-6)
        machine = self.model.correction(kind)
        self.model.observe(kind, raw, actual)
        key = (kind, f.signature())
        with self._lock:
            self._corrections[key] = _blend(self._corrections.get(key), actual / max(raw * machine, 1e-9))

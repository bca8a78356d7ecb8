"""The hybrid scheduler: each batch's undecided pairs go to the engine a cost model predicts faster.

Per batch the scheduler looks at what the label filter left: the pairs, the levels the GPU's passes
would span and the nodes on them, and a probe of ``PROBE_PAIRS`` pairs searched on the calling thread:
how long the CPU search took for them, and how many hops and tested children a hop-by-hop search (the
GPU's way) needs. From these a ``CostModel`` predicts the CPU search and both GPU modes (levels sweep,
frontier queue); the whole batch goes to the cheapest. No batch is ever sent to an engine to measure it.

The model's constants are the machine's: one ``CostModel`` per process, fitted by ``CostModel.fit`` at
start where a GPU is used (``grail_core.calibration``), and scaled by a machine correction from the
actual time of every batch of any index (within a factor of two). Each index's scheduler keeps, per kind
of batch (size and depth within a factor of two), its own ratio of actual to predicted time for each
engine, the hops its frontier passes took, and its CPU search's seconds per pair: a pair's search cost
is heavy-tailed, so a probe of 16 often misses the mean, and what the machine's constants miss about one
graph must not move the predictions for another. An index whose CPU search has shown itself cheaper
than a GPU call's fixed cost skips the probe. While the index is still being copied to the GPU (in the
background, from when it was built or loaded), the GPU's predictions include the wait for that copy.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numba
import numpy as np

from .batches import pass_levels
from .engines import CpuEngine, SearchEngine, SearchResult
from .query import PROBE_GROUP, SERIAL_BATCH, HotArrays, SearchBuffers, pairs_per_chunk, probe_pairs

__all__ = [
    "DEFAULTS",
    "GPU_MODES",
    "KINDS",
    "TERMS",
    "MIN_SCHEDULED_PAIRS",
    "PROBE_PAIRS",
    "BatchFeatures",
    "CostModel",
    "Decision",
    "Scheduler",
    "TOUCHED_BUILD_SECONDS",
    "TOUCHED_MIN_PAIRS",
    "cpu_threads_used",
    "machine_model",
]

log = logging.getLogger(__name__)

# Below this many undecided pairs the CPU searches unscheduled: the probe would cost a good part of the
# batch. Above it a GPU call can win: a few hundred deep pairs take the CPU longer than a GPU call.
MIN_SCHEDULED_PAIRS = 32
PROBE_PAIRS = 16
# The probe stops after this long (but searches 4 pairs at least): on a DAG whose pairs are costly, 16
# pairs searched twice would add a good part of the search.
PROBE_SECONDS = 2.5e-4
# A kind of batch whose last choice between CPU and GPU was clear by this factor skips the probe (the
# index keeps the probe's figures; the GPU modes are told apart without it), except every REPROBE-th: a
# probe costs up to PROBE_SECONDS, as much as a small batch's whole search, and a choice between engines
# within this factor of each other costs no more than the factor.
CLEAR_MARGIN = 1.2
REPROBE = 16
GPU_MODES = ("levels", "frontier")
KINDS = ("cpu", *GPU_MODES)
# A frontier pass takes as many hops as its longest search: a sample of 16 sees the typical search,
# not the longest of 100,000 (on very deep DAGs the longest is far beyond the 99th percentile). Until an
# index's own frontier runs tell, the longest is guessed at HOP_TAIL times the sample's.
HOP_TAIL = 8
HOP_FLOOR = 16
# Writing out a version's updated graph for a GPU (``grail_core.touched``), per key and edge: once a version.
TOUCHED_BUILD_SECONDS = 2e-8
# Fewer pairs than this searched on an updated graph stay on the CPU: the GPU steps hop by hop with a host
# round trip per hop and scans every key per hop, and lost below it in both shapes measured
# (benchmarks/results/gpu-updates-h200.md).
TOUCHED_MIN_PAIRS = 1 << 15
_EMA = 0.5  # weight of the newest batch in every running figure
_NONE = np.zeros(0, dtype=np.int64)  # a batch's features without a probe's figures
_CORRECTION_RANGE = (0.05, 20.0)  # an index's own correction of a prediction
_MACHINE_RANGE = (0.5, 2.0)  # the machine's: graph-specific misses belong to the index's corrections


@dataclass(frozen=True)
class BatchFeatures:
    """What the filter and the probe tell about a batch's search."""

    pairs: int  # undecided pairs to search
    passes: int  # GPU passes at the device's pass size
    span: int  # levels those passes span, summed
    scanned: int  # nodes on those levels, summed (the levels sweep reads each one's flag)
    dfs_seconds: float  # CPU search seconds per sampled pair, one thread
    edges: float  # children a hop-by-hop search tests, per sampled pair
    hops: float  # the hops frontier passes are expected to take, summed over the passes
    parts: int = 1  # GPUs the batch is split over

    def signature(self) -> tuple[int, int]:
        """The kind of batch, for an index's own figures: sizes and depths within a factor of two."""
        mean_span = self.span / max(1, self.passes)
        return round(math.log2(1 + self.pairs)), round(math.log2(1 + mean_span))


def cpu_threads_used(pairs: int) -> int:
    """Threads the CPU search runs a batch on: numba hands out chunks (``pairs_per_chunk``), and a batch
    below SERIAL_BATCH runs on the calling thread."""
    if pairs < SERIAL_BATCH:
        return 1
    threads = numba.get_num_threads()
    return max(1, min(threads, -(-pairs // pairs_per_chunk(pairs, threads))))


# Each kind's time is a sum of terms, each a feature of the batch times a machine constant:
#   cpu:      fixed + pairs x sampled seconds per pair / threads used x scale (what a thread of the full
#             search pays beside the probe's thread: caches the probe found cold, hyper-threads)
#   levels:   fixed + pairs (copies, seed, answers) + levels swept + nodes scanned + children tested
#   frontier: fixed + pairs + hops (summed over passes) + children tested
TERMS = {
    "cpu": ("fixed", "scale"),
    "levels": ("fixed", "pair", "level", "scan", "edge"),
    "frontier": ("fixed", "pair", "hop", "edge"),
}
# The constants' shape, from H200 runs (the figures: benchmarks/results/code-figures.md). Terms that no
# single run separates (pairs, tested children) are set so that both modes come out no dearer than measured:
# a kind the model over-prices is never run, so never corrected. ``CostModel.fit`` scales each kind to the
# machine at start.
DEFAULTS = {
    "cpu": (1e-4, 0.5),
    "levels": (4.5e-4, 2e-8, 15e-6, 1.5e-11, 2e-10),
    "frontier": (3.5e-4, 5e-9, 8e-6, 2.5e-10),
}


@dataclass
class CostModel:
    """Seconds an engine takes for a batch, from its ``BatchFeatures``: the machine's constants.

    Each kind ('cpu', 'levels', 'frontier') is a sum of ``TERMS`` times constants (``DEFAULTS`` until
    ``fit`` runs on this machine). With a batch split over GPUs, each part is predicted and the split's
    own cost added. Each kind's predictions are scaled by a correction, the running ratio of actual to
    predicted time over every batch of any index, kept within a factor of two.
    """

    constants: dict[str, tuple[float, ...]] = field(default_factory=lambda: dict(DEFAULTS))
    split_fixed: float = 3e-4
    corrections: dict[str, float] = field(default_factory=dict)
    fitted: bool = False  # whether ``fit`` ran on this machine
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @staticmethod
    def terms(kind: str, f: BatchFeatures) -> np.ndarray:
        """The features each of ``kind``'s constants multiplies (one GPU part's, for a split batch)."""
        if kind == "cpu":
            return np.array([1.0, f.pairs * f.dfs_seconds / cpu_threads_used(f.pairs)])
        parts = max(1, f.parts)
        pairs = f.pairs / parts
        if kind == "levels":
            return np.array([1.0, pairs, f.span / parts, f.scanned / parts, pairs * f.edges])
        if kind == "frontier":
            return np.array([1.0, pairs, f.hops / parts, pairs * f.edges])
        raise ValueError(f"unknown engine kind {kind!r}")

    def raw(self, kind: str, f: BatchFeatures) -> float:
        """Uncorrected seconds of ``kind`` for a batch."""
        seconds = float(np.dot(self.constants[kind], self.terms(kind, f)))
        return seconds + (self.split_fixed if kind != "cpu" and f.parts > 1 else 0.0)

    def correction(self, kind: str) -> float:
        return self.corrections.get(kind, 1.0)

    def observe(self, kind: str, raw: float, actual: float) -> None:
        """Folds one batch's actual time into ``kind``'s machine correction."""
        with self._lock:
            ratio = min(max(actual / max(raw, 1e-9), _MACHINE_RANGE[0]), _MACHINE_RANGE[1])
            self.corrections[kind] = _blend(self.corrections.get(kind), ratio, _MACHINE_RANGE)

    def fit(self, samples: Sequence[tuple[str, BatchFeatures, float]], floors: dict[str, float] | None = None) -> None:
        """Scales each kind's constants to this machine from (kind, features, seconds) runs: the
        calibration. One factor per kind, the geometric mean of actual over predicted time: the runs of a
        calibration cannot separate a kind's terms reliably (a least-squares fit of all of them put a
        hop at several times its measured cost), but they do tell how fast the machine is. A kind's fixed
        cost is then the one measured on its own (``floors``: a call of a few pairs), where given: small
        batches pay it alone, and a scale fitted on large ones misstates it."""
        with self._lock:
            for kind, defaults in DEFAULTS.items():
                ratios = [
                    seconds / self.raw_with(defaults, kind, f)
                    for k, f, seconds in samples
                    if k == kind and f.parts == 1 and seconds > 0
                ]
                if ratios:
                    scale = float(np.exp(np.mean(np.log(ratios))))
                    self.constants[kind] = tuple(value * scale for value in defaults)
                if floors and kind in floors:
                    self.constants[kind] = (floors[kind], *self.constants[kind][1:])
            self.corrections.clear()
            self.fitted = True

    def raw_with(self, constants: Sequence[float], kind: str, f: BatchFeatures) -> float:
        return max(float(np.dot(constants, self.terms(kind, f))), 1e-9)


def _blend(old: float | None, ratio: float, bounds: tuple[float, float] = _CORRECTION_RANGE) -> float:
    ratio = min(max(ratio, bounds[0]), bounds[1])
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
    """One index's hybrid search: its CPU engine, its GPU engine if any, and its own running figures."""

    def __init__(
        self,
        hot: HotArrays,
        cpu: CpuEngine,
        gpu: SearchEngine | None,
        model: CostModel | None = None,
        pass_pairs: Callable[[], int] | None = None,
        parts: Callable[[int], int] | None = None,
        min_pairs: int = MIN_SCHEDULED_PAIRS,
        min_touched_pairs: int = TOUCHED_MIN_PAIRS,
    ) -> None:
        self.hot = hot
        self.cpu = cpu
        self.gpu = gpu
        self.model = model or machine_model()
        self.levels = np.ascontiguousarray(hot.rec_dag[:, 1])
        # Nodes below each level: the levels sweep of levels [a, b) reads level_start[b] - level_start[a] flags.
        counts = np.bincount(self.levels, minlength=1) if self.levels.size else np.zeros(1, np.int64)
        self.level_start = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        self._pass_pairs = pass_pairs or (lambda: 1 << 16)
        self._parts = parts or (lambda count: 1)
        self.min_pairs = min_pairs
        self.min_touched_pairs = min_touched_pairs
        self._buffers = SearchBuffers(hot.rec_dag.shape[0])
        # Per kind of batch: actual / predicted time of each engine kind, and the hops its frontier passes took.
        self._corrections: dict[tuple[str, tuple[int, int]], float] = {}
        self._hops: dict[tuple[int, int], float] = {}
        self._shared: set[tuple[str, tuple[int, int]]] = set()  # corrections taken from the other GPU mode
        # Per kind of batch: CPU search seconds per pair, one thread's worth (running).
        self._cpu_pair: dict[tuple[int, int], float] = {}
        # Per kind of batch: the last probe's features, the margin of the decision, and the batches since.
        self._memo: dict[tuple[int, int], tuple[BatchFeatures, float, int]] = {}
        # Per kind of batch searched on an updated graph on a GPU: actual / predicted time, and its hops.
        self._touched: dict[tuple[int, int], tuple[float, float]] = {}
        self._lock = threading.Lock()

    def release(self) -> None:
        """Frees what the engines hold on devices."""
        if self.gpu is not None:
            self.gpu.release()

    def features(
        self, sources: np.ndarray, targets: np.ndarray, dfs_seconds: float, hops: np.ndarray, edges: np.ndarray
    ) -> BatchFeatures:
        """A batch's features from its pairs and a probe's per-pair figures (seconds, hops, tested children)."""
        spans = np.zeros(0, dtype=np.int64)
        scanned = 0
        if sources.size:
            low, high = pass_levels(self.levels, sources, targets, max(64, self._pass_pairs()))
            spans = np.maximum(high.astype(np.int64) - low, 0)
            top = np.minimum(high, self.level_start.size - 1)
            scanned = int(np.maximum(self.level_start[top] - self.level_start[low], 0).sum())
        f = BatchFeatures(
            pairs=int(sources.size),
            passes=int(spans.size),
            span=int(spans.sum()),
            scanned=scanned,
            dfs_seconds=dfs_seconds,
            edges=float(edges.mean()) if edges.size else 0.0,
            hops=0.0,
            parts=self._parts(int(sources.size)),
        )
        mean_span = f.span / max(1, f.passes)
        guess = f.passes * min(mean_span, max(HOP_FLOOR, HOP_TAIL * (int(hops.max()) if hops.size else 0)))
        return replace(f, hops=float(self._hops.get(f.signature(), guess)))

    def predict(self, f: BatchFeatures) -> dict[str, float]:
        """Predicted seconds per kind ('cpu', and each GPU mode when there is a GPU engine): the model's,
        scaled by this index's own correction for this kind of batch, or else by the machine's."""
        kinds = KINDS if self.gpu is not None else ("cpu",)
        signature = f.signature()
        return {
            kind: self.model.raw(kind, f) * self._corrections.get((kind, signature), self.model.correction(kind))
            for kind in kinds
        }

    def look(
        self, sources: np.ndarray, targets: np.ndarray, probe: int = PROBE_PAIRS, budget: float = PROBE_SECONDS
    ) -> tuple[int, BatchFeatures]:
        """Probes up to ``probe`` pairs spread over the batch for ``budget`` seconds: (pairs probed, the
        batch's features)."""
        sample = np.linspace(0, sources.size - 1, min(probe, sources.size)).astype(np.int64)
        # Interleaved, so that a probe cut short after its first groups still spreads over the batch.
        groups = -(-sample.size // PROBE_GROUP)
        sample = np.concatenate([sample[k::groups] for k in range(groups)])
        done, dfs_seconds, hops, edges = probe_pairs(self.hot, self._buffers, sources[sample], targets[sample], budget)
        return done, self.features(sources, targets, dfs_seconds / max(1, done), hops, edges)

    def search(self, sources: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, Decision]:
        """Exact answers for undecided pairs of DAG node ids, and where they were searched.

        The probe's pairs are answered again by the chosen engine with the rest of the batch: splitting
        them off would copy the batch twice, which costs more than searching 16 pairs twice."""
        start = time.perf_counter()
        if self.gpu is None or sources.size < self.min_pairs:
            result = self.cpu.answer(sources, targets)
            return result.answers, Decision("cpu", "dfs", {}, time.perf_counter() - start)
        fresh = self.features(sources, targets, 0.0, _NONE, _NONE)
        signature = fresh.signature()
        cheap = self._cpu_below_gpu_floor(fresh)
        if cheap is not None:
            result = self.cpu.answer(sources, targets)
            self._learn_cpu_pair(signature, self._per_pair(result.seconds, sources.size))
            return result.answers, Decision("cpu", "dfs", {"cpu": cheap}, time.perf_counter() - start)
        probed, f = self._recall(fresh)
        if f is None:
            probed, f = self.look(sources, targets)
            self._learn_cpu_pair(signature, f.dfs_seconds)
        probe_seconds = time.perf_counter() - start
        predicted = self.predict(f)
        wait = self._gpu_wait()
        for kind in GPU_MODES:
            if kind in predicted:
                predicted[kind] += wait
        ranked = sorted(predicted, key=predicted.__getitem__)
        result = self._run(ranked[0], sources, targets)
        self._observe(result, f)
        # What the probe decides is CPU or GPU: how clearly, for skipping it next time.
        gpu = min((predicted[kind] for kind in GPU_MODES if kind in predicted), default=float("inf"))
        margin = max(predicted["cpu"], gpu) / max(min(predicted["cpu"], gpu), 1e-12)
        with self._lock:
            batches = self._memo[f.signature()][2] + 1 if f.signature() in self._memo else 0
            self._memo[f.signature()] = (f, margin, batches)
        return result.answers, Decision(
            engine=result.engine,
            mode=result.mode,
            predicted=predicted,
            seconds=time.perf_counter() - start,
            probe_pairs=probed,
            probe_seconds=probe_seconds,
        )

    def search_touched(
        self,
        graph: Callable[[], Any],
        build_size: int,
        sources: np.ndarray,
        targets: np.ndarray,
        cpu: Callable[[np.ndarray], np.ndarray],
    ) -> tuple[np.ndarray, Decision]:
        """Exact answers for pairs of node ids on a version's updated graph, and where they were searched:
        ``cpu(which)`` answers the pairs ``which`` by the CPU's walk; ``graph()`` gives the version's graph for
        a GPU (``grail_core.touched``), which ``build_size`` keys and edges still have to be written for.

        As for the labels' graph, a probe of the CPU search prices both engines (the GPU's like its frontier
        mode, corrected by this index's earlier such batches) and the rest of the batch goes to the cheaper;
        the probe's pairs keep the CPU's answers. The CPU is the fall-back of a GPU that runs out of memory."""
        start = time.perf_counter()
        engine = self.touched_engine()
        count = int(sources.size)
        if engine is None or count < max(self.min_pairs, self.min_touched_pairs):
            return cpu(np.arange(count)), Decision("cpu", "dfs", {}, time.perf_counter() - start)
        answers = np.zeros(count, dtype=np.bool_)
        sample = np.unique(np.linspace(0, count - 1, min(PROBE_PAIRS, count)).astype(np.int64))
        answers[sample] = cpu(sample)
        probe_seconds = time.perf_counter() - start
        rest = np.setdiff1d(np.arange(count), sample)
        passes = -(-rest.size // max(64, self._pass_pairs()))
        f = BatchFeatures(rest.size, passes, 0, 0, probe_seconds / sample.size, 0.0, 0.0)
        correction, hops = self._touched.get(f.signature(), (1.0, float(passes * HOP_FLOOR)))
        f = replace(f, hops=hops)
        gpu_raw = self.model.raw("frontier", f)
        predicted = {
            "cpu": self.model.raw("cpu", f) * self.model.correction("cpu"),
            "touched": gpu_raw * correction + build_size * TOUCHED_BUILD_SECONDS + self._gpu_wait(),
        }
        engine_name, mode = "cpu", "dfs"
        if rest.size and predicted["touched"] < predicted["cpu"]:
            try:
                result = engine.answer_touched(graph(), sources[rest], targets[rest])
            except MemoryError as error:
                log.warning("GPU search did not fit (%s); searching %d pairs on the CPU instead", error, rest.size)
            else:
                answers[rest] = result.answers
                engine_name, mode = result.engine, result.mode
                actual = max(result.seconds - result.upload_seconds, 1e-6)
                with self._lock:
                    old = self._touched.get(f.signature())
                    ratio = _blend(old[0] if old else None, actual / max(gpu_raw, 1e-9))
                    self._touched[f.signature()] = (ratio, _blend_value(old[1] if old else None, float(result.rounds)))
        if engine_name == "cpu" and rest.size:
            answers[rest] = cpu(rest)
        return answers, Decision(
            engine=engine_name,
            mode=mode,
            predicted=predicted,
            seconds=time.perf_counter() - start,
            probe_pairs=int(sample.size),
            probe_seconds=probe_seconds,
        )

    def touched_engine(self) -> Any:
        """The GPU engine that searches updated graphs (the first of a split one), or None."""
        engine = getattr(self.gpu, "engines", [self.gpu])[0]
        return engine if hasattr(engine, "answer_touched") else None

    def _recall(self, fresh: BatchFeatures) -> tuple[int, BatchFeatures | None]:
        """This batch's features (``fresh``: without a probe's) from the index's last probe of its kind, when
        that decision was clear and this is not a batch to probe again; else (0, None)."""
        signature = fresh.signature()
        with self._lock:
            memo = self._memo.get(signature)
            cpu_pair = self._cpu_pair.get(signature)
        if memo is None:
            return 0, None
        probe, margin, batches = memo
        if margin < CLEAR_MARGIN or (batches + 1) % REPROBE == 0:
            return 0, None
        return 0, replace(fresh, dfs_seconds=cpu_pair or probe.dfs_seconds, edges=probe.edges)

    def _gpu_wait(self) -> float:
        """Seconds until the GPU engines hold the index (0 once they do): a batch sent there waits for the
        copy under way."""
        engines = getattr(self.gpu, "engines", [self.gpu])
        return max((engine.ready_in() for engine in engines if hasattr(engine, "ready_in")), default=0.0)

    def _cpu_below_gpu_floor(self, fresh: BatchFeatures) -> float | None:
        """The CPU's predicted seconds when this index's earlier batches of this kind say it beats even a GPU
        call's fixed cost (no probe needed then), else None."""
        with self._lock:
            cpu_pair = self._cpu_pair.get(fresh.signature())
        if cpu_pair is None:
            return None
        cpu = self.model.raw("cpu", replace(fresh, dfs_seconds=cpu_pair)) * self.model.correction("cpu")
        floor = min(self.model.constants[kind][0] * self.model.correction(kind) for kind in GPU_MODES)
        return cpu if cpu < floor else None

    def _per_pair(self, seconds: float, pairs: int) -> float:
        """A full CPU search's time as the probe's figure: one thread's seconds per pair, before the scale."""
        return seconds * cpu_threads_used(pairs) / pairs / max(self.model.constants["cpu"][1], 1e-9)

    def _learn_cpu_pair(self, signature: tuple[int, int], per_pair: float) -> None:
        """Folds one batch's CPU search seconds per pair (one thread's worth) into the index's running figure
        for its kind of batch."""
        with self._lock:
            self._cpu_pair[signature] = _blend_value(self._cpu_pair.get(signature), per_pair)

    def _run(self, kind: str, sources: np.ndarray, targets: np.ndarray) -> SearchResult:
        if kind == "cpu" or self.gpu is None:
            return self.cpu.answer(sources, targets)
        try:
            return self.gpu.answer(sources, targets, kind)
        except MemoryError as error:
            log.warning("GPU search did not fit (%s); searching %d pairs on the CPU instead", error, sources.size)
            return self.cpu.answer(sources, targets)

    def _observe(self, result: SearchResult, f: BatchFeatures) -> None:
        """Folds the batch's actual time into the machine's and this index's figures."""
        kind = "cpu" if result.engine == "cpu" else result.mode
        if kind not in KINDS:
            return
        raw = self.model.raw(kind, f)
        # The one-time copy of the index to a device is not a cost of later batches.
        actual = max(result.seconds - result.upload_seconds, 1e-6)
        self.model.observe(kind, raw, actual)
        signature = f.signature()
        with self._lock:
            key = (kind, signature)
            ratio = actual / max(raw, 1e-9)
            self._corrections[key] = _blend(self._corrections.get(key), ratio)
            self._shared.discard(key)
            # The other GPU mode searches the same pairs of the same graph: until it runs here, what the
            # model misses about this one stands for it too.
            for other in GPU_MODES:
                shared = (other, signature)
                if kind in GPU_MODES and other != kind and (shared not in self._corrections or shared in self._shared):
                    self._corrections[shared] = self._corrections[key]
                    self._shared.add(shared)
            if kind == "frontier" and result.rounds:
                self._hops[signature] = _blend_value(self._hops.get(signature), float(result.rounds))
            if kind == "cpu" and f.pairs:
                self._cpu_pair[signature] = _blend_value(self._cpu_pair.get(signature), self._per_pair(actual, f.pairs))

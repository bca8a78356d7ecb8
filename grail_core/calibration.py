"""The search cost model's machine constants, fitted from runs of every engine on synthetic DAGs.

Layered DAGs of tens, hundreds and thousands of levels, and a wide one of a few levels (whose levels
sweep reads many nodes' flags), each with a batch of uniform pairs and one of short downward walks, at
three sizes: the CPU search, the GPU's levels sweep and its frontier queue each answer every batch (after
a warm-up run that compiles and uploads), and ``CostModel.fit`` takes the medians. Some seconds, once per
machine: the fitted constants are kept in the cache folder (``save_model``, ``load_model``: beside numba's
compiled code), keyed by what they were measured on, and a later process reads them at its start.
"""

from __future__ import annotations

import json
import logging
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from .engines import CpuEngine, SearchEngine
from .labels import Labels
from .names import NodeNames
from .query import UNDECIDED, HotArrays, filter_pairs, pack
from .readers.graph_input import GraphInput
from .scheduler import GPU_MODES, BatchFeatures, CostModel, Scheduler
from .synthetic import downward_walk_pairs, layered_dag

__all__ = ["WORKLOADS", "calibrate", "load_model", "model_path", "save_model"]

log = logging.getLogger(__name__)

# (nodes, levels) of the calibration DAGs, and pairs drawn per batch.
WORKLOADS = ((60_000, 16), (60_000, 400), (60_000, 4_000), (600_000, 6))
PAIRS = 200_000
PROBE = 256  # pairs probed per batch: more than a user batch's, for steadier features
FLOOR_PAIRS = 64  # pairs of the calls that measure a GPU call's fixed cost
RUNS = 3


def calibrate(
    model: CostModel, gpu_engine: Callable[[HotArrays], SearchEngine] | None = None, runs: int = RUNS
) -> list[tuple[str, BatchFeatures, float]]:
    """Runs every engine on the calibration batches and fits ``model``; returns the (kind, features,
    seconds) samples. ``gpu_engine`` makes a GPU engine for an index (None: the CPU alone is fitted)."""
    started = time.perf_counter()
    samples: list[tuple[str, BatchFeatures, float]] = []
    floors: dict[str, float] = {}
    for nodes, levels in WORKLOADS:
        indptr, indices = layered_dag(nodes, levels, seed=levels)
        src = np.repeat(np.arange(nodes, dtype=np.int64), np.diff(indptr))
        graph = GraphInput(nodes, src, indices.astype(np.int64), NodeNames.identity(nodes), "arrays")
        labels = Labels.build(graph, backend="cpu")
        hot = pack(labels.arrays)
        cpu = CpuEngine(hot)
        gpu = gpu_engine(hot) if gpu_engine is not None else None
        scheduler = Scheduler(hot, cpu, gpu, pass_pairs=getattr(gpu, "pass_pairs", None))
        rng = np.random.default_rng(levels)
        batches = (
            rng.integers(0, nodes, size=(PAIRS, 2)),
            np.stack(downward_walk_pairs(indptr, indices, PAIRS, seed=levels), axis=1),
        )
        try:
            for pairs in batches:
                comp = labels.arrays.comp
                undecided = np.flatnonzero(filter_pairs(hot, pairs) == UNDECIDED)
                sources, targets = comp[pairs[undecided, 0]], comp[pairs[undecided, 1]]
                for size in (sources.size, sources.size // 8, sources.size // 64):
                    samples += _measure(scheduler, cpu, gpu, sources[:size], targets[:size], runs)
                if gpu is not None and not floors:  # the shallowest DAG's first batch
                    floors = _floors(gpu, sources[:FLOOR_PAIRS], targets[:FLOOR_PAIRS], runs)
        finally:
            if gpu is not None:
                gpu.release()
    model.fit(samples, floors)
    log.info("search cost model fitted in %.1f s: %s", time.perf_counter() - started, model)
    return samples


def _floors(gpu: Any, sources: np.ndarray, targets: np.ndarray, runs: int) -> dict[str, float]:
    """Each GPU mode's seconds for a call of a few pairs: its fixed cost, which a small batch pays alone."""
    floors = {}
    for mode in GPU_MODES:
        gpu.answer(sources, targets, mode)
        floors[mode] = statistics.median(_timed(partial(gpu.answer, sources, targets, mode)) for _ in range(3 * runs))
    return floors


def _measure(
    scheduler: Scheduler, cpu: CpuEngine, gpu: Any, sources: np.ndarray, targets: np.ndarray, runs: int
) -> list[tuple[str, BatchFeatures, float]]:
    if sources.size < 2 * PROBE:
        return []
    _probed, features = scheduler.look(sources, targets, PROBE, budget=float("inf"))
    kinds: list[tuple[str, Callable[[], Any]]] = [("cpu", lambda: cpu.answer(sources, targets))]
    if gpu is not None:
        kinds += [(mode, partial(gpu.answer, sources, targets, mode)) for mode in GPU_MODES]
    measured = []
    for kind, run in kinds:
        first = run()  # compiles, uploads the index, sizes the buffers
        seconds = statistics.median(_timed(run) for _ in range(runs))
        # A frontier pass's hops: what the scheduler remembers of an index after its first frontier run.
        hops = float(first.longest) if kind == "frontier" else features.hops
        measured.append((kind, replace(features, hops=hops), seconds))
    return measured


def _timed(run: Callable[[], Any]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def model_path() -> Path:
    """Where a machine's fitted constants are kept: numba's cache folder (``NUMBA_CACHE_DIR``), else the
    user's cache folder."""
    folder = (
        os.environ.get("NUMBA_CACHE_DIR") or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "grail"
    )
    return Path(folder) / "search-cost-model.json"


def save_model(model: CostModel, key: dict[str, Any]) -> None:
    """Keeps ``model``'s fitted constants for the machine ``key`` describes (written whole, then renamed)."""
    path = model_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        kept = {"key": key, "constants": {kind: list(values) for kind, values in model.constants.items()}}
        temporary = path.with_suffix(f".{os.getpid()}.tmp")
        temporary.write_text(json.dumps(kept))
        temporary.replace(path)
    except OSError as error:
        log.warning("could not keep the search cost model in %s: %s", path, error)


def load_model(model: CostModel, key: dict[str, Any]) -> bool:
    """Sets ``model``'s constants from the kept fit of the machine ``key`` describes; False when there is none."""
    try:
        kept = json.loads(model_path().read_text())
    except (OSError, ValueError):
        return False
    constants = kept.get("constants", {}) if kept.get("key") == key else {}
    if set(constants) != set(model.constants) or any(
        len(constants[kind]) != len(model.constants[kind]) for kind in constants
    ):
        return False
    model.constants = {kind: tuple(float(v) for v in values) for kind, values in constants.items()}
    model.corrections.clear()
    model.fitted = True
    return True

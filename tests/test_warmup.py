"""After ``warm_up``, a build and the queries compile nothing: no numba kernel gets a new specialization."""

from __future__ import annotations

import importlib
import pkgutil

import numpy as np
from numba.core.registry import CPUDispatcher

import grail_core
from grail_core import ReachabilityIndex
from grail_core.warmup import warm_up


def _compiled() -> dict[str, int]:
    """Specializations of every numba kernel in grail_core, by qualified name."""
    counts = {}
    for module_info in pkgutil.walk_packages(grail_core.__path__, "grail_core."):
        module = importlib.import_module(module_info.name)
        for name, value in vars(module).items():
            if isinstance(value, CPUDispatcher) and value.__module__ == module.__name__:
                counts[f"{module.__name__}.{name}"] = len(value.signatures)
    return counts


def test_nothing_compiles_after_the_warm_up(tmp_path) -> None:
    warm_up("cpu")
    before = _compiled()
    rng = np.random.default_rng(0)
    for dtype in (np.int64, np.int32):
        src = rng.integers(0, 20_000, 120_000).astype(dtype)
        dst = rng.integers(0, 20_000, 120_000).astype(dtype)
        index = ReachabilityIndex.from_edges(src, dst, backend="cpu", dims=3)
        index.query_batch(rng.integers(0, 20_000, (5000, 2)))
        index.reachable(1, 2)
    index.save(tmp_path / "index")
    loaded = ReachabilityIndex.load(tmp_path / "index")
    loaded.query_batch(rng.integers(0, 20_000, (5000, 2)))
    assert _compiled() == before

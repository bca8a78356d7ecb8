"""After ``warm_up``, a build and the queries compile nothing: no numba kernel gets a new specialization.

Checked in a fresh process: in the test process, earlier tests have compiled kernels already.
"""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import REPO_ROOT

_CHECK = """
import importlib, json, pkgutil, sys, tempfile
from pathlib import Path
import numpy as np
from numba.core.registry import CPUDispatcher
import grail_core
from grail_core import ReachabilityIndex
from grail_core.warmup import warm_up

def compiled():
    counts = {}
    for info in pkgutil.walk_packages(grail_core.__path__, "grail_core."):
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if isinstance(value, CPUDispatcher) and value.__module__ == module.__name__:
                counts[module.__name__ + "." + name] = [str(s) for s in value.signatures]
    return counts

warm_up("cpu")
before = compiled()
rng = np.random.default_rng(0)
for dtype in (np.int64, np.int32):
    # A random graph, and a hub with 30,000 children (a long row for the child orders).
    src = np.concatenate([rng.integers(0, 20_000, 120_000), np.full(30_000, 7)]).astype(dtype)
    dst = np.concatenate([rng.integers(0, 20_000, 120_000), np.arange(20_000, 50_000)]).astype(dtype)
    index = ReachabilityIndex.from_edges(src, dst, backend="cpu", dims=3)
    index.query_batch(rng.integers(0, 20_000, (5000, 2)))
    index.reachable(1, 2)
with tempfile.TemporaryDirectory() as folder:
    index.save(Path(folder) / "index")
    loaded = ReachabilityIndex.load(Path(folder) / "index")
    loaded.query_batch(rng.integers(0, 20_000, (5000, 2)))
after = compiled()
new = {name: sorted(set(after[name]) - set(before.get(name, []))) for name in after}
print(json.dumps({name: signatures for name, signatures in new.items() if signatures}))
"""


def test_nothing_compiles_after_the_warm_up() -> None:
    done = subprocess.run([sys.executable, "-c", _CHECK], capture_output=True, text=True, cwd=REPO_ROOT, check=True)
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {}

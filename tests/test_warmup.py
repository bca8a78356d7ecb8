"""After ``warm_up``, a build and the queries compile nothing: no numba kernel gets a new specialization; after
the service's whole warm-up, neither do updates and the batches on a version with updates.

Checked in a fresh process: in the test process, earlier tests have compiled kernels already.
"""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import REPO_ROOT

_COMPILED = """
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

"""

_NEW = """
new = {name: sorted(set(after[name]) - set(before.get(name, []))) for name in after}
print(json.dumps({name: signatures for name, signatures in new.items() if signatures}))
"""

_CHECK = (
    _COMPILED
    + """
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
"""
    + _NEW
)

# After the service's whole warm-up: a random graph with cycles under a stream of updates (additions, removals
# inside components and between them), and a deep DAG with hundreds of edges added and removed; then on each,
# batches on numba's threads (on the DAG, pairs across the order for crossing's threads) and single pairs.
_CHECK_UPDATES = (
    _COMPILED
    + """
from service.warmup import warm_up as warm_up_service, warm_up_beyond
from grail_core.synthetic import layered_dag
warm_up_service("cpu")
warm_up_beyond()
ReachabilityIndex.auto_rebuild = False  # the batches must run on the versions with updates
before = compiled()
rng = np.random.default_rng(1)
n = 3_000
src, dst = rng.integers(0, n, 9_000), rng.integers(0, n, 9_000)
cyclic = ReachabilityIndex.from_edges(src, dst, num_nodes=n, backend="cpu")
for step in range(30):
    k = int(rng.integers(0, src.size))
    if step % 2:
        cyclic.update(remove=[[int(src[k]), int(dst[k])]])
    else:
        cyclic.update(add=[[int(rng.integers(0, n)), int(rng.integers(0, n))]])
indptr, dag_dst = layered_dag(n, 700, 3.0, 4, seed=5)
dag_src = np.repeat(np.arange(n), np.diff(indptr))
deep = ReachabilityIndex.from_edges(dag_src, dag_dst, num_nodes=n, backend="cpu")
deep.update(add=rng.integers(0, n, (500, 2)).tolist())
removed = rng.choice(dag_src.size, 150, replace=False)
deep.update(remove=np.column_stack([dag_src[removed], dag_dst[removed]]).tolist())
comp = deep.current().labels.views.forward().comp
last = np.flatnonzero(comp >= comp.max() - 100)
across = np.column_stack([rng.choice(last, 3_000), rng.integers(0, n, 3_000)])
for index in (cyclic, deep):
    for pairs in (rng.integers(0, n, (5_000, 2)), across):
        index.query_batch(pairs)
        index.reachable(int(pairs[0, 0]), int(pairs[0, 1]))
after = compiled()
print(json.dumps(len(after["grail_core.dynamic._cross_parallel"])))
"""
    + _NEW
)


def test_nothing_compiles_after_the_warm_up() -> None:
    done = subprocess.run([sys.executable, "-c", _CHECK], capture_output=True, text=True, cwd=REPO_ROOT, check=True)
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {}


def test_nothing_compiles_after_the_warm_up_on_a_graph_with_updates() -> None:
    """The service's whole warm-up (``/ready``'s, then ``warm_up_beyond``'s) leaves nothing of the updates'
    path to compile: a stream of updates, then batches on numba's threads and single pairs."""
    done = subprocess.run(
        [sys.executable, "-c", _CHECK_UPDATES], capture_output=True, text=True, cwd=REPO_ROOT, check=True
    )
    crossed, new = (json.loads(line) for line in done.stdout.strip().splitlines()[-2:])
    assert crossed and new == {}  # crossing ran on the threads, and compiled nothing new

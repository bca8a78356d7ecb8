"""Seeded generators of large graphs for the GPU benchmarks, as CSR (DAGs with topological ids: u -> v, u < v).

* ``uniprot_like``: many roots, few levels, one huge sink (uniprotenc's shape): 25M nodes, 50M edges.
* ``citation_like``: every paper cites earlier ones, preferring the most cited (preferential
  attachment through a citation-copying model): 4M nodes, 17M edges, 57 levels.
* ``layered_3k``: 2M nodes in 3,000 layers, ~3 edges a node into the next few layers (a deep DAG).
* ``deep_340k``: 3M nodes in 340,000 layers, the same way (~9 nodes a level: deep and sparse).
* ``rmat``: an R-MAT graph (a, b, c = 0.57, 0.19, 0.19) of 2M nodes and 16M edges, ids shuffled: cycles,
  a giant strongly connected component, self loops; not a DAG (the benchmark condenses it).
* ``chain``: a path of 1M nodes (1M levels, the deep-graph extreme).

Edges are de-duplicated and rows sorted; the child orders of a benchmark come from
``grail_core.labeling.make_child_orders`` as for real graphs. Pair batches: ``downward_walk_pairs``
(80% pairs from short random walks, so reachable, the rest uniform) and uniform pairs.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from grail_core.synthetic import csr_from_edges as _csr
from grail_core.synthetic import downward_walk_pairs, layered_dag

__all__ = [
    "DAGS",
    "GENERATORS",
    "chain",
    "citation_like",
    "downward_walk_pairs",
    "generate",
    "layered_dag",
    "rmat",
    "uniprot_like",
]


def uniprot_like(nodes: int = 25_000_000, edges: int = 50_000_000, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Layers of 60% / 30% / 9.6% / 0.4% of the nodes and a single sink.

    Every non-sink node has out-degree ~2 into later layers, skewed towards popular targets (a power
    law over the target layer), and ~6% of all edges go straight to the sink, whose in-degree is in
    the millions as in uniprotenc (1.5M there).
    """
    rng = np.random.default_rng(seed)
    shares = np.array([0.6, 0.3, 0.096])
    sizes = np.floor(shares * nodes).astype(np.int64)
    sizes = np.append(sizes, nodes - 1 - sizes.sum())
    starts = np.concatenate([[0], np.cumsum(sizes)])  # layer i is [starts[i], starts[i+1]); sink = nodes-1
    sink = nodes - 1
    per_node = edges / (nodes - 1)
    src = np.repeat(np.arange(nodes - 1, dtype=np.int64), rng.poisson(per_node, nodes - 1).clip(1, None))
    layer = np.searchsorted(starts, src, side="right") - 1
    u = rng.random(src.size)
    to_sink = (rng.random(src.size) < 0.06) | (layer == 3)
    # Next layer mostly, sometimes two layers down; a power of u makes low ids of a layer popular.
    jump = np.minimum(layer + 1 + (rng.random(src.size) < 0.2), 3)
    lo, hi = starts[jump], starts[jump + 1]
    dst = lo + ((hi - lo) * u**3).astype(np.int64)
    dst = np.where(to_sink, sink, dst)
    return _csr(nodes, src, dst)


def citation_like(nodes: int = 4_000_000, edges: int = 17_000_000, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Paper t cites ~edges/nodes earlier papers: half uniformly, half by copying a citation of a cited one.

    Copying a random citation of an already cited paper is preferential attachment (a paper is copied
    in proportion to its citations). Paper t gets id ``nodes - 1 - t``, so citations go to higher ids.
    """
    rng = np.random.default_rng(seed)
    per_node = edges / nodes
    citing = np.repeat(np.arange(1, nodes, dtype=np.int64), rng.poisson(per_node * 1.05, nodes - 1).clip(1, None))
    cited = (citing * rng.random(citing.size) ** 1.5).astype(np.int64)
    # One copying round: a cited paper's own first citation stands in for it, half of the time.
    order = np.argsort(citing, kind="stable")
    first = np.full(nodes, -1, dtype=np.int64)
    firsts = np.unique(citing[order], return_index=True)
    first[firsts[0]] = cited[order][firsts[1]]
    copy = (rng.random(citing.size) < 0.5) & (first[cited] >= 0)
    cited = np.where(copy, first[cited], cited)
    ids_src = nodes - 1 - citing
    ids_dst = nodes - 1 - cited
    return _csr(nodes, ids_src, ids_dst)


def chain(nodes: int = 1_000_000) -> tuple[np.ndarray, np.ndarray]:
    """0 -> 1 -> ... -> nodes-1."""
    indptr = np.minimum(np.arange(nodes + 1, dtype=np.int64), nodes - 1)
    return indptr, np.arange(1, nodes, dtype=np.int32)


def rmat(
    nodes: int = 1 << 21, edges: int = 16_000_000, a: float = 0.57, b: float = 0.19, c: float = 0.19, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """R-MAT (Chakrabarti, Zhan and Faloutsos 2004): each edge picks a quadrant of the adjacency matrix per
    bit of the ids, (a, b, c, 1 - a - b - c) for (top left, top right, bottom left, bottom right); ids
    above ``nodes`` wrap, and all are shuffled so that degree does not follow the id."""
    rng = np.random.default_rng(seed)
    bits = max(1, int(np.ceil(np.log2(nodes))))
    src = np.zeros(edges, dtype=np.int64)
    dst = np.zeros(edges, dtype=np.int64)
    for bit in range(bits):
        draw = rng.random(edges)
        src |= (draw >= a + b).astype(np.int64) << bit
        dst |= (((draw >= a) & (draw < a + b)) | (draw >= a + b + c)).astype(np.int64) << bit
    shuffle = rng.permutation(nodes)
    return _csr(nodes, shuffle[src % nodes], shuffle[dst % nodes])


# Name -> (generator, its default size arguments); --scale multiplies nodes and edges, not levels.
GENERATORS = {
    "uniprot_like": (uniprot_like, {"nodes": 25_000_000, "edges": 50_000_000}),
    "citation_like": (citation_like, {"nodes": 4_000_000, "edges": 17_000_000}),
    "layered_3k": (layered_dag, {"nodes": 2_000_000, "levels": 3_000}),
    "deep_340k": (layered_dag, {"nodes": 3_000_000, "levels": 340_000}),
    "rmat": (rmat, {"nodes": 1 << 21, "edges": 16_000_000}),
    "chain": (chain, {"nodes": 1_000_000}),
}
DAGS = ("uniprot_like", "citation_like", "layered_3k", "deep_340k", "chain")  # topological ids, no cycles


def generate(name: str, scale: float = 1.0, cache: Path | None = None) -> tuple[np.ndarray, np.ndarray]:
    """CSR of a generated graph at ``scale`` times its default size, kept as .npy files in ``cache`` if given."""
    function, defaults = GENERATORS[name]
    sizes = {key: int(value * scale) if key in ("nodes", "edges") else value for key, value in defaults.items()}
    stem = f"{name}-{sizes['nodes']}"
    files = (cache / f"{stem}-indptr.npy", cache / f"{stem}-indices.npy") if cache else None
    if files and files[0].exists() and files[1].exists():
        return np.load(files[0]), np.load(files[1])
    indptr, indices = function(**sizes)
    if files:
        cache.mkdir(parents=True, exist_ok=True)
        np.save(files[0], indptr)
        np.save(files[1], indices)
    return indptr, indices


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("graph", choices=sorted(GENERATORS))
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of the default size")
    args = parser.parse_args()
    indptr, indices = generate(args.graph, args.scale)
    print(f"{args.graph}: {indptr.size - 1} nodes, {indices.size} edges")


if __name__ == "__main__":
    main()

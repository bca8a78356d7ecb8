"""Seeded generators of large DAGs for the GPU benchmarks, as CSR with topological ids (u -> v: u < v).

* ``uniprot_like``: many roots, few levels, one huge sink (uniprotenc's shape): 25M nodes, 50M edges.
* ``citation_like``: every paper cites earlier ones, preferring the most cited (preferential
  attachment through a citation-copying model): 4M nodes, 17M edges.
* ``chain``: a path of 1M nodes (1M levels, the deep-graph extreme).

``rmat_edges`` gives raw edge arrays instead (cycles, self loops and duplicate edges included), for the
build benchmark.

Edges are de-duplicated and rows sorted; the child orders of a benchmark come from
``grail_core.labeling.make_child_orders`` as for real graphs.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from numba import njit, prange

__all__ = [
    "DEFAULT_SIZES",
    "GENERATORS",
    "chain",
    "citation_like",
    "generate",
    "positive_heavy_pairs",
    "rmat_edges",
    "uniprot_like",
]


def _csr(n: int, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """CSR of distinct edges (int64 indptr, int32 indices), rows sorted."""
    keys = np.unique(src.astype(np.int64) * n + dst.astype(np.int64))
    rows = keys // n
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n), out=indptr[1:])
    return indptr, (keys % n).astype(np.int32)


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


@njit(inline="always")
def _mix(z):
    # splitmix64's finalizer: one independent 64-bit draw per (edge, level).
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@njit(parallel=True, cache=True)
def _rmat(scale, edges, seed, a, ab, abc, permutation, src, dst):
    # A quadrant per level from 16 bits of a 64-bit draw: four levels a draw.
    for i in prange(edges):
        u = 0
        v = 0
        base = np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(i) * np.uint64(scale)
        bits = np.uint64(0)
        for level in range(scale):
            if level % 4 == 0:
                bits = _mix(base + np.uint64(level))
            draw = np.int64(bits & np.uint64(0xFFFF))
            bits >>= np.uint64(16)
            u <<= 1
            v <<= 1
            if draw >= a:
                if draw < ab:
                    v += 1
                elif draw < abc:
                    u += 1
                else:
                    u += 1
                    v += 1
        src[i] = permutation[u]
        dst[i] = permutation[v]


def rmat_edges(
    scale: int, edges: int, seed: int = 0, probabilities: tuple[float, float, float] = (0.57, 0.19, 0.19)
) -> tuple[np.ndarray, np.ndarray]:
    """R-MAT edges (Chakrabarti et al.; Graph500's a, b, c) over 2**scale nodes, ids randomly permuted.

    Directed, so the graph has a giant strongly connected component, many small ones and many nodes
    with no edge at all; self loops and duplicate edges are kept. int32 ids.
    """
    a, b, c = (round(float(p) * 65536) for p in np.cumsum(probabilities))
    permutation = np.random.default_rng(seed).permutation(1 << scale).astype(np.int32)
    src = np.empty(edges, dtype=np.int32)
    dst = np.empty(edges, dtype=np.int32)
    _rmat(scale, edges, seed, a, b, c, permutation, src, dst)
    return src, dst


GENERATORS = {"uniprot_like": uniprot_like, "citation_like": citation_like, "chain": chain}
DEFAULT_SIZES = {
    "uniprot_like": (25_000_000, 50_000_000),
    "citation_like": (4_000_000, 17_000_000),
    "chain": (1_000_000, 999_999),
}


def generate(name: str, scale: float = 1.0, cache: Path | None = None) -> tuple[np.ndarray, np.ndarray]:
    """CSR of a generated graph at ``scale`` times its default size, kept as .npy files in ``cache`` if given."""
    nodes, edges = (int(x * scale) for x in DEFAULT_SIZES[name])
    files = (cache / f"{name}-{nodes}-indptr.npy", cache / f"{name}-{nodes}-indices.npy") if cache else None
    if files and files[0].exists() and files[1].exists():
        return np.load(files[0]), np.load(files[1])
    indptr, indices = chain(nodes) if name == "chain" else GENERATORS[name](nodes, edges)
    if files:
        cache.mkdir(parents=True, exist_ok=True)
        np.save(files[0], indptr)
        np.save(files[1], indices)
    return indptr, indices


def positive_heavy_pairs(
    indptr: np.ndarray, indices: np.ndarray, count: int, positive_share: float = 0.8, max_steps: int = 8, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """``count`` (source, target) pairs: a share from random downward walks (reachable), the rest uniform."""
    rng = np.random.default_rng(seed)
    n = indptr.size - 1
    walks = int(count * positive_share)
    degree = np.diff(indptr)
    sources = rng.choice(np.flatnonzero(degree > 0), size=walks)
    current = sources.copy()
    steps = rng.integers(1, max_steps + 1, size=walks)
    for step in range(max_steps):
        active = (steps > step) & (degree[current] > 0)
        pick = indptr[current[active]] + (rng.random(int(active.sum())) * degree[current[active]]).astype(np.int64)
        current[active] = indices[pick]
    random_src = rng.integers(0, n, size=count - walks)
    random_dst = rng.integers(0, n, size=count - walks)
    keep = sources != current
    return (
        np.concatenate([sources[keep], random_src]).astype(np.int64),
        np.concatenate([current[keep], random_dst]).astype(np.int64),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("graph", choices=sorted(GENERATORS))
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of the default size")
    args = parser.parse_args()
    indptr, indices = generate(args.graph, args.scale)
    print(f"{args.graph}: {indptr.size - 1} nodes, {indices.size} edges")


if __name__ == "__main__":
    main()

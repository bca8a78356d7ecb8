"""Seeded generators of large graphs for the GPU benchmarks, as CSR (DAGs with topological ids: u -> v, u < v).

* ``uniprot_like``: many roots, few levels, one huge sink (uniprotenc's shape): 25M nodes, 50M edges.
* ``citation_like``: every paper cites earlier ones, preferring the most cited (preferential
  attachment through a citation-copying model): 4M nodes, 17M edges, 57 levels.
* ``layered_3k``: 2M nodes in 3,000 layers, ~3 edges a node into the next few layers (a deep DAG).
* ``deep_340k``: 3M nodes in 340,000 layers, the same way (~9 nodes a level: deep and sparse).
* ``rmat``: an R-MAT graph (a, b, c = 0.57, 0.19, 0.19) of 2M nodes and 16M edges, ids shuffled: cycles,
  a giant strongly connected component, self loops; not a DAG (the benchmark condenses it).
* ``chain``: a path of 1M nodes (1M levels, the deep-graph extreme).

``rmat_edges`` gives raw edge arrays instead (cycles, self loops and duplicate edges included), for the
build benchmark.

Edges are de-duplicated and rows sorted; the child orders of a benchmark come from
``grail_core.labeling.make_child_orders`` as for real graphs. Pair batches: ``downward_walk_pairs``
(80% pairs from short random walks, so reachable, the rest uniform) and uniform pairs.

Named graphs, for the name lookups (edge lists, as users upload them):

* ``package_graph``: ~60k nodes named like Debian packages (``libfoo-bar2-dev``, ``python3-baz``, ...),
  dependencies drawn towards popular packages, a few of them circular.
* ``rmat_edge_list``: ``rmat_edges`` with ``sparse_names``, nodes named by random 40-bit integers.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from numba import njit, prange

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
    "package_names",
    "package_graph",
    "rmat_edges",
    "sparse_names",
    "edge_list_text",
    "package_edge_list",
    "rmat_edge_list",
    "NAMED_GRAPHS",
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


def rmat(nodes: int = 1 << 21, edges: int = 16_000_000, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``rmat_edges`` over the bits of ``nodes`` as CSR (duplicates and self loops removed later by the build,
    here by ``_csr``); ids at or above ``nodes`` wrap."""
    src, dst = rmat_edges(max(1, int(np.ceil(np.log2(nodes)))), edges, seed)
    return _csr(nodes, src % nodes, dst % nodes)


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


_SYLLABLES = (
    "ab ac ad al am an ap ar as at av ba be bi bo bu ca ce ci co cu da de di do du el em en er es ex fa fe fi fo ga "
    "ge gi go gu ha he hi ho id il im in ir is ja jo ka ke ki ko la le li lo lu ma me mi mo mu na ne ni no nu ob "
    "od ol om on op or os ot pa pe pi po pu qu ra re ri ro ru sa se si so su ta te ti to tu ul um un ur us va ve "
    "vi vo wa we wi xa xe ya yo za ze zi zo"
).split()
_PREFIXES = ("", "", "", "lib", "lib", "python3-", "r-cran-", "golang-github-", "node-", "ruby-", "fonts-", "gir1.2-")
_SUFFIXES = ("", "", "", "", "-dev", "-doc", "-common", "-data", "-bin", "-utils", "-dbg", "-tools")


def package_names(count: int, seed: int = 0) -> list[str]:
    """``count`` distinct names shaped like Debian package names (5 to ~60 bytes, ASCII)."""
    rng = np.random.default_rng(seed)
    names: dict[str, None] = {}
    while len(names) < count:
        todo = 2 * (count - len(names))
        syllables = rng.integers(0, len(_SYLLABLES), size=(todo, 6))
        lengths = rng.integers(2, 7, size=todo)
        parts = rng.integers(1, 4, size=todo)
        prefixes = rng.integers(0, len(_PREFIXES), size=todo)
        suffixes = rng.integers(0, len(_SUFFIXES), size=todo)
        versions = rng.integers(-8, 10, size=todo)
        for k in range(todo):
            word = "".join(_SYLLABLES[s] for s in syllables[k, : lengths[k]])
            if parts[k] > 1:  # a second word, as in libxml-parser or python3-foo-bar
                cut = 2 * (lengths[k] // parts[k])
                word = word[:cut] + "-" + word[cut:] if 0 < cut < len(word) else word
            version = str(versions[k]) if versions[k] > 0 else ""
            names[f"{_PREFIXES[prefixes[k]]}{word}{version}{_SUFFIXES[suffixes[k]]}"] = None
    return list(names)[:count]


def package_graph(nodes: int = 60_000, edges: int = 250_000, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Dependencies among ``nodes`` packages: each depends on a few packages drawn by a power law over a
    popularity order (libc-like packages are depended on by thousands); 1% of the edges point the other
    way, so that some packages depend on each other in cycles. Node ids index ``package_names``."""
    rng = np.random.default_rng(seed)
    popularity = rng.permutation(nodes)
    src = rng.integers(0, nodes, size=edges)
    rank = np.minimum((nodes * rng.random(edges) ** 3).astype(np.int64), nodes - 1)
    dst = popularity[rank]
    flip = rng.random(edges) < 0.01
    src, dst = np.where(flip, dst, src), np.where(flip, src, dst)
    keep = src != dst
    return src[keep], dst[keep]


def sparse_names(count: int, seed: int = 0, bits: int = 40) -> np.ndarray:
    """``count`` distinct random non-negative integers below 2**bits, in random order (database-like ids)."""
    rng = np.random.default_rng(seed)
    names = np.unique(rng.integers(0, 2**bits, size=count + count // 8 + 16))
    while names.size < count:
        names = np.unique(np.concatenate([names, rng.integers(0, 2**bits, size=count)]))
    return rng.permutation(names)[:count]


def edge_list_text(src_names: Sequence[object], dst_names: Sequence[object]) -> bytes:
    """'u v' lines."""
    return "".join(f"{u} {v}\n" for u, v in zip(src_names, dst_names, strict=True)).encode()


def package_edge_list(nodes: int = 60_000, edges: int = 250_000, seed: int = 0) -> bytes:
    """``package_graph`` as an edge list of its names."""
    names = np.array(package_names(nodes, seed), dtype=object)
    src, dst = package_graph(nodes, edges, seed)
    return edge_list_text(names[src], names[dst])


def rmat_edge_list(scale: int = 21, edges: int = 2_000_000, seed: int = 0) -> bytes:
    """``rmat_edges`` as an edge list of sparse 40-bit integer names."""
    src, dst = rmat_edges(scale, edges, seed)
    names = sparse_names(2**scale, seed)
    return edge_list_text(names[src], names[dst])


# Edge lists with node names, as users upload them.
NAMED_GRAPHS = {
    "packages": ("packages (string names)", package_edge_list),
    "rmat": ("R-MAT 2M edges (sparse integer names)", rmat_edge_list),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("graph", choices=sorted(GENERATORS))
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of the default size")
    args = parser.parse_args()
    indptr, indices = generate(args.graph, args.scale)
    print(f"{args.graph}: {indptr.size - 1} nodes, {indices.size} edges")


if __name__ == "__main__":
    main()

"""Seeded test graphs with query sets and brute-force answers, written in the shared datasets' file layout
(``NAME.gra``, ``NAME.que``/``NAME.ans`` random pairs, ``NAME.pos.que``/``NAME.pos.ans`` mostly reachable pairs),
so that the service tests need nothing beside the repository.

* ``dag``: a sparse DAG of a few thousand nodes with some isolated ones (the shape of the KEGG graphs).
* ``cyclic``: a small dense graph with cycles, self loops, duplicate edges and isolated nodes.
* ``big``: hundreds of thousands of nodes with cycles, whose build takes seconds on two cores (for tests that
  must catch a build in progress).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tests.reference import reachable_pairs

__all__ = ["GeneratedGraph", "GENERATORS", "generate", "write_gra"]


@dataclass(frozen=True)
class GeneratedGraph:
    name: str
    num_nodes: int
    edges: np.ndarray  # (m, 2) int64, as written to the .gra file (duplicates and self loops included)
    pairs: np.ndarray  # random pairs
    answers: np.ndarray
    positive_pairs: np.ndarray  # pairs found by walking edges: mostly reachable, some not (after a reversal)
    positive_answers: np.ndarray

    def write(self, folder: Path) -> None:
        write_gra(folder / f"{self.name}.gra", self.num_nodes, self.edges)
        for stem, pairs, answers in (
            (self.name, self.pairs, self.answers),
            (f"{self.name}.pos", self.positive_pairs, self.positive_answers),
        ):
            np.savetxt(folder / f"{stem}.que", pairs, fmt="%d")
            np.savetxt(folder / f"{stem}.ans", answers.astype(np.int64), fmt="%d")


def write_gra(path: Path, num_nodes: int, edges: np.ndarray) -> None:
    """GRAIL's format: ``graph_for_greach``, the node count, then ``i: children #`` for every node."""
    order = np.argsort(edges[:, 0], kind="stable")
    indptr = np.searchsorted(edges[order, 0], np.arange(num_nodes + 1))
    # One token list for the whole file, joined once: "i:", the children, "#\n" per node.
    tokens = np.empty(len(edges) + 2 * num_nodes, dtype=object)
    label_at = indptr[:-1] + 2 * np.arange(num_nodes)
    end_at = indptr[1:] + 2 * np.arange(num_nodes) + 1
    is_child = np.ones(tokens.size, dtype=bool)
    is_child[label_at] = is_child[end_at] = False
    tokens[label_at] = [f"{i}:" for i in range(num_nodes)]
    tokens[end_at] = "#\n"
    tokens[is_child] = edges[order, 1].astype(str).tolist()
    body = " ".join(tokens.tolist()).replace("\n ", "\n")
    path.write_text(f"graph_for_greach\n{num_nodes}\n{body}")


def _walk_pairs(rng: np.random.Generator, num_nodes: int, edges: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Pairs (u, v) where v is up to 8 random edges away from u (a node without children stays where it is);
    a tenth have their ends swapped."""
    order = np.argsort(edges[:, 0], kind="stable")
    src, dst = edges[order, 0], edges[order, 1]
    indptr = np.searchsorted(src, np.arange(num_nodes + 1))
    current = starts.copy()
    for _ in range(8):
        degree = indptr[current + 1] - indptr[current]
        moving = degree > 0
        pick = indptr[current[moving]] + (rng.random(int(moving.sum())) * degree[moving]).astype(np.int64)
        current[moving] = dst[pick]
    pairs = np.column_stack([starts, current])
    swap = rng.random(len(pairs)) < 0.1
    pairs[swap] = pairs[swap, ::-1]
    return pairs


def _finish(
    name: str, rng: np.random.Generator, num_nodes: int, edges: np.ndarray, count: int, sources: int
) -> GeneratedGraph:
    """Shuffled node names (no answer can come from the generator's id order) and two query sets whose pairs
    start at the same ``sources`` distinct nodes (the brute force costs one search per 64 of them)."""
    edges = rng.permutation(num_nodes)[edges]
    pool = rng.choice(num_nodes, size=sources, replace=False)
    pairs = np.column_stack([rng.choice(pool, count), rng.integers(0, num_nodes, size=count)])
    positive = _walk_pairs(rng, num_nodes, edges, rng.choice(pool, count))
    answers = reachable_pairs(num_nodes, edges, np.concatenate([pairs, positive]))
    return GeneratedGraph(name, num_nodes, edges, pairs, answers[:count], positive, answers[count:])


def dag(seed: int = 1, count: int = 10_000) -> GeneratedGraph:
    """3,600 nodes, ~4,000 edges from lower to higher ids, mostly short jumps (a few dozen levels); 2% isolated."""
    rng = np.random.default_rng(seed)
    n = 3600
    connected = n - n // 50
    src = rng.integers(0, connected - 1, size=4200)
    dst = np.minimum(src + 1 + rng.geometric(0.02, size=src.size), connected - 1)
    edges = np.unique(np.column_stack([src, dst]), axis=0)
    return _finish("dag", rng, n, edges, count, sources=n)


def cyclic(seed: int = 2, count: int = 10_000) -> GeneratedGraph:
    """1,000 nodes, 2,500 random edges (cycles everywhere), self loops, duplicates, 3% isolated nodes."""
    rng = np.random.default_rng(seed)
    n = 1000
    connected = n - 30
    edges = rng.integers(0, connected, size=(2500, 2))
    loops = rng.integers(0, connected, size=20)
    edges = np.concatenate([edges, np.column_stack([loops, loops]), edges[:40]])
    return _finish("cyclic", rng, n, edges, count, sources=n)


def big(seed: int = 3, count: int = 2000) -> GeneratedGraph:
    """600,000 nodes and ~1.2M edges: forward edges of mixed lengths and a few backward ones (cycles)."""
    rng = np.random.default_rng(seed)
    n = 600_000
    src = rng.integers(0, n - 1, size=1_200_000)
    dst = np.minimum(src + 1 + rng.geometric(1e-4, size=src.size), n - 1)
    back = rng.random(src.size) < 0.002
    src[back], dst[back] = dst[back], src[back]
    return _finish("big", rng, n, np.column_stack([src, dst]), count, sources=64)


GENERATORS = {"dag": dag, "cyclic": cyclic, "big": big}


def generate(folder: Path, names: tuple[str, ...] = tuple(GENERATORS)) -> dict[str, GeneratedGraph]:
    """Write the named graphs and their query sets into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    graphs = {name: GENERATORS[name]() for name in names}
    for graph in graphs.values():
        graph.write(folder)
    return graphs


if __name__ == "__main__":  # python -m tests.generated FOLDER [NAME ...]: the files, for scripts (docker/smoke-test.sh)
    import sys

    generate(Path(sys.argv[1]), tuple(sys.argv[2:]) or tuple(GENERATORS))

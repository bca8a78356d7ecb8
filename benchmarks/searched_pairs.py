"""What the pairs that verdicts and the crossing pass leave to a search are, with updates pending (#22).

For ``bench_updates``'s graphs and streams: apply ``--pending`` updates, then for the random and the
positive batch of ``--pairs`` pairs count the pairs searched by where their ends lie against the largest
broken component G (inside it, above it: reaching it in the labels' DAG, below it, or neither), by their
answer, by what left them open in ``pending.verdict`` (the labels' code, whether the removal marks meet,
whether added edges may join them) and, for the reachable ones, whether G's root witnesses them (s reaches
the root and the root reaches t in the labels' graph less every edge ever removed).

    python3 -m benchmarks.searched_pairs --graphs rmat-2 [--kinds shaped,uniform] [--pending 1000]
"""

from __future__ import annotations

import argparse
from collections import Counter

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import breadth_first_order


def _reached(indptr: np.ndarray, indices: np.ndarray, keep: np.ndarray, start: int, reverse: bool) -> np.ndarray:
    n = indptr.size - 1
    rows = np.repeat(np.arange(n), np.diff(indptr))
    graph = csr_matrix((np.ones(int(keep.sum()), dtype=np.int8), (rows[keep], indices[keep])), shape=(n, n))
    order = breadth_first_order(graph.T.tocsr() if reverse else graph, start, return_predecessors=False)
    out = np.zeros(n, dtype=bool)
    out[order] = True
    return out


def _dag_reached(indptr: np.ndarray, indices: np.ndarray, start: int, reverse: bool) -> np.ndarray:
    return _reached(indptr, indices, np.ones(indices.size, dtype=bool), start, reverse)


def explain(index, pairs: np.ndarray) -> list[tuple[str, int]]:
    from grail_core import dynamic
    from grail_core.pending import DOWN_NO, RM_DOWN, RM_UP, UP_NO, _through, comp_broken, removal_mask, table_key
    from grail_core.probing import EMPTY, lookup
    from grail_core.query import classify_nodes
    from grail_core.records import NO, UNDECIDED, YES
    from grail_core.staging import ROOT

    version = index.current()
    p, hot = version._updates(), version.search.hot
    fw, bw = version.labels.views.forward(), version.labels.views.backward()
    comp = fw.comp
    pool = version.search.walk_buffers(version._walk_size())
    codes = dynamic.verdicts(hot, p, pairs)
    open_pairs = np.flatnonzero(codes == UNDECIDED)
    dynamic._cross(comp, p, hot, pool, pairs, open_pairs, codes)
    searched = np.flatnonzero(codes == UNDECIDED)
    answers = np.zeros(pairs.shape[0], dtype=bool)
    dynamic.search_pairs((fw, bw), p, hot, pool, pairs, searched, answers)

    n_dag = fw.dag_indptr.size - 1
    broken = [c for c in range(n_dag) if comp_broken(p, c)]
    sizes = {c: int(fw.mem_indptr[c + 1] - fw.mem_indptr[c]) for c in broken}
    giant = max(broken, key=sizes.get)
    below = _dag_reached(fw.dag_indptr, fw.dag_indices, giant, False)
    above = _dag_reached(fw.dag_indptr, fw.dag_indices, giant, True)
    removed = np.unpackbits(np.asarray(p.removed_bits).view(np.uint8), bitorder="little")[: fw.indices.size] == 0
    root = lookup(p.table, table_key(ROOT, giant))
    assert root != EMPTY
    from_root = _reached(fw.indptr, fw.indices, removed, int(root), False)
    to_root = _reached(fw.indptr, fw.indices, removed, int(root), True)

    def where(c: int) -> str:
        if c == giant:
            return "in G"
        if above[c]:
            return "above G"
        if below[c]:
            return "below G"
        return "other broken" if c in sizes else "apart"

    counts: Counter[tuple[str, ...]] = Counter()
    for i in searched.tolist():
        s, t = int(pairs[i, 0]), int(pairs[i, 1])
        cs, ct = int(comp[s]), int(comp[t])
        base = classify_nodes(hot, s, t)
        relevant = bool(removal_mask(p, s, cs, RM_UP) & removal_mask(p, t, ct, RM_DOWN))
        route = bool(_through(p.closure_no, p.masks[cs, UP_NO], p.masks[ct, DOWN_NO]))
        label = {YES: "YES", NO: "NO", UNDECIDED: "open"}[int(base)]
        answer = "YES" if answers[i] else "NO"
        through = "via root" if (to_root[s] and from_root[t]) else "-"
        why = f"labels {label}" + (", marks meet" if relevant else "") + (", added route" if route else "")
        counts[(where(cs), where(ct), answer, through if answer == "YES" else "-", why)] += 1
    header = (
        f"broken components {len(broken)} (G: {sizes[giant]:,} members), pairs open after verdicts"
        f" {open_pairs.size:,}, searched {searched.size:,}, reachable {int(answers[searched].sum()):,}"
    )
    return [(header, 0)] + [(" | ".join(key), count) for key, count in counts.most_common()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--graphs", default="rmat-2")
    parser.add_argument("--kinds", default="shaped,uniform")
    parser.add_argument("--pending", type=int, default=1000)
    parser.add_argument("--pairs", type=int, default=20_000)
    args = parser.parse_args()
    from benchmarks.bench_updates import edge_arrays, graphs, pair_batches, updates
    from grail_core import ReachabilityIndex

    for name in args.graphs.split(","):
        _, make = graphs(1.0)[name]
        indptr, indices = make()
        src, dst = edge_arrays(indptr, indices)
        n = indptr.size - 1
        batches = pair_batches(indptr, indices, args.pairs, seed=1)
        for kind in args.kinds.split(","):
            index = ReachabilityIndex.from_edges(src, dst, num_nodes=n, backend="cpu")
            index.auto_rebuild = False  # measured: answers with the updates pending
            for add, remove in updates(src, dst, n, args.pending, kind, seed=2):
                index.update(add=add, remove=remove)
            for label, batch in batches.items():
                rows = explain(index, np.ascontiguousarray(batch, dtype=np.int64))
                print(f"\n### {name}, {kind} stream, {label} batch: {rows[0][0]}\n")
                print("| s | t | answer | root witness | left open by | pairs |\n|---|---|---|---|---|---|")
                for key, count in rows[1:]:
                    print(f"| {key} | {count:,} |")


if __name__ == "__main__":
    main()

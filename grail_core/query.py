"""Exact reachability on the index arrays: a label filter per pair, then a pruned DFS for the rest.

Every test here is exact: a pair is answered by the filter only when a necessary condition fails
(topological order, level, GRAIL intervals, hub reach sets) or a sufficient one holds (DFS-tree
interval, a hub between the two). The search follows children that the same tests cannot rule out.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np
from numba import njit, prange

__all__ = ["QueryArrays", "NO", "YES", "UNDECIDED", "classify", "filter_pairs", "search_pairs_cpu", "answer_pair"]

NO = np.int8(0)
YES = np.int8(1)
UNDECIDED = np.int8(2)


class QueryArrays(NamedTuple):
    """The arrays the query engines read; DAG node ids are a topological order."""

    comp: np.ndarray  # node id -> DAG node id
    out_indptr: np.ndarray  # DAG children, CSR (no virtual root)
    out_indices: np.ndarray
    level: np.ndarray  # longest path from a root; u->v implies level[u] < level[v]
    lo: np.ndarray  # (N, dims) min post-order below the node
    hi: np.ndarray  # (N, dims) post-order rank
    tree_lo: np.ndarray  # (N, dims) start of the DFS-tree interval [tree_lo, hi]
    fwd: np.ndarray  # uint64: bit i = hub i reaches the node
    bwd: np.ndarray  # uint64: bit i = the node reaches hub i


@njit(inline="always", nogil=True)
def classify(a, s, t):
    """YES, NO or UNDECIDED for 'DAG node s reaches DAG node t' from the labels alone."""
    if s == t:
        return YES
    if s > t or a.level[s] >= a.level[t]:
        return NO
    fs = a.fwd[s]
    ft = a.fwd[t]
    if fs & ~ft:
        return NO
    bs = a.bwd[s]
    if a.bwd[t] & ~bs:
        return NO
    if bs & ft:
        return YES
    dims = a.lo.shape[1]
    for k in range(dims):
        if a.lo[s, k] > a.lo[t, k] or a.hi[t, k] > a.hi[s, k]:
            return NO
    for k in range(dims):
        if a.tree_lo[s, k] <= a.hi[t, k]:
            return YES
    return UNDECIDED


@njit(nogil=True, parallel=True, cache=True)
def _filter(a, sources, targets, codes):
    for i in prange(sources.size):
        codes[i] = classify(a, a.comp[sources[i]], a.comp[targets[i]])


def filter_pairs(arrays: QueryArrays, sources: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Codes (NO, YES, UNDECIDED) for pairs of node ids, all pairs in parallel."""
    codes = np.empty(sources.size, dtype=np.int8)
    _filter(arrays, sources, targets, codes)
    return codes


@njit(nogil=True, inline="always")
def _pruned_dfs(a, s, t, stamp, mark, stack):
    stamp[s] = mark
    stack[0] = s
    top = 1
    while top > 0:
        top -= 1
        x = stack[top]
        for e in range(a.out_indptr[x], a.out_indptr[x + 1]):
            w = a.out_indices[e]
            if stamp[w] == mark:
                continue
            stamp[w] = mark
            code = classify(a, w, t)
            if code == YES:
                return True
            if code == UNDECIDED:
                stack[top] = w
                top += 1
    return False


@njit(nogil=True, parallel=True, cache=True)
def _search(a, sources, targets, answers, stamps, stacks):
    for i in prange(sources.size):
        thread = numba.get_thread_id()
        answers[i] = _pruned_dfs(a, sources[i], targets[i], stamps[thread], np.int32(i + 1), stacks[thread])


def search_pairs_cpu(arrays: QueryArrays, sources: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Exact answers for undecided pairs of DAG node ids by pruned DFS, pairs spread over all cores.

    Each thread owns a visit-stamp array (stamp = pair number), so nothing is cleared between pairs.
    """
    answers = np.zeros(sources.size, dtype=np.bool_)
    if sources.size == 0:
        return answers
    available = numba.get_num_threads()
    threads = min(available, sources.size)
    n = arrays.level.size
    stamps = np.zeros((threads, n), dtype=np.int32)
    stacks = np.empty((threads, n), dtype=np.int32)
    # The thread count is thread-local in numba: a small batch only pays for the buffers it uses.
    numba.set_num_threads(threads)
    try:
        _search(arrays, sources, targets, answers, stamps, stacks)
    finally:
        numba.set_num_threads(available)
    return answers


@njit(nogil=True, cache=True)
def _answer_one(a, s, t):
    code = classify(a, s, t)
    if code != UNDECIDED:
        return code == YES, False
    n = a.level.size
    return _pruned_dfs(a, s, t, np.zeros(n, dtype=np.int32), np.int32(1), np.empty(n, dtype=np.int32)), True


def answer_pair(arrays: QueryArrays, source: int, target: int) -> tuple[bool, bool]:
    """(reachable, needed a search) for one pair of node ids, on the calling thread."""
    answer, searched = _answer_one(arrays, arrays.comp[source], arrays.comp[target])
    return bool(answer), bool(searched)

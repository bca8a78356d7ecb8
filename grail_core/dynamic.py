"""Pairs answered on one version of a graph with edge updates pending: tests first, searches for the rest.

Every pair gets one verdict (``grail_core.pending.verdict``), from the labels and the version's masks, in
parallel: YES or NO (decided), BASE (the updates cannot have changed it: the labels' graph's answer holds,
which the index's own search engine finds, on the CPU or a GPU), BASE_FIRST (that engine's YES holds, its NO
is searched again on the updated graph), or UNDECIDED. The undecided pairs are a
list of (source, target) searches on the updated graph (``traversal.walk``, depth first, each key it meets
tested by the same verdict), spread over the cores. Exact throughout: a verdict states only what a witness
path or a test on the labels proves.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

import numba
import numpy as np
from numba import njit, prange

from .pending import BASE, BASE_FIRST, Pending, verdict
from .query import SERIAL_BATCH, HotArrays, SearchBuffers, answer_pair, classify_nodes
from .records import NO, UNDECIDED, YES
from .traversal import Side, reaches, walk_pairs

__all__ = ["UpdatedAnswers", "verdicts", "answer_pairs", "search_pairs", "answer_one", "walk_size"]


class UpdatedAnswers(NamedTuple):
    """What ``answer_pairs`` left to the index's search engine: the positions of the pairs whose answer is
    the labels' graph's (BASE), of those whose YES only is (BASE_FIRST: a NO goes to ``search_pairs``), and
    how many pairs it searched on the updated graph."""

    base: np.ndarray
    base_first: np.ndarray
    searched: int


def walk_size(n_dag: int, num_nodes: int) -> int:
    """The size of the buffers of walks (``SearchBuffers``): room for two stacks of every key a walk may
    visit, every DAG node and every node (those updates added included)."""
    return 2 * (n_dag + num_nodes)


@njit(nogil=True)
def _verdict_of(h, p, comp, u, v):
    if u == v:
        return YES
    cu = comp[u] if u < p.n_base else -1
    cv = comp[v] if v < p.n_base else -1
    base = classify_nodes(h, u, v) if cu >= 0 and cv >= 0 else NO
    return verdict(p, u, cu, v, cv, base)


@njit(nogil=True, parallel=True, cache=True)
def _verdicts_parallel(h, p, comp, pairs, codes):
    for i in prange(pairs.shape[0]):
        codes[i] = _verdict_of(h, p, comp, pairs[i, 0], pairs[i, 1])


@njit(nogil=True, cache=True)
def _verdicts_serial(h, p, comp, pairs, codes):
    for i in range(pairs.shape[0]):
        codes[i] = _verdict_of(h, p, comp, pairs[i, 0], pairs[i, 1])


@njit(nogil=True, cache=True)
def pair_verdict(h, p, comp, u, v):
    """``verdicts`` of one pair, on the calling thread."""
    return _verdict_of(h, p, comp, u, v)


def verdicts(hot: HotArrays, pending: Pending, comp: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """NO, YES, UNDECIDED or BASE (int8) for each pair of node ids (an (M, 2) int64 array)."""
    codes = np.empty(pairs.shape[0], dtype=np.int8)
    if pairs.shape[0] < SERIAL_BATCH:
        _verdicts_serial(hot, pending, comp, pairs, codes)
    else:
        _verdicts_parallel(hot, pending, comp, pairs, codes)
    return codes


def answer_pairs(
    sides: tuple[Side, Side],
    pending: Pending,
    hot: HotArrays,
    pool: SearchBuffers,
    pairs: np.ndarray,
    answers: np.ndarray,
    search: Callable[[np.ndarray, np.ndarray, np.ndarray], Any] | None = None,
) -> UpdatedAnswers:
    """Answers of an (M, 2) int64 array of node ids on the version ``pending`` into ``answers``, except for
    the pairs it leaves to the index's search engine (``UpdatedAnswers.base``: their answer is the labels'
    graph's). ``sides``: the forward and backward views of the graph; ``pool``: buffers of ``walk_size``;
    ``search(pairs, which, answers)``: what searches the undecided pairs on the updated graph (the CPU's
    ``search_pairs`` when None)."""
    pairs = np.ascontiguousarray(pairs, dtype=np.int64)
    codes = verdicts(hot, pending, sides[0].comp, pairs)
    np.equal(codes, YES, out=answers)
    undecided = np.flatnonzero(codes == UNDECIDED)
    if undecided.size and search is not None:
        search(pairs, undecided, answers)
    elif undecided.size:
        search_pairs(sides, pending, hot, pool, pairs, undecided, answers)
    return UpdatedAnswers(np.flatnonzero(codes == BASE), np.flatnonzero(codes == BASE_FIRST), int(undecided.size))


def search_pairs(
    sides: tuple[Side, Side],
    pending: Pending,
    hot: HotArrays,
    pool: SearchBuffers,
    pairs: np.ndarray,
    which: np.ndarray,
    answers: np.ndarray,
) -> None:
    """Answers of ``pairs[which]`` by searches on the updated graph into ``answers``, slices over the cores."""
    threads = 1 if which.size < SERIAL_BATCH else numba.get_num_threads()

    def run(part: np.ndarray) -> None:
        with pool.take(marks=max(2, 2 * part.size)) as (stamp, queue, mark):
            walk_pairs(*sides, pending, hot, pairs, part, answers, stamp, mark, queue)

    if threads == 1:
        run(which)
        return
    with ThreadPoolExecutor(threads) as executor:
        list(executor.map(run, np.array_split(which, 4 * threads)))


def answer_one(
    sides: tuple[Side, Side],
    pending: Pending,
    hot: HotArrays,
    pool: SearchBuffers,
    base_buffers: SearchBuffers,
    u: int,
    v: int,
) -> tuple[bool, bool]:
    """(reachable, needed a search) for one pair of node ids on the version ``pending``, on the calling
    thread: its verdict, then the labels' graph's search (BASE, BASE_FIRST) or one on the updated graph."""
    code = pair_verdict(hot, pending, sides[0].comp, u, v)
    if code == BASE or code == BASE_FIRST:
        found, searched = answer_pair(hot, base_buffers, u, v)
        if found or code == BASE:
            return found, searched
    if code == YES or code == NO:
        return bool(code == YES), False
    with pool.take(marks=2) as (stamp, queue, mark):
        found = reaches(*sides, pending, hot, u, v, stamp, mark, queue)
    return bool(found), True

"""GRAIL labels on the GPU: the five level-synchronous phases of Naumov, Vrielink and Garland (2017).

For the labeling graph (DAG + virtual root, ids topological) and the child order of each dimension,
this reproduces exactly what ``grail_core.labeling.label_all`` computes, without any DFS:

1. path counts ``zeta`` bottom-up (the size of each node's subgraph unrolled into a tree; order-free,
   so computed once for all dimensions), then per dimension the offset of every edge: 1 + the
   counts of the earlier children of its row, which is the pre-order distance in the unrolled tree;
2. parent SSSP top-down: a node's pre-order rank in the unrolled tree is the minimum over its parents
   of (parent's rank + edge offset), and the parent attaining it is the one through which the DFS
   first reaches the node, i.e. its DFS-tree parent;
3. DFS-tree subtree sizes bottom-up;
4. post-order top-down: ``tree_low(c) = tree_low(p) + sizes of p's earlier tree children``,
   ``post = tree_low + size - 1``;
5. min post-order bottom-up.

Path counts grow exponentially with depth on dense DAGs, so they are fixed-width multi-word numbers
(``kernels.wide``): the build first tries one word and, when phase 1 overflows, repeats it with
``max_words`` words and keeps as many as the root's count needs (every rank and offset is below it).
A graph whose root count needs more than ``max_words`` words, or with more levels than the launch
budget allows (a long chain), raises ``LabelingDeclined`` and is labeled on the CPU by the caller.
Every build ends with an edge check on the device (post(u) > post(v), minpost(u) <= minpost(v));
a failing build raises ``LabelingCheckFailed`` and its labels are never returned.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numba import cuda

from .arrays import as_xp, device_arrays
from .csr import MAX_DEVICE_NODES
from .device import free_memory
from .frontier import (
    EngineConfig,
    LevelQueues,
    build_level_queues,
    cooperative_blocks,
    make_advance,
    make_edge_map,
    make_sweep,
)
from .memory import device_full
from .scan import exclusive_scan
from .wide import MAX_WORDS, add_into, equal_to, less_than, limb_mask, offset_into

__all__ = [
    "GpuLabels",
    "LabelingCheckFailed",
    "LabelingDeclined",
    "LabelingOptions",
    "build_labels",
    "device_child_orders",
    "label_dag",
    "level_budget",
]

UINT64_MAX = np.uint64(0xFFFFFFFFFFFFFFFF)
# Cost model of the automatic choice, fitted on an H200 (the figures: benchmarks/results/code-figures.md): a
# build's fixed cost (transfers, scans, a dozen launches), its cost per node or edge and dimension, and a few
# grid barriers per level over the six sweeps; the CPU DFS's cost per node or edge and dimension is taken
# near the low end of its range (which only small graphs reach).
GPU_FIXED_MS = 13.0
GPU_LEVEL_MS = 0.05
GPU_ELEMENT_NS = 2.5
CPU_ELEMENT_NS = 8.0


class LabelingDeclined(RuntimeError):
    """The GPU pipeline does not suit this graph (too deep, or path counts too wide); label on the CPU."""


class LabelingCheckFailed(RuntimeError):
    """The end-of-build edge check found an invalid label; the labels must not be used."""


@dataclass(frozen=True)
class LabelingOptions:
    """Knobs of the GPU build; the defaults suit real devices, tests shrink them."""

    config: EngineConfig | None = None  # None: EngineConfig.default()
    word_bits: int = 64  # bits per weight word (even, <= 64); tests use 8 to overflow on small graphs
    max_words: int = 8  # widest weights tried before declining (8 x 64 bits; arXiv_sub_6000 needs 3)
    max_levels: int | None = None  # None: level_budget(...); tests and benchmarks force the GPU with a large value
    # Deepest labeling graph whose tree parents come from path counts; deeper ones, and those whose counts
    # need more than max_words words, compare tree paths instead (``_parents_by_comparison``).
    path_count_levels: int = 512


@dataclass
class _Timer:
    """Wall time per phase, measured after a device synchronisation so that it is the phase's own."""

    seconds: dict[str, float] = field(default_factory=dict)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        yield
        cuda.synchronize()
        self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start


def level_budget(num_nodes: int, num_edges: int, dims: int) -> int:
    """Most levels for which the GPU build is expected to beat the CPU DFS (0 or less: never).

    Small graphs are labeled faster by the CPU whatever their depth; deep ones (a 1M-node chain has
    1M levels) make level-synchronous phases launch-bound.
    """
    work = dims * (num_nodes + num_edges)
    gain_ms = work * (CPU_ELEMENT_NS - GPU_ELEMENT_NS) * 1e-6 - GPU_FIXED_MS
    return int(min(1 << 16, gain_ms // GPU_LEVEL_MS))


# ---- phase 1: path counts (bottom-up) and per-dimension edge offsets ------------------------------


@cuda.jit(device=True)
def _add_child_count(v, e, lvl, args):
    children, zeta, acc, words, half = args
    c = children[e]
    mask = limb_mask(half)
    for w in range(words):
        z = zeta[w, c]
        cuda.atomic.add(acc, (2 * w, v), z & mask)
        cuda.atomic.add(acc, (2 * w + 1, v), z >> half)


@cuda.jit(device=True)
def _finish_count(v, lvl, args):
    """zeta(v) = 1 + sum of the children's counts, carries resolved; flags a count that does not fit."""
    zeta, acc, words, half, overflow = args
    mask = limb_mask(half)
    carry = np.uint64(1)
    for w in range(words):
        lo = acc[2 * w, v] + carry
        carry = lo >> half
        hi = acc[2 * w + 1, v] + carry
        carry = hi >> half
        zeta[w, v] = (lo & mask) | ((hi & mask) << half)
    if carry != 0:
        overflow[0] = 1


@cuda.jit(device=True)
def _child_limb(e, args):
    children, zeta, limb, half, out = args
    z = zeta[limb // 2, children[e]]
    out[e] = (z >> half) if limb % 2 else (z & limb_mask(half))


# ---- phase 2: unrolled pre-order ranks (SSSP) and the DFS-tree parent --------------------------------


@cuda.jit(device=True)
def _locked_min(dist, lock, k, c, cand, words, n):
    """Multi-word atomic min under a per-node spin lock; reads and writes go through L2 atomics."""
    slot = k * n + c
    while cuda.atomic.cas(lock, slot, 0, 1) != 0:
        pass
    cur = cuda.local.array(MAX_WORDS, dtype=np.uint64)
    for w in range(words):
        cur[w] = cuda.atomic.add(dist, (k, w, c), np.uint64(0))
    if less_than(cand, cur, words):
        for w in range(words):
            cuda.atomic.exch(dist, (k, w, c), cand[w])
    cuda.threadfence()
    cuda.atomic.exch(lock, slot, 0)


@cuda.jit(device=True)
def _relax(v, e, lvl, args):
    orders, indptr, scans, dist, lock, words, half = args
    cand = cuda.local.array(MAX_WORDS, dtype=np.uint64)
    n = dist.shape[2]
    for k in range(orders.shape[0]):
        c = orders[k, e]
        offset_into(cand, scans, k, e, indptr[v], words, half)
        add_into(cand, dist, k, v, words, half)
        if words == 1:
            cuda.atomic.min(dist, (k, 0, c), cand[0])
        else:
            _locked_min(dist, lock, k, c, cand, words, n)


@cuda.jit(device=True)
def _pick_parent(v, e, lvl, args):
    """Ranks are distinct, so exactly one in-edge of each node reproduces its final rank."""
    orders, indptr, scans, dist, parent, parent_edge, words, half = args
    cand = cuda.local.array(MAX_WORDS, dtype=np.uint64)
    for k in range(orders.shape[0]):
        c = orders[k, e]
        offset_into(cand, scans, k, e, indptr[v], words, half)
        add_into(cand, dist, k, v, words, half)
        if equal_to(cand, dist, k, c, words):
            parent[k, c] = v
            parent_edge[k, c] = e


# ---- phase 2 without path counts: DFS-tree parents by comparing tree paths ----------------------------
#
# The DFS reaches a node first along its lexicographically least path from the root (the sequence of child
# positions), which is its tree path; so its tree parent is the in-edge (p, i) whose path p's tree path + i
# is least. Two candidates (p, i) and (q, j) compare at the children of p and q's lowest common tree
# ancestor, or, when one of p, q is the other's ancestor, at the child position the deeper one's path
# takes there against the other's edge. Parents sit on lower levels, so a top-down sweep has every
# candidate's tree path complete; the ancestors come from a jump table (2**j-th ancestor), so a comparison
# reads O(log depth) words, a few when the common ancestor is near (the usual case).


@cuda.jit(device=True, inline=True)
def _tree_position(tree, k, x):
    """Position of x in its tree parent's row of dimension k."""
    indptr, _in_indptr, _in_slots, _rows, parent, parent_edge, _depth, _up = tree
    return parent_edge[k, x] - indptr[parent[k, x]]


@cuda.jit(device=True)
def _ancestor(up, k, x, distance):
    j = 0
    while distance > 0:
        if distance & 1:
            x = up[k, j, x]
        distance >>= 1
        j += 1
    return x


@cuda.jit(device=True)
def _earlier(tree, k, p, ip, q, iq):
    """Whether candidate (p, ip) comes before (q, iq) in dimension k's DFS (p, q: parents; ip, iq: positions)."""
    depth = tree[6]
    up = tree[7]
    if p == q:
        return ip < iq
    dp = depth[k, p]
    dq = depth[k, q]
    a = p
    b = q
    if dp > dq:
        x = _ancestor(up, k, p, dp - dq - 1)
        if up[k, 0, x] == q:
            return _tree_position(tree, k, x) < iq
        a = up[k, 0, x]
    elif dq > dp:
        y = _ancestor(up, k, q, dq - dp - 1)
        if up[k, 0, y] == p:
            return ip < _tree_position(tree, k, y)
        b = up[k, 0, y]
    for _ in range(4):  # a near common ancestor, step by step
        pa = up[k, 0, a]
        pb = up[k, 0, b]
        if pa == pb:
            return _tree_position(tree, k, a) < _tree_position(tree, k, b)
        a = pa
        b = pb
    for j in range(up.shape[1] - 1, -1, -1):
        if up[k, j, a] != up[k, j, b]:
            a = up[k, j, a]
            b = up[k, j, b]
    return _tree_position(tree, k, a) < _tree_position(tree, k, b)


@cuda.jit(device=True)
def _choose_parent(v, lvl, tree):
    """v's tree parent in every dimension: its least in-edge; then its depth and jump table."""
    indptr, in_indptr, in_slots, rows, parent, parent_edge, depth, up = tree
    for k in range(parent.shape[0]):
        best = -1
        best_position = np.int64(0)
        best_slot = np.int64(-1)
        for j in range(in_indptr[v], in_indptr[v + 1]):
            slot = np.int64(in_slots[k, j])
            p = rows[slot]
            position = slot - indptr[p]
            if best < 0 or _earlier(tree, k, p, position, best, best_position):
                best = p
                best_position = position
                best_slot = slot
        if best >= 0:
            parent[k, v] = best
            parent_edge[k, v] = best_slot
            depth[k, v] = depth[k, best] + 1
            up[k, 0, v] = best
            for j in range(1, up.shape[1]):
                up[k, j, v] = up[k, j - 1, up[k, j - 1, v]]


@cuda.jit(device=True)
def _seed_tree_root(i, args):
    """The root's tree row in dimension k = i // jumps: depth 0, every ancestor the root itself."""
    depth, up, root = args
    k = i // up.shape[1]
    depth[k, root] = 0
    up[k, i % up.shape[1], root] = root


# ---- phases 3-5: tree sizes, post-order, min post-order ---------------------------------------------


@cuda.jit(device=True)
def _push_size(v, lvl, args):
    size, parent = args
    for k in range(size.shape[0]):
        p = parent[k, v]
        if p >= 0:
            cuda.atomic.add(size, (k, p), size[k, v])


@cuda.jit(device=True)
def _tree_child_size(e, args):
    """Input of the post-order scan: a tree edge carries its child's subtree size, other edges 0."""
    orders, k, size, parent_edge, out = args
    c = orders[k, e]
    out[e] = np.uint64(size[k, c]) if parent_edge[k, c] == e else np.uint64(0)


@cuda.jit(device=True)
def _place(v, lvl, args):
    indptr, scans, size, parent, parent_edge, tree_low, post = args
    for k in range(size.shape[0]):
        p = parent[k, v]
        if p >= 0:
            before = np.int64(scans[k, 0, parent_edge[k, v]] - scans[k, 0, indptr[p]])
            low = np.int64(tree_low[k, p]) + before
            tree_low[k, v] = low
            post[k, v] = low + size[k, v] - 1


@cuda.jit(device=True)
def _pull_minpost(v, e, lvl, args):
    orders, minpost = args
    for k in range(orders.shape[0]):
        cuda.atomic.min(minpost, (k, v), minpost[k, orders[k, e]])


@cuda.jit(device=True)
def _seed_root(k, args):
    """The root's labels in dimension k: the first tree interval, the last post-order."""
    tree_low, post, root = args
    tree_low[k, root] = 0
    post[k, root] = post.shape[1] - 1


@cuda.jit(device=True)
def _seed_dist_root(i, args):
    """The root's rank in the unrolled tree, 0, in every word of every dimension."""
    dist, root = args
    dist[i // dist.shape[1], i % dist.shape[1], root] = np.uint64(0)


@cuda.jit(device=True)
def _check_edge(v, e, lvl, args):
    orders, post, minpost, bad = args
    for k in range(orders.shape[0]):
        c = orders[k, e]
        if post[k, v] <= post[k, c] or minpost[k, v] > minpost[k, c]:
            bad[0] = 1


@cuda.jit(device=True)
def _order_key(i, args):
    """``grail_core.labeling.order_key`` of edge i, in the low half of its row's sort key."""
    seed, rows, keys = args
    z = seed + (np.uint64(i) + np.uint64(1)) * np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    keys[i] = (np.uint64(rows[i]) << np.uint64(32)) | ((z ^ (z >> np.uint64(31))) >> np.uint64(32))


_map_order_key = make_edge_map(_order_key)
_sweep_counts = make_sweep(_add_child_count, _finish_count)
_map_child_limb = make_edge_map(_child_limb)
_sweep_relax = make_sweep(edge_op=_relax)
_advance_pick_parent = make_advance(_pick_parent)
_sweep_sizes = make_sweep(node_op=_push_size)
_map_tree_child_size = make_edge_map(_tree_child_size)
_sweep_place = make_sweep(node_op=_place)
_sweep_minpost = make_sweep(edge_op=_pull_minpost)
_advance_check = make_advance(_check_edge)
_map_seed_root = make_edge_map(_seed_root)
_map_seed_dist_root = make_edge_map(_seed_dist_root)
_sweep_parents = make_sweep(node_op=_choose_parent)
_map_seed_tree_root = make_edge_map(_seed_tree_root)


def device_child_orders(indptr: Any, children: Any, seeds: np.ndarray, config: EngineConfig) -> Any:
    """``grail_core.labeling.make_child_orders`` on the device: (dims, m) orders of the CSR's rows, each row
    sorted by its edges' keys with ties by position (a stable sort of row << 32 | key)."""
    xp = device_arrays()
    m = children.size
    rows = (xp.searchsorted(indptr, xp.arange(m, dtype=np.int64), side="right") - 1).astype(np.int32)
    keys = xp.empty(m, dtype=np.uint64)
    orders = xp.empty((seeds.size, m), dtype=children.dtype)
    for k, seed in enumerate(seeds):
        if m:
            _map_order_key[config.grid(), config.block](m, (np.uint64(seed), rows, keys))
        orders[k] = children[xp.argsort(keys, kind="stable")]
    return orders


def _path_counts(
    lq: LevelQueues, indptr: Any, children: Any, n1: int, words: int, bits: int, cfg: EngineConfig
) -> tuple[Any, bool]:
    half = np.uint64(bits // 2)
    zeta = cuda.device_array((words, n1), dtype=np.uint64)
    acc = device_full((2 * words, n1), np.uint64, 0, cfg)
    overflow = cuda.to_device(np.zeros(1, dtype=np.int32))
    _sweep_counts[cooperative_blocks(_sweep_counts, cfg), cfg.block](
        indptr,
        lq.arrays,
        *lq.bottom_up(),
        (children, zeta, acc, words, half),
        (zeta, acc, words, half, overflow),
        cfg.narrow,
    )
    return zeta, bool(overflow.copy_to_host()[0])


@dataclass
class GpuLabels:
    """What a GPU build returns: labels of shape (dims, N+1), phase times, and what the build chose."""

    post: Any  # host arrays, or device arrays with ``keep_on_device``
    minpost: Any
    tree_low: Any
    phase_seconds: dict[str, float]
    words: int  # weight words per path count (1 unless a count passed 2**word_bits)
    levels: int  # topological levels of the labeling graph


def _estimate_bytes(n1: int, m: int, dims: int, words: int, index_bytes: int) -> int:
    per_node = 8 + 12 + 4 + 24 * words + 8 * dims * words + 12 * dims + 16 * dims
    per_edge = index_bytes * dims + 16 * dims * words + 8
    return n1 * per_node + m * per_edge


def label_dag(
    indptr: np.ndarray,
    child_orders: np.ndarray,
    root: int,
    options: LabelingOptions | None = None,
    level_hint: int | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, float]]:
    """``build_labels`` as the tuple ``(post, minpost, tree_low, phase_seconds)`` that backends read."""
    built = build_labels(indptr, child_orders, root, options, level_hint)
    return built.post, built.minpost, built.tree_low, built.phase_seconds


def _on_device(array: Any, dtype: Any = None) -> Any:
    """Host arrays are uploaded; device arrays (numba's, CuPy's) are used as they are."""
    if isinstance(array, np.ndarray):
        return cuda.to_device(np.ascontiguousarray(array, dtype=dtype))
    return array


def _parents_by_path_counts(
    lq: LevelQueues, d_indptr: Any, d_orders: Any, root: int, opts: LabelingOptions, cfg: EngineConfig, timer: _Timer
) -> tuple[Any, Any, Any, Any, int] | None:
    """Phases 1 and 2: tree parents from the unrolled pre-order ranks; (parent, parent_edge, scans, limbs,
    words), or None when the path counts need more than ``max_words`` words."""
    n1 = d_indptr.size - 1
    dims, m = d_orders.shape
    grid, block = cfg.grid(), cfg.block
    with timer.phase("subgraph sizes DAG"):
        zeta, overflow = _path_counts(lq, d_indptr, d_orders[0], n1, 1, opts.word_bits, cfg)
        if overflow and opts.max_words > 1:
            zeta, overflow = _path_counts(lq, d_indptr, d_orders[0], n1, opts.max_words, opts.word_bits, cfg)
        if overflow:
            return None
        # Every rank and offset is below the root's count, so its top non-zero word bounds the width.
        words = int(np.flatnonzero(zeta[:, root : root + 1].copy_to_host()[:, 0])[-1]) + 1
        zeta = zeta[:words]
    half = np.uint64(opts.word_bits // 2)

    with timer.phase("edge offsets"):
        scans = cuda.device_array((dims, 2 * words, m + 1), dtype=np.uint64)
        limbs = cuda.device_array(m, dtype=np.uint64)
        for k in range(dims):
            for limb in range(2 * words):
                _map_child_limb[grid, block](m, (d_orders[k], zeta, limb, half, limbs))
                exclusive_scan(limbs, scans[k, limb])
        del zeta

    with timer.phase("parent SSSP"):
        dist = device_full((dims, words, n1), np.uint64, UINT64_MAX, cfg)
        _map_seed_dist_root[grid, block](dims * words, (dist, root))
        lock = device_full(dims * n1 if words > 1 else 1, np.int32, 0, cfg)
        _sweep_relax[cooperative_blocks(_sweep_relax, cfg), block](
            d_indptr, lq.arrays, *lq.top_down(), (d_orders, d_indptr, scans, dist, lock, words, half), (), cfg.narrow
        )
        parent = device_full((dims, n1), np.int32, -1, cfg)
        parent_edge = device_full((dims, n1), np.int64, -1, cfg)
        _advance_pick_parent[grid, block](
            d_indptr,
            lq.everything,
            0,
            (d_orders, d_indptr, scans, dist, parent, parent_edge, words, half),
        )
        del dist, lock
    return parent, parent_edge, scans, limbs, words


def _parents_by_comparison(
    lq: LevelQueues, d_indptr: Any, d_orders: Any, root: int, cfg: EngineConfig, timer: _Timer
) -> tuple[Any, Any]:
    """Phase 2 without path counts: (parent, parent_edge) by comparing tree paths, level by level."""
    xp = device_arrays()
    n1 = d_indptr.size - 1
    dims, m = d_orders.shape
    grid, block = cfg.grid(), cfg.block
    with timer.phase("tree parents"):
        orders = as_xp(d_orders)
        in_indptr = xp.zeros(n1 + 1, dtype=np.int64)
        xp.cumsum(xp.bincount(orders[0], minlength=n1), out=in_indptr[1:])
        # Each dimension's slots grouped by child: a node's in-edges, with their positions in their rows.
        in_slots = xp.empty((dims, m), dtype=np.int32)
        for k in range(dims):
            in_slots[k] = xp.argsort(orders[k], kind="stable").astype(np.int32)
        rows = (xp.searchsorted(as_xp(d_indptr), xp.arange(m, dtype=np.int64), side="right") - 1).astype(np.int32)
        jumps = max(1, int(lq.levels).bit_length())
        parent = device_full((dims, n1), np.int32, -1, cfg)
        parent_edge = device_full((dims, n1), np.int64, -1, cfg)
        depth = cuda.device_array((dims, n1), dtype=np.int32)
        up = cuda.device_array((dims, jumps, n1), dtype=np.int32)
        _map_seed_tree_root[grid, block](dims * jumps, (depth, up, root))
        tree = (d_indptr, in_indptr, in_slots, rows, parent, parent_edge, depth, up)
        _sweep_parents[cooperative_blocks(_sweep_parents, cfg), block](
            d_indptr, lq.arrays, *lq.top_down(), (), tree, cfg.narrow
        )
        del in_slots, rows, depth, up
    return parent, parent_edge


def build_labels(
    indptr: Any,
    child_orders: Any,
    root: int,
    options: LabelingOptions | None = None,
    level_hint: int | None = None,
    level_queues: LevelQueues | None = None,
    keep_on_device: bool = False,
) -> GpuLabels:
    """GRAIL labels of every dimension on the GPU.

    ``indptr`` (N+2, int64) and ``child_orders`` (dims, m) describe the labeling graph with root
    ``root`` = N, as for ``grail_core.labeling.label_all``; the three label arrays have shape
    (dims, N+1) and equal ``label_all``'s exactly. The inputs may be host or device arrays (the GPU
    build passes device arrays and its ``level_queues`` of the same graph, and ``keep_on_device`` to
    get device arrays back, with no transfer either way). ``phase_seconds`` maps each phase name (transfer,
    level queues, subgraph sizes DAG, edge offsets, parent SSSP or tree parents, subgraph sizes DT,
    post-order, min post-order, check, transfer back) to its wall time in seconds.

    Raises MemoryError when the arrays do not fit in free device memory, ``LabelingDeclined`` when
    the graph should be labeled on the CPU (more levels than ``max_levels``) and ``LabelingCheckFailed``
    if the final edge check fails. ``level_hint`` (the labeling graph's number of levels, when the
    caller knows it) lets a graph too deep for the budget be declined before any device work.
    """
    opts = options or LabelingOptions()
    cfg = opts.config or EngineConfig.default()
    if opts.word_bits % 2 or not 2 <= opts.word_bits <= 64 or not 1 <= opts.max_words <= MAX_WORDS:
        raise ValueError("word_bits must be even in [2, 64] and max_words in [1, 16]")
    n1 = indptr.size - 1
    dims, m = child_orders.shape
    if n1 >= MAX_DEVICE_NODES:
        raise MemoryError(f"{n1} nodes: GPU labels are int32, for fewer than 2**31 nodes")
    need = _estimate_bytes(n1, m, dims, 1, 4)
    free = free_memory()
    if need > 0.85 * free:
        raise MemoryError(f"GPU labeling needs ~{need / 2**30:.1f} GiB, {free / 2**30:.1f} GiB free")
    max_levels = opts.max_levels or level_budget(n1, m, dims)
    if max_levels < 1 or (level_hint is not None and level_hint > max_levels):
        raise LabelingDeclined(
            f"{dims} x ({n1} nodes + {m} edges) in {level_hint or 'unknown'} levels: "
            f"the CPU labels it faster (GPU budget: {max(max_levels, 0)} levels)"
        )
    grid, block = cfg.grid(), cfg.block
    timer = _Timer()

    with timer.phase("transfer"):
        d_indptr = _on_device(indptr, np.int64)
        d_orders = _on_device(child_orders, np.int32)
    with timer.phase("level queues"):
        lq = level_queues
        if lq is None:
            lq = build_level_queues(d_indptr, d_orders[0], root, n1, cfg, max_levels)
    if lq is None or lq.levels > max_levels:
        raise LabelingDeclined(f"more than {max_levels} levels: level-synchronous labeling would be launch-bound")

    counted = None
    if lq.levels <= opts.path_count_levels:
        counted = _parents_by_path_counts(lq, d_indptr, d_orders, root, opts, cfg, timer)
    if counted is not None:
        parent, parent_edge, scans, limbs, words = counted
    else:
        parent, parent_edge = _parents_by_comparison(lq, d_indptr, d_orders, root, cfg, timer)
        scans = cuda.device_array((dims, 1, m + 1), dtype=np.uint64)
        limbs = cuda.device_array(m, dtype=np.uint64)
        words = 0
    tree_low = cuda.device_array((dims, n1), dtype=np.int32)
    post = cuda.device_array((dims, n1), dtype=np.int32)
    _map_seed_root[grid, block](dims, (tree_low, post, root))

    with timer.phase("subgraph sizes DT"):
        size = device_full((dims, n1), np.int32, 1, cfg)
        _sweep_sizes[cooperative_blocks(_sweep_sizes, cfg), block](
            d_indptr, lq.arrays, *lq.bottom_up(), (), (size, parent), cfg.narrow
        )

    with timer.phase("post-order"):
        for k in range(dims):
            _map_tree_child_size[grid, block](m, (d_orders, k, size, parent_edge, limbs))
            exclusive_scan(limbs, scans[k, 0])
        _sweep_place[cooperative_blocks(_sweep_place, cfg), block](
            d_indptr,
            lq.arrays,
            *lq.top_down(),
            (),
            (d_indptr, scans, size, parent, parent_edge, tree_low, post),
            cfg.narrow,
        )
        del scans, limbs, size, parent, parent_edge

    with timer.phase("min post-order"):
        minpost = cuda.device_array_like(post)
        minpost.copy_to_device(post)
        _sweep_minpost[cooperative_blocks(_sweep_minpost, cfg), block](
            d_indptr, lq.arrays, *lq.bottom_up(), (d_orders, minpost), (), cfg.narrow
        )

    with timer.phase("check"):
        bad = cuda.to_device(np.zeros(1, dtype=np.int32))
        _advance_check[grid, block](d_indptr, lq.everything, 0, (d_orders, post, minpost, bad))
        failed = bool(bad.copy_to_host()[0])
    if failed:
        raise LabelingCheckFailed("GPU labels violate post(u) > post(v) or minpost(u) <= minpost(v) on some edge")

    if keep_on_device:
        return GpuLabels(post, minpost, tree_low, phase_seconds=timer.seconds, words=words, levels=lq.levels)
    with timer.phase("transfer back"):
        result = (post.copy_to_host(), minpost.copy_to_host(), tree_low.copy_to_host())
    return GpuLabels(*result, phase_seconds=timer.seconds, words=words, levels=lq.levels)

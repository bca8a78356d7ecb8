"""Every shared dataset on the device: GPU labels identical to the CPU labels, every query set exact."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from grail_core.condensation import condense
from grail_core.graph import Digraph
from grail_core.index import ReachabilityIndex
from grail_core.labeling import label_all, make_child_orders, with_virtual_root
from grail_core.query import UNDECIDED, filter_pairs
from grail_core.readers import read_graph

from ..conftest import dataset_graphs
from . import device_present

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not device_present(), reason="needs a CUDA device")]


@pytest.mark.parametrize("graph", dataset_graphs())
def test_labels_identical_to_cpu(datasets: Path, graph: str) -> None:
    from kernels.labeling import LabelingOptions, build_labels

    parsed = read_graph(datasets / f"{graph}.gra")
    dag = condense(Digraph.from_edges(parsed.num_nodes, parsed.src, parsed.dst)).dag
    indptr, indices, root = with_virtual_root(dag.out_indptr, dag.out_indices)
    orders = make_child_orders(indptr, indices, 3, seed=11)
    expected = label_all(indptr, orders, root)
    built = build_labels(indptr, orders, root, LabelingOptions(max_levels=1 << 16))
    for name, want, got in zip(
        ("post", "minpost", "tree_low"), expected, (built.post, built.minpost, built.tree_low), strict=True
    ):
        np.testing.assert_array_equal(got, want, err_msg=f"{graph} {name}")


@pytest.mark.parametrize("graph", dataset_graphs())
def test_queries_exact_on_gpu(datasets: Path, graph: str) -> None:
    from kernels.search import search_pairs

    index = ReachabilityIndex.from_file(datasets / f"{graph}.gra", backend="cuda")
    arrays = index.arrays
    for kind in ("que", "pos.que"):
        pairs = np.loadtxt(datasets / f"{graph}.{kind}", dtype=np.int64, ndmin=2)
        truth = np.loadtxt(datasets / f"{graph}.{kind.replace('que', 'ans')}", dtype=np.int64).astype(bool)
        ids = index.names.lookup(pairs)
        np.testing.assert_array_equal(index.query_batch(pairs), truth, err_msg=f"{graph}.{kind} via the index")
        undecided = np.flatnonzero(filter_pairs(index.hot, ids) == UNDECIDED)
        found = search_pairs(index.hot, arrays.comp[ids[undecided, 0]], arrays.comp[ids[undecided, 1]])
        np.testing.assert_array_equal(found, truth[undecided], err_msg=f"{graph}.{kind} GPU search")
        every = search_pairs(index.hot, arrays.comp[ids[:, 0]], arrays.comp[ids[:, 1]])
        np.testing.assert_array_equal(every, truth, err_msg=f"{graph}.{kind} GPU search of all pairs")

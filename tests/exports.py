"""Graphs as users export them: a random named graph with cycles, self loops, repeated edges and isolated nodes,
written by the real tools (pandas, networkx, scipy, pyarrow) in every format grail reads.

``EXPORTS`` maps a name to a writer ``(graph, folder) -> Export``: the file, the ``read_graph`` arguments that
read it, the names each node has in it, and which nodes it knows (an edge list knows no isolated node).
"""

from __future__ import annotations

import gzip
import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tests.reference import reachability_matrix

__all__ = ["NamedGraph", "Export", "EXPORTS", "named_graph", "check_index"]

# Names that CSV must quote (commas, quotes, semicolons, tabs, a leading '#'), and unicode.
TRICKY = ["lib 0, v0", 'say "hi"', "#tag", "a;b", "tab\there", "zürich", "東京", "%pct", "x" * 40, "{brace}"]
# Names that text formats separate by blanks can hold: no blanks, quotes, '#' or delimiters.
PLAIN = ["zürich", "東京", "node-7", "a.b", "x" * 40, "v(1)", "λ", "n_0"]


@dataclass
class NamedGraph:
    names: list[Any]  # node i's name
    edges: list[tuple[int, int]]  # directed, over node indices

    @property
    def n(self) -> int:
        return len(self.names)

    def df(self, **extra: Any) -> Any:
        import pandas as pd

        columns = {"source": [self.names[u] for u, _ in self.edges], "target": [self.names[v] for _, v in self.edges]}
        return pd.DataFrame(extra | columns)

    def networkx(self, directed: bool = True) -> Any:
        import networkx as nx

        graph = nx.MultiDiGraph() if directed else nx.MultiGraph()
        graph.add_nodes_from(self.names)
        for k, (u, v) in enumerate(self.edges):
            graph.add_edge(self.names[u], self.names[v], weight=k / 7)
        return graph

    def matrix(self) -> Any:
        import scipy.sparse as sp

        rows, cols = zip(*self.edges, strict=True) if self.edges else ((), ())
        matrix = sp.coo_array((np.ones(len(rows)), (rows, cols)), shape=(self.n, self.n)).tocsr()
        matrix.sum_duplicates()
        return matrix


def named_graph(seed: int, n: int = 24, kind: str = "tricky") -> NamedGraph:
    """A random graph with cycles (a ring through some nodes), repeated edges, self loops and isolated nodes;
    names ``tricky`` (for formats that quote), ``plain`` (for blank-separated text) or ``int``."""
    rng = random.Random(seed)
    if kind == "int":
        names: list[Any] = rng.sample(range(-(2**40), 2**40), n)
    else:
        pool = TRICKY if kind == "tricky" else PLAIN
        names = [f"{pool[i % len(pool)]}{i}" if i >= len(pool) else pool[i] for i in range(n)]
        rng.shuffle(names)
    ring = rng.sample(range(n - 3), 6)
    edges = [(ring[i], ring[(i + 1) % len(ring)]) for i in range(len(ring))]
    edges += [(rng.randrange(n - 3), rng.randrange(n - 3)) for _ in range(int(1.3 * n))]
    edges += [*edges[:3], (ring[0], ring[0])]
    return NamedGraph(names, edges)  # nodes n-3 .. n-1 are isolated


@dataclass
class Export:
    path: Path
    options: dict[str, Any] = field(default_factory=dict)  # read_graph keyword arguments
    names: list[Any] | None = None  # node i's name in this file (default: the graph's)
    isolated: bool = True  # whether the file keeps isolated nodes
    undirected: bool = False  # the file says its edges run both ways

    @property
    def format(self) -> str | None:
        return self.options.get("format")


def _csv(graph: NamedGraph, folder: Path, name: str, **to_csv: Any) -> Export:
    path = folder / name
    graph.df(weight=np.arange(len(graph.edges)) / 3).to_csv(path, **to_csv)
    return Export(path, {"format": "edgelist"}, isolated=False)


def _pandas_index(graph: NamedGraph, folder: Path) -> Export:
    path = folder / "pandas_index.csv"
    graph.df().to_csv(path)  # pandas' default: the index column first
    return Export(path, {"format": "edgelist"}, isolated=False)


def _networkx_edgelist(graph: NamedGraph, folder: Path) -> Export:
    import networkx as nx

    path = folder / "networkx.edgelist"
    nx.write_edgelist(graph.networkx(), path)  # with the data: "u v {'weight': 0.5}"
    return Export(path, {"format": "edgelist"}, isolated=False)


def _networkx_tsv(graph: NamedGraph, folder: Path) -> Export:
    import networkx as nx

    path = folder / "networkx.tsv.gz"
    nx.write_edgelist(graph.networkx(), path, delimiter="\t", data=False)
    return Export(path, {"format": "edgelist"}, isolated=False)


def _adjlist(graph: NamedGraph, folder: Path) -> Export:
    import networkx as nx

    path = folder / "networkx.adjlist"
    nx.write_adjlist(graph.networkx(), path)
    return Export(path, {"format": "adjlist"})


def _graphml(graph: NamedGraph, folder: Path, directed: bool = True) -> Export:
    import networkx as nx

    path = folder / f"networkx-{'directed' if directed else 'undirected'}.graphml"
    nx.write_graphml(graph.networkx(directed), path)
    return Export(path, {"format": "graphml"}, undirected=not directed)


def _node_link(graph: NamedGraph, folder: Path, key: str = "links", directed: bool = True) -> Export:
    import networkx as nx

    path = folder / f"node-link-{key}-{directed}.json"
    document = nx.node_link_data(graph.networkx(directed), edges=key)
    path.write_text(json.dumps(document))
    return Export(path, {"format": "json"}, undirected=not directed)


def _mtx(graph: NamedGraph, folder: Path, symmetric: bool = False) -> Export:
    import scipy.io

    path = folder / f"scipy-{'symmetric' if symmetric else 'general'}.mtx"
    matrix = graph.matrix()
    if symmetric:
        matrix = (matrix + matrix.T).tocoo()
    scipy.io.mmwrite(path, matrix)
    head = path.read_text().split("\n", 1)[0]
    assert ("symmetric" in head) == symmetric, head
    return Export(path, {"format": "mtx"}, names=list(range(1, graph.n + 1)), undirected=symmetric)


def _parquet(graph: NamedGraph, folder: Path) -> Export:
    path = folder / "pandas.parquet"
    frame = graph.df(weight=np.arange(len(graph.edges)) * 0.5)
    frame.index = frame.index * 3  # not a RangeIndex: pandas keeps it as a column, __index_level_0__
    frame.to_parquet(path)
    return Export(path, {"format": "parquet"}, isolated=False)


def _arrow_file(graph: NamedGraph, folder: Path) -> Export:
    path = folder / "pandas.feather"
    graph.df().to_feather(path)
    return Export(path, {"format": "arrow"}, isolated=False)


def _arrow_stream(graph: NamedGraph, folder: Path) -> Export:
    import pyarrow as pa

    path = folder / "pyarrow.arrows"
    sources = pa.array([graph.names[u] for u, _ in graph.edges]).dictionary_encode()
    table = pa.table({"from": sources, "to": [graph.names[v] for _, v in graph.edges]})
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
        for batch in table.to_batches(max_chunksize=7):
            writer.write_batch(batch)
    return Export(path, {"format": "arrow"}, isolated=False)


def _gzip(export: Export) -> Export:
    gzipped = export.path.with_name(export.path.name + ".gz")
    gzipped.write_bytes(gzip.compress(export.path.read_bytes()))
    return Export(gzipped, export.options, export.names, export.isolated, export.undirected)


Writer = Callable[[NamedGraph, Path], Export]

# name -> (the names it can carry, writer)
EXPORTS: dict[str, tuple[str, Writer]] = {
    "csv-pandas-index": ("tricky", _pandas_index),
    "csv-pandas": ("tricky", lambda g, f: _csv(g, f, "pandas.csv", index=False)),
    "tsv-pandas": ("tricky", lambda g, f: _csv(g, f, "pandas.tsv", index=False, sep="\t")),
    "csv-excel-semicolon-bom": (
        "tricky",
        lambda g, f: _csv(g, f, "excel.csv", index=False, sep=";", encoding="utf-8-sig", lineterminator="\r\n"),
    ),
    "csv-pandas-gzip": ("tricky", lambda g, f: _csv(g, f, "pandas.csv.gz", index=False)),
    "edgelist-networkx": ("plain", _networkx_edgelist),
    "edgelist-networkx-int": ("int", _networkx_edgelist),
    "tsv-networkx-gzip": ("plain", _networkx_tsv),
    "adjlist-networkx": ("plain", _adjlist),
    "graphml-networkx": ("tricky", _graphml),
    "graphml-networkx-undirected": ("tricky", lambda g, f: _graphml(g, f, directed=False)),
    "graphml-networkx-int": ("int", _graphml),
    "json-node-link": ("tricky", _node_link),
    "json-node-link-edges-undirected": ("tricky", lambda g, f: _node_link(g, f, "edges", directed=False)),
    "mtx-scipy": ("int", _mtx),
    "mtx-scipy-symmetric": ("int", lambda g, f: _gzip(_mtx(g, f, symmetric=True))),
    "parquet-pandas": ("tricky", _parquet),
    "parquet-pandas-int": ("int", _parquet),
    "arrow-feather-pandas": ("tricky", _arrow_file),
    "arrow-stream-pyarrow": ("tricky", _arrow_stream),
}


def check_index(index: Any, graph: NamedGraph, export: Export) -> None:
    """The index answers every pair of the nodes the file knows as breadth-first search does, by name."""
    edges = graph.edges + ([(v, u) for u, v in graph.edges] if export.undirected else [])
    truth = reachability_matrix(graph.n, edges)
    names = export.names or graph.names
    known = range(graph.n) if export.isolated else sorted({u for edge in graph.edges for u in edge})
    assert sorted(map(str, index.names.names_of(range(index.names.size)))) == sorted(str(names[u]) for u in known)
    pairs = [[names[u], names[v]] for u in known for v in known]
    expected = [bool(truth[u, v]) for u in known for v in known]
    assert index.query_batch(pairs).tolist() == expected

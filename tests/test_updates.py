"""Edge updates against brute force: random interleavings of added and removed edges (new nodes too),
queries of every kind, rebuilds and save/load, on graphs with cycles, self loops and duplicate edges; every
answer must hold for the graph as updated so far."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from grail_core import InvalidParameterError, ReachabilityIndex, UnknownNodeError
from grail_core.names import NameTokens
from tests.reference import bfs_distances, reachability_matrix
from tests.strategies import digraphs
from tests.test_paths import check_path


class UpdatedGraph(RuleBasedStateMachine):
    """The index beside the set of edges it should answer for (node names: integers, or strings 'n<i>')."""

    @initialize(
        graph=digraphs(max_nodes=24),
        strings=st.booleans(),
        dims=st.integers(1, 3),
        hubs=st.sampled_from([0, 3, 64]),
    )
    def build(self, graph: tuple[int, list[tuple[int, int]]], strings: bool, dims: int, hubs: int) -> None:
        n, edges = graph
        self.strings = strings
        self.nodes: list = [self.name(i) for i in range(n)]
        self.edges = {(self.name(u), self.name(v)) for u, v in edges if u != v}
        lines = "".join(f"{self.name(u)} {self.name(v)}\n" for u, v in edges)
        lines += "".join(f"{self.name(i)} {self.name(i)}\n" for i in range(n))  # every node, isolated ones too
        self.index = ReachabilityIndex.from_bytes(
            lines.encode(), format="edgelist", dims=dims, hubs=hubs, backend="cpu"
        )
        self.version = self.index.version
        self.fresh = 1000

    def name(self, i: int):
        return f"n{i}" if self.strings else i

    def node(self, data: st.DataObject, new: bool = False):
        if new and data.draw(st.integers(0, 5)) == 0:
            self.fresh += 1
            return self.name(self.fresh)
        return data.draw(st.sampled_from(self.nodes))

    def apply(self, add: list, remove: list) -> None:
        result = self.index.update(add=add, remove=remove)
        self.version += 1
        assert result.version == self.version == self.index.version
        before = set(self.edges)
        for u, v in add:
            for node in (u, v):
                if node not in self.nodes:
                    self.nodes.append(node)
            if u != v:
                self.edges.add((u, v))
        self.edges -= {(u, v) for u, v in remove}
        assert (result.added, result.removed) == (len(self.edges - before), len(before - self.edges))

    @rule(data=st.data(), count=st.integers(1, 4))
    def add(self, data: st.DataObject, count: int) -> None:
        self.apply([[self.node(data, new=True), self.node(data, new=True)] for _ in range(count)], [])

    @rule(data=st.data(), count=st.integers(1, 4))
    def remove(self, data: st.DataObject, count: int) -> None:
        present = sorted(self.edges, key=str)
        remove = []
        for _ in range(count):
            if present and data.draw(st.booleans()):
                remove.append(list(data.draw(st.sampled_from(present))))
            else:  # an edge the graph may not have: changes nothing
                remove.append([self.node(data), self.node(data)])
        remove = [edge for i, edge in enumerate(remove) if edge not in remove[:i]]
        self.apply([], remove)

    @rule(data=st.data())
    def add_and_remove(self, data: st.DataObject) -> None:
        add = [[self.node(data, new=True), self.node(data)] for _ in range(2)]
        remove = [list(edge) for edge in sorted(self.edges, key=str)[:2] if list(edge) not in add]
        self.apply(add, remove)

    @rule()
    def rebuild(self) -> None:
        self.index.rebuild()
        assert self.index.version == self.version and self.index.pending.updates == 0

    @rule()
    def save_and_load(self) -> None:
        with tempfile.TemporaryDirectory() as folder:
            self.index.save(Path(folder) / "index")
            loaded = ReachabilityIndex.load(Path(folder) / "index", backend="cpu")
        assert loaded.version == self.version and loaded.checksum == self.index.checksum
        self.index = loaded

    def truth(self) -> tuple[dict, np.ndarray, list[tuple[int, int]]]:
        position = {node: i for i, node in enumerate(self.nodes)}
        edges = [(position[u], position[v]) for u, v in self.edges]
        return position, reachability_matrix(len(self.nodes), edges), edges

    @invariant()
    def every_pair_is_exact(self) -> None:
        position, truth, _ = self.truth()
        pairs = [[u, v] for u in self.nodes for v in self.nodes]
        answers, stats = self.index.query_batch_with_stats(pairs)
        assert stats.version == self.version
        np.testing.assert_array_equal(answers, truth.ravel())
        for u, v in pairs[:: max(1, len(pairs) // 20)]:
            answer = self.index.query_pair(u, v)
            assert (answer.reachable, answer.version) == (truth[position[u], position[v]], self.version)

    @rule()
    def batches_of_every_form(self) -> None:
        _, truth, _ = self.truth()
        pairs = [[u, v] for u in self.nodes for v in self.nodes]
        np.testing.assert_array_equal(self.index.query_batch(np.array(pairs, dtype=object)), truth.ravel())
        if self.strings:
            tokens = NameTokens.from_strings([name for pair in pairs for name in pair])
            np.testing.assert_array_equal(self.index.query_batch(tokens), truth.ravel())
        else:
            np.testing.assert_array_equal(self.index.query_batch(np.array(pairs, dtype=np.int64)), truth.ravel())

    @invariant()
    def paths_and_listings_are_exact(self) -> None:
        position, truth, edges = self.truth()
        np.fill_diagonal(truth, False)
        edge_set = set(self.edges)
        nodes = np.array(self.nodes, dtype=object)
        for node in self.nodes[:: max(1, len(self.nodes) // 3)]:
            i = position[node]
            distances = bfs_distances(len(self.nodes), edges, i)
            for target in self.nodes:
                check_path(self.index.path(node, target), node, target, edge_set, distances[position[target]])
            below, above = nodes[truth[i]], nodes[truth[:, i]]
            assert sorted(self.index.descendants(node).tolist(), key=str) == sorted(below.tolist(), key=str)
            assert sorted(self.index.ancestors(node).tolist(), key=str) == sorted(above.tolist(), key=str)
            assert self.index.count_descendants(node).total == below.size
            assert self.index.count_ancestors(node).total == above.size


UpdatedGraph.TestCase.settings = settings(
    max_examples=30, stateful_step_count=8, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
test_updates_match_brute_force = UpdatedGraph.TestCase


def test_update_errors_change_nothing() -> None:
    index = ReachabilityIndex.from_bytes(b"a b\nb c\n", backend="cpu")
    with pytest.raises(UnknownNodeError):
        index.remove_edges([["a", "zz"]])
    with pytest.raises(InvalidParameterError, match="both added and removed"):
        index.update(add=[["a", "c"]], remove=[["a", "c"]])
    with pytest.raises(InvalidParameterError, match="pair"):
        index.add_edges([["a", "b", "c"]])
    with pytest.raises(InvalidParameterError, match="cannot name a node"):
        index.add_edges([["a", True]])
    integers = ReachabilityIndex.from_edges(np.array([[0, 1]]), backend="cpu")
    with pytest.raises(InvalidParameterError, match="integers"):
        integers.add_edges([[0, "x"]])
    assert index.version == integers.version == 1 and index.pending.updates == 0
    assert index.add_edges([["c", "a"]]).version == 2 and index.reachable("c", "b")


def test_staged_versions_wait_for_publish() -> None:
    index = ReachabilityIndex.from_edges(np.array([[0, 1]]), backend="cpu")
    result = index.update(add=[[1, 2]], publish=False)
    assert result.version == 2 and index.version == 1 and index.staged_version == 2
    with pytest.raises(UnknownNodeError):
        index.reachable(0, 2)
    index.publish(2)
    assert index.version == 2 and index.reachable(0, 2)


def test_a_version_answers_for_its_number_whatever_comes_after() -> None:
    index = ReachabilityIndex.from_bytes(b"a b\nb c\nd d\n", backend="cpu")
    before = index.current()
    index.update(add=[["c", "x"], ["d", "a"]], remove=[["a", "b"]])
    after = index.current()
    assert (before.number, after.number, index.version) == (1, 2, 2)
    # The version taken first still answers for the graph a -> b -> c, d: names, pairs, paths, listings.
    assert before.reachable("a", "c") and not before.reachable("d", "a")
    assert before.query_batch_with_stats([["a", "c"], ["d", "c"]])[1].version == 1
    assert before.path("a", "c") == ["a", "b", "c"] and before.path("d", "c") is None
    assert sorted(before.descendants("a").tolist()) == ["b", "c"] and before.count_ancestors("c").total == 2
    with pytest.raises(UnknownNodeError):
        before.reachable("a", "x")
    # The next one answers for d -> a, b -> c -> x.
    assert not after.reachable("a", "c") and after.reachable("d", "a") and after.reachable("b", "x")
    assert after.path("d", "a") == ["d", "a"] and after.path("b", "x") == ["b", "c", "x"]
    assert sorted(after.ancestors("x").tolist()) == ["b", "c"] and after.count_descendants("d").total == 1
    # Updates extend the newest version only.
    with pytest.raises(InvalidParameterError, match="not the graph's newest"):
        before.updated(add=[["a", "d"]])
    assert after.updated(add=[["x", "d"]]).reachable("b", "d") and not after.reachable("b", "d")

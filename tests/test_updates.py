"""Edge updates against brute force: random interleavings of added and removed edges (new nodes too, edges
added back, components split and joined), queries of every kind, versions staged but not published,
journals folded at once, rebuilds and save/load, on graphs with cycles, self loops, duplicate edges and
isolated nodes; every answer must hold for the graph as updated so far, and versions taken earlier must go on
answering for the graph as it was then."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from grail_core import InvalidParameterError, ReachabilityIndex, UnknownNodeError
from grail_core.names import NameTokens
from grail_core.parallel import numba_threads
from grail_core.pending import DOWN_NO, RM_DOWN, RM_UP, UP_NO
from grail_core.query import SearchBuffers
from tests.reference import bfs_distances, reachability_matrix, reachable_pairs
from tests.strategies import cycle_chains, digraphs
from tests.test_paths import check_path

pytestmark = pytest.mark.usefixtures("updates_kept")  # they test the answers with updates pending


def check_open_rows(index: ReachabilityIndex) -> None:
    """Every DAG node whose UP_NO or RM_UP holds a bit is in ``open_sources``, and every one whose DOWN_NO or
    RM_DOWN does is in ``open_targets``: the verdicts take the labels' answer for pairs from (to) the others
    without reading a mask."""
    p = index.current()._updates()
    for bits, columns in ((p.open_sources, (UP_NO, RM_UP)), (p.open_targets, (DOWN_NO, RM_DOWN))):
        opened = np.unpackbits(np.asarray(bits).view(np.uint8), bitorder="little").astype(bool)
        rows = (p.masks[:, columns[0]] | p.masks[:, columns[1]]) != 0
        missing = np.flatnonzero(rows & ~opened[: rows.size])
        assert missing.size == 0, (columns, missing)


class UpdatedGraph(RuleBasedStateMachine):
    """The index beside the set of edges it should answer for (node names: integers, or strings 'n<i>')."""

    @initialize(
        graph=st.one_of(digraphs(max_nodes=24), cycle_chains(max_cycles=6)),
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
        self.base_lines = lines.encode()
        self.version = self.index.version
        self.fresh = 1000
        self.gone: list = []  # edges removed so far, to add back
        self.journal: list = []  # the updates since the last rebuild, for folding at once
        self.held: list = []  # versions taken earlier, with the nodes and edges they answer for

    def name(self, i: int):
        return f"n{i}" if self.strings else i

    def node(self, data: st.DataObject, new: bool = False):
        if new and data.draw(st.integers(0, 5)) == 0:
            self.fresh += 1
            return self.name(self.fresh)
        return data.draw(st.sampled_from(self.nodes))

    def apply(self, add: list, remove: list, publish: bool = True) -> None:
        result = self.index.update(add=add, remove=remove, publish=publish)
        self.version += 1
        assert result.version == self.version
        before = set(self.edges)
        for u, v in add:
            for node in (u, v):
                if node not in self.nodes:
                    self.nodes.append(node)
            if u != v:
                self.edges.add((u, v))
        self.edges -= {(u, v) for u, v in remove}
        self.gone += sorted(before - self.edges, key=str)
        self.journal.append((add, remove))
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
    def add_back(self, data: st.DataObject) -> None:
        """Edges removed before come back (those of the labels' graph, and added ones)."""
        back = [list(edge) for edge in self.gone[-3:] if edge not in self.edges]
        if back:
            self.apply(data.draw(st.permutations(back)), [])

    @rule(data=st.data())
    def split_a_component(self, data: st.DataObject) -> None:
        """Remove an edge between two nodes that reach each other (it may split their component)."""
        _, truth, _ = self.truth()
        position = {node: i for i, node in enumerate(self.nodes)}
        inside = [edge for edge in sorted(self.edges, key=str) if truth[position[edge[1]], position[edge[0]]]]
        if inside:
            self.apply([], [list(data.draw(st.sampled_from(inside)))])

    @rule(data=st.data())
    def join_components(self, data: st.DataObject) -> None:
        """Close a cycle: an edge back from a node to one that reaches it."""
        _, truth, _ = self.truth()
        pairs = np.argwhere(truth & ~np.eye(len(self.nodes), dtype=bool))
        if pairs.size:
            u, v = pairs[data.draw(st.integers(0, len(pairs) - 1))].tolist()
            self.apply([[self.nodes[v], self.nodes[u]]], [])

    @rule(data=st.data(), count=st.integers(1, 3))
    def staged_versions_stay_unseen(self, data: st.DataObject, count: int) -> None:
        """Updates staged but not published change no answer until they are; then they all show."""
        position, truth, _ = self.truth()
        seen = [node for node in self.nodes if node in position]
        published = self.index.version
        for _ in range(count):
            edge = [self.node(data), self.node(data)]
            if edge[0] != edge[1] and tuple(edge) in self.edges:
                self.apply([], [edge], publish=False)
            else:
                self.apply([edge], [], publish=False)
            pairs = [[u, v] for u in seen for v in seen]
            answers, stats = self.index.query_batch_with_stats(pairs)
            assert stats.version == published
            np.testing.assert_array_equal(answers, truth.ravel())
        self.index.publish(self.version)

    @rule()
    def fold_the_journal(self) -> None:
        """The updates since the labels, folded at once into a fresh copy, answer as applied one by one."""
        if not self.journal:
            return
        folded = ReachabilityIndex.from_bytes(self.base_lines, format="edgelist", backend="cpu")
        result = folded.update_many(self.journal)
        assert result.version == folded.version == folded.current().labels.version + len(self.journal)
        assert folded.pending[1:] == self.index.pending[1:]
        check_open_rows(folded)
        pairs = [[u, v] for u in self.nodes for v in self.nodes]
        np.testing.assert_array_equal(folded.query_batch(pairs), self.truth()[1].ravel())
        src, dst = folded.edges()
        names = folded.names_of_ids(np.concatenate([src, dst])).tolist()
        edges = set(zip(names[: src.size], names[src.size :], strict=True))
        assert edges == self.edges, (edges, self.edges, self.journal)

    @rule(data=st.data())
    def add_and_remove(self, data: st.DataObject) -> None:
        add = [[self.node(data, new=True), self.node(data)] for _ in range(2)]
        remove = [list(edge) for edge in sorted(self.edges, key=str)[:2] if list(edge) not in add]
        self.apply(add, remove)

    @rule()
    def hold_this_version(self) -> None:
        """A request takes the version current now; it must answer as it does now whatever comes after."""
        if len(self.held) < 3:
            self.held.append((self.index.current(), list(self.nodes), set(self.edges)))

    @invariant()
    def held_versions_answer_as_they_did(self) -> None:
        for version, nodes, edges in self.held:
            position = {node: i for i, node in enumerate(nodes)}
            truth = reachability_matrix(len(nodes), [(position[u], position[v]) for u, v in edges])
            pairs = [[u, v] for u in nodes for v in nodes]
            answers, stats = version.query_batch_with_stats(pairs)
            np.testing.assert_array_equal(answers, truth.ravel())
            assert stats.version == version.number
            assert [version.reachable(u, v) for u, v in pairs[::7]] == truth.ravel()[::7].tolist()
            node = nodes[len(nodes) // 2]
            i = position[node]
            below = [nodes[j] for j in np.flatnonzero(truth[i]) if j != i]
            assert sorted(version.descendants(node).tolist(), key=str) == sorted(below, key=str)
            assert version.count_ancestors(node).total == int(truth[:, i].sum()) - 1

    @rule()
    def rebuild(self) -> None:
        self.index.rebuild()
        assert self.index.version == self.version and self.index.pending.updates == 0
        self.restart_journal()

    def restart_journal(self) -> None:
        """The labels now hold the graph as it is: a later fold starts from it."""
        src, dst = self.index.edges()
        names = self.index.names_of_ids(np.concatenate([src, dst])).tolist()
        lines = [f"{u} {v}\n" for u, v in zip(names[: len(src)], names[len(src) :], strict=True)]
        lines += [f"{node} {node}\n" for node in self.nodes]
        self.base_lines = "".join(lines).encode()
        self.journal = []

    @rule()
    def save_and_load(self) -> None:
        with tempfile.TemporaryDirectory() as folder:
            self.index.save(Path(folder) / "index")
            loaded = ReachabilityIndex.load(Path(folder) / "index", backend="cpu")
        assert loaded.version == self.version and loaded.checksum == self.index.checksum
        assert loaded.pending[1:] == self.index.pending[1:]
        self.index = loaded

    def truth(self) -> tuple[dict, np.ndarray, list[tuple[int, int]]]:
        position = {node: i for i, node in enumerate(self.nodes)}
        edges = [(position[u], position[v]) for u, v in self.edges]
        return position, reachability_matrix(len(self.nodes), edges), edges

    @invariant()
    def every_pair_is_exact(self) -> None:
        check_open_rows(self.index)
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
            for forward, expected in ((True, truth[i]), (False, truth[:, i])):
                listing = self.index.listing(node, forward)
                whole = listing.page()
                assert listing.count == whole.size == int(expected.sum())
                pages = list(listing.pages(offset=1, limit=5, size=2))
                assert all(0 < page.size <= 2 for page in pages)
                np.testing.assert_array_equal(np.concatenate([whole[:0], *pages]), whole[1:6])


UpdatedGraph.TestCase.settings = settings(
    max_examples=30, stateful_step_count=10, deadline=None, suppress_health_check=[HealthCheck.too_slow]
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


def test_many_updates_match_brute_force_and_fold_the_same() -> None:
    """Hundreds of updates on a graph with cycles, beyond the masks' bits (every witness taken, every group
    used): edges removed, added back, added between new nodes, cycles closed and broken; the answers equal
    BFS on the updated graph as it goes, and the same journal folded at once answers the same."""
    rng = np.random.default_rng(5)
    n = 300
    start = {tuple(edge) for edge in rng.integers(0, n, size=(700, 2)).tolist()}
    edges = set(start)
    src, dst = np.array(sorted(start)).T
    index = ReachabilityIndex.from_edges(src, dst, num_nodes=n, backend="cpu", hubs=8)
    journal: list = []
    gone: list = []
    nodes = n
    for step in range(600):
        kind = step % 4
        if kind == 0 and edges:
            edge = sorted(edges)[int(rng.integers(len(edges)))]
            update = ([], [list(edge)])
            gone.append(edge)
        elif kind == 1 and gone:
            update = ([list(gone[int(rng.integers(len(gone)))])], [])
        elif kind == 2:
            u = int(rng.integers(nodes + 1))  # a new node now and then
            update = ([[u, int(rng.integers(nodes))]], [])
        else:
            update = ([[int(rng.integers(nodes)), int(rng.integers(nodes))]], [])
        index.update(*update)
        journal.append(update)
        for u, v in update[0]:
            nodes = max(nodes, u + 1, v + 1)
            if u != v:
                edges.add((u, v))
        edges -= {tuple(edge) for edge in update[1]}
        if step % 150 == 149:
            pairs = rng.integers(0, nodes, size=(4000, 2))
            truth = reachable_pairs(nodes, np.array(sorted(edges)), pairs)
            np.testing.assert_array_equal(index.query_batch(pairs), truth)
            assert [index.reachable(u, v) for u, v in pairs[:100].tolist()] == truth[:100].tolist()
    pairs = rng.integers(0, nodes, size=(6000, 2))
    truth = reachable_pairs(nodes, np.array(sorted(edges)), pairs)
    folded = ReachabilityIndex.from_edges(src, dst, num_nodes=n, backend="cpu", hubs=8)
    folded.update_many(journal)
    assert folded.pending[1:] == index.pending[1:] and folded.version == index.version
    check_open_rows(index)
    check_open_rows(folded)
    np.testing.assert_array_equal(index.query_batch(pairs), truth)
    np.testing.assert_array_equal(folded.query_batch(pairs), truth)
    assert [folded.reachable(u, v) for u, v in pairs[:200].tolist()] == truth[:200].tolist()


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


def test_search_seconds_count_the_searches_that_updates_leave_and_a_rebuild_ends() -> None:
    """``Version.search_seconds``: only pairs searched on the updated graph count (none on the labels' own
    version), batches and single pairs alike, shared by every version of one labels; a rebuild starts at 0."""
    ring = "".join(f"{i} {(i + 1) % 60}\n" for i in range(60)).encode()
    index = ReachabilityIndex.from_bytes(ring, format="edgelist", backend="cpu")
    pairs = [[u, v] for u in range(60) for v in range(60)]
    assert index.query_batch(pairs).all() and index.current().search_seconds == 0.0
    index.remove_edges([[0, 1]])  # the ring is a path from 1 to 0 now: most pairs are searched
    updated = index.current()
    answers, stats = updated.query_batch_with_stats(pairs)
    assert stats.searched_updated > 0 and answers.sum() == 60 * 61 // 2
    after_batch = updated.search_seconds
    assert after_batch > 0.0
    answer = updated.query_pair(5, 3)  # 5 reaches 3 no longer: a search on the updated graph
    assert answer.searched and not answer.reachable and updated.search_seconds > after_batch
    answered = updated.search_seconds
    with updated._lineage.searching():  # a search under way counts as it runs
        time.sleep(0.01)
        assert updated.search_seconds >= answered + 0.01
    index.add_edges([[70, 71]])
    assert index.current().search_seconds == updated.search_seconds
    index.rebuild()
    assert index.current().search_seconds == 0.0 and not index.reachable(5, 3)


def test_a_removed_edge_loses_the_pairs_above_and_below_it() -> None:
    """Removing x -> y loses s -> t, s two levels above x and t below y: what reaches x and no longer reaches
    y, and what y reaches and x no longer does, are marked beyond the edge's ends (c, b still reach y; z, w
    stay below x)."""
    index = ReachabilityIndex.from_bytes(
        b"s a\na x\nx y\ny t\nt u\nx z\nz w\nc b\nb y\ns q\nq w\n", format="edgelist", backend="cpu"
    )
    index.remove_edges([["x", "y"]])
    lost = [["s", "t"], ["s", "u"], ["a", "y"], ["a", "u"], ["x", "t"], ["s", "y"]]
    kept = [["c", "u"], ["b", "t"], ["s", "w"], ["a", "z"], ["x", "w"], ["y", "u"]]
    assert not index.query_batch(lost).any()
    assert index.query_batch(kept).all()
    assert [index.reachable(u, v) for u, v in lost + kept] == [False] * len(lost) + [True] * len(kept)


def test_removed_edges_of_a_deep_dag_mark_only_what_they_cut() -> None:
    """On a DAG of 1,000 levels, removed edges mark only what reaches an edge's source and no longer its
    target, and what its target reaches and the source no longer does: edges with a bypass mark nothing (no
    pair is searched), and the answers after edges without one equal BFS on the updated graph."""
    from grail_core.synthetic import downward_walk_pairs, layered_dag

    n = 20_000
    indptr, indices = layered_dag(n, 1_000, 3.0, 4, seed=3)
    src = np.repeat(np.arange(n), np.diff(indptr))
    edges = np.column_stack([src, indices])
    rng = np.random.default_rng(4)
    walks = np.column_stack(downward_walk_pairs(indptr, indices, 4000, seed=5))
    pairs = np.concatenate([walks, rng.integers(0, n, size=(4000, 2))])
    tried = rng.choice(edges.shape[0], size=3000, replace=False)
    bypassed = tried[reachable_pairs(n, np.delete(edges, tried, axis=0), edges[tried])][:20]
    picked = tried[:40]
    assert bypassed.size == 20
    for gone in (bypassed, picked):
        index = ReachabilityIndex.from_edges(src, indices, num_nodes=n, backend="cpu")
        for e in gone:
            index.remove_edges([edges[e].tolist()])
        answers, stats = index.query_ids(pairs)
        np.testing.assert_array_equal(answers, reachable_pairs(n, np.delete(edges, gone, axis=0), pairs))
        assert stats.searched_updated == 0 or gone is picked


def test_pairs_only_added_edges_may_join_take_the_labels_yes_first() -> None:
    """A pair the labels leave to a search, that no removal touches but an added edge may join, takes the
    labels' graph's YES as it is (no search on the updated graph); its NO is searched on the updated graph.
    Both kinds occur on a deep DAG with edges added like its own, and every answer equals BFS. While no
    added edge leads against the topological order, a pair whose source comes after its target is NO."""
    from grail_core.dynamic import verdicts
    from grail_core.pending import BASE_FIRST
    from grail_core.query import frozen
    from grail_core.records import NO, UNDECIDED
    from grail_core.synthetic import downward_walk_pairs, layered_dag

    n = 20_000
    indptr, indices = layered_dag(n, 1_000, 3.0, 4, seed=7)
    src = np.repeat(np.arange(n), np.diff(indptr))
    rng = np.random.default_rng(8)
    walks = np.column_stack(downward_walk_pairs(indptr, indices, 6000, seed=9))
    pairs = np.concatenate([walks, rng.integers(0, n, size=(6000, 2))])
    index = ReachabilityIndex.from_edges(src, indices, num_nodes=n, backend="cpu")
    # Edges like the graph's own: from a node to one 1-8 levels (of 20 nodes) below, in the labels'
    # topological order (the component ids): then a pair whose source comes after its target stays NO.
    comp = index.current().labels.views.forward().comp
    tails = rng.integers(0, n - 200, size=600)
    added = np.column_stack([tails, tails + rng.integers(20, 180, size=600)])
    added = added[comp[added[:, 0]] < comp[added[:, 1]]][:300]
    index.add_edges(added.tolist())
    version = index.current()
    # read-only contiguous pairs, a type the index's own queries use: Fortran-ordered ones are another numba
    # type, one more compile of the verdict kernels in this test
    codes = verdicts(version.search.hot, version._updates(), frozen(pairs))
    assert (codes[comp[pairs[:, 0]] > comp[pairs[:, 1]]] == NO).all()
    first = np.flatnonzero(codes == BASE_FIRST)
    base_edges = np.column_stack([src, indices])
    on_labels = reachable_pairs(n, base_edges, pairs[first])
    truth = reachable_pairs(n, np.concatenate([base_edges, added]), pairs)
    assert on_labels.any() and not on_labels.all()
    answers, stats = index.query_ids(pairs)
    np.testing.assert_array_equal(answers, truth)
    assert stats.searched_updated == np.count_nonzero(codes == UNDECIDED) + np.count_nonzero(~on_labels)


def _split_ends(n: int, narrow_below: bool) -> tuple[int, int, list[tuple[int, int]]]:
    """The removed edge (x, y) of a 300-node component and the edges around it of the split tests."""
    if narrow_below:
        x, y = n - 1, 0
        # above the component: a, b; below: y alone reaches d -> e, a member reaches f
        return x, y, [(n, 5), (n + 1, n), (y, n + 2), (n + 2, n + 3), (7, n + 4)]
    # above: p -> x alone, q -> p; below: a member reaches g -> h
    return 0, 1, [(n, 0), (n + 1, n), (9, n + 2), (n + 2, n + 3)]


def _split_case(n: int, x: int, y: int, into: bool, extra: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """Nodes 0..n-1 in one component (the cycle 0 -> 1 -> ... -> 0 and chords i -> i + 2) in which x -> y is
    the only edge into y (``into``) or out of x, with ``extra`` edges around it; (edges, every pair of nodes)."""
    cycle = [(i, (i + 1) % n) for i in range(n)]
    chords = [(i, (i + 2) % n) for i in range(n) if ((i + 2) % n if into else i) != (y if into else x)]
    edges = np.array(cycle + chords + extra, dtype=np.int64)
    nodes = int(edges.max()) + 1
    pairs = np.argwhere(~np.eye(nodes, dtype=bool)).astype(np.int64)
    return edges, pairs


@pytest.mark.parametrize("narrow_below", [True, False])
def test_a_split_component_searches_only_the_pairs_it_separated(narrow_below: bool) -> None:
    """Removing the only edge into y (or out of x) of a large component splits off y alone (x alone): only
    pairs that end at y or below what y alone reaches (start at x or above what reaches x alone) are searched;
    every other pair of the component or through it stays decided, and every answer equals BFS. A second
    split and a removed edge leaving the broken component keep it so."""
    n = 300
    x, y, extra = _split_ends(n, narrow_below)
    edges, pairs = _split_case(n, x, y, narrow_below, extra)
    nodes = int(edges.max()) + 1
    index = ReachabilityIndex.from_edges(edges[:, 0], edges[:, 1], num_nodes=nodes, backend="cpu")
    index.remove_edges([[x, y]])
    kept = edges[~((edges[:, 0] == x) & (edges[:, 1] == y))]
    base = reachable_pairs(nodes, edges, pairs)
    if narrow_below:
        above, below = np.arange(1, n + 2), np.array([y, n + 2, n + 3])  # none of the rest reaches y now
    else:
        above, below = np.array([x, n, n + 1]), np.r_[1:n, n + 2, n + 3]  # x reaches none of the rest now
    expected = base & np.isin(pairs[:, 0], above) & np.isin(pairs[:, 1], below)
    answers, stats = index.query_ids(pairs)
    np.testing.assert_array_equal(answers, reachable_pairs(nodes, kept, pairs))
    assert stats.searched_updated == np.count_nonzero(expected) < pairs.shape[0] // 10
    # Another member split off, then an edge out of the component removed: still exact, still few searched.
    second = [n // 2, n // 2 + 2]
    index.remove_edges([second, [n // 2 + 1, n // 2 + 2]])
    index.remove_edges([list(extra[-1])] if narrow_below else [[9, n + 2]])
    kept = kept[
        ~np.isin(kept[:, 0] * nodes + kept[:, 1], [second[0] * nodes + second[1], (n // 2 + 1) * nodes + n // 2 + 2])
    ]
    kept = kept[~((kept[:, 0] == (7 if narrow_below else 9)) & (kept[:, 1] == (n + 4 if narrow_below else n + 2)))]
    answers, stats = index.query_ids(pairs)
    np.testing.assert_array_equal(answers, reachable_pairs(nodes, kept, pairs))
    assert stats.searched_updated < pairs.shape[0] // 5


def test_a_pair_whose_source_comes_farther_after_its_target_than_added_edges_climb_is_no() -> None:
    """On a deep DAG (5,000 levels, more DAG nodes than ``pending.ORDER_BANDS``), added edges that lead
    against the topological order by at most 50 DAG node ids each, 600 apart: a pair whose source comes more
    than 100 ids after its target is NO at once (no search on the updated graph), also where added edges of
    its rank group leave what its source reaches and enter what reaches its target; answers equal BFS."""
    from grail_core.dynamic import verdicts
    from grail_core.pending import ORDER_BANDS
    from grail_core.query import frozen
    from grail_core.records import NO
    from grail_core.synthetic import downward_walk_pairs, layered_dag

    n = 20_000
    indptr, indices = layered_dag(n, 5_000, 3.0, 4, seed=11)
    src = np.repeat(np.arange(n), np.diff(indptr))
    rng = np.random.default_rng(12)
    walks = np.column_stack(downward_walk_pairs(indptr, indices, 6000, seed=13))
    pairs = np.concatenate([walks, rng.integers(0, n, size=(6000, 2))])
    index = ReachabilityIndex.from_edges(src, indices, num_nodes=n, backend="cpu")
    comp = index.current().labels.views.forward().comp
    assert comp.max() + 1 > ORDER_BANDS
    node_of = np.argsort(comp)
    # Edges like the graph's own (1-9 levels of 4 nodes down), in the order, many in each rank group.
    tails = rng.integers(0, n - 40, size=2000)
    down = np.column_stack([tails, tails + rng.integers(4, 37, size=2000)])
    down = down[comp[down[:, 0]] < comp[down[:, 1]]][:1000]
    highs = np.arange(600, n, 600)
    up = np.column_stack([node_of[highs], node_of[highs - rng.integers(1, 51, size=highs.size)]])
    added = np.concatenate([down, up])
    index.add_edges(added.tolist())
    version = index.current()
    codes = verdicts(version.search.hot, version._updates(), frozen(pairs))
    far = comp[pairs[:, 0]] - comp[pairs[:, 1]] > 100
    assert far.sum() > 1000 and (codes[far] == NO).all()
    checked = pairs[::6]  # BFS over 5,000 levels is slow
    answers, _ = index.query_ids(checked)
    truth = reachable_pairs(n, np.concatenate([np.column_stack([src, indices]), added]), checked)
    np.testing.assert_array_equal(answers, truth)


@pytest.mark.parametrize("narrow_below", [True, False])
def test_a_folded_journal_marks_a_split_as_updates_one_by_one_do(narrow_below: bool) -> None:
    """The split of ``test_a_split_component_searches_only_the_pairs_it_separated``, and then more removals
    and additions, folded at once (as a restart or a rebuild folds a journal) on one index and staged one by
    one on another: the same pairs searched (only those the split separated, at first), answers equal BFS."""
    n = 300
    x, y, extra = _split_ends(n, narrow_below)
    edges, pairs = _split_case(n, x, y, narrow_below, extra)
    nodes = int(edges.max()) + 1
    journal = [([], [[x, y]])]
    later = [([], [[n // 2, n // 2 + 2], [n // 2 + 1, n // 2 + 2]]), ([[n + 3, 40]], []), ([], [list(extra[-1])])]
    for updates in (journal, journal + later):
        folded = ReachabilityIndex.from_edges(edges[:, 0], edges[:, 1], num_nodes=nodes, backend="cpu")
        one_by_one = ReachabilityIndex.from_edges(edges[:, 0], edges[:, 1], num_nodes=nodes, backend="cpu")
        folded.update_many(updates)
        for add, remove in updates:
            one_by_one.update(add=add, remove=remove)
        final = {tuple(e) for e in edges.tolist()}
        for add, remove in updates:
            final = (final - {tuple(e) for e in remove}) | {tuple(e) for e in add}
        truth = reachable_pairs(nodes, np.array(sorted(final), dtype=np.int64), pairs)
        answers, stats = folded.query_ids(pairs)
        expected, expected_stats = one_by_one.query_ids(pairs)
        np.testing.assert_array_equal(answers, truth)
        np.testing.assert_array_equal(expected, truth)
        assert stats.searched_updated == expected_stats.searched_updated < pairs.shape[0] // 5


def test_pairs_across_the_order_are_decided_by_the_added_edges_that_cross_it() -> None:
    """A deep DAG (2,000 levels) with edges added between random nodes (many against the order, past the 64
    witness edges) and random edges removed: a source low in the order reaches a target high in it only
    through an added edge leaving what lies after the source (or entering what lies before the target), so
    those few edges decide most pairs that the verdicts leave open, without a search on the updated graph;
    answers equal BFS."""
    from grail_core.synthetic import layered_dag

    n = 8_000
    indptr, indices = layered_dag(n, 2_000, 3.0, 4, seed=21)
    src = np.repeat(np.arange(n), np.diff(indptr))
    rng = np.random.default_rng(22)
    index = ReachabilityIndex.from_edges(src, indices, num_nodes=n, backend="cpu")
    comp = index.current().labels.views.forward().comp
    added = rng.integers(0, n, size=(300, 2))
    added = added[added[:, 0] != added[:, 1]]
    gone = rng.choice(src.size, size=150, replace=False)
    final = _update_in_turns(index, src, indices, added, gone)
    # sources among the last DAG nodes, targets anywhere before them, and random pairs
    low = np.flatnonzero(comp >= comp.max() - 60)
    pairs = np.concatenate(
        [np.column_stack([rng.choice(low, 600), rng.integers(0, n, 600)]), rng.integers(0, n, (600, 2))]
    )
    pairs = pairs[comp[pairs[:, 0]] > comp[pairs[:, 1]]]
    _check_crossed_pairs(index, n, final, pairs, comp)


def test_pairs_far_across_the_order_are_decided_by_either_side_of_the_added_edges() -> None:
    """A deep DAG of 60,000 DAG nodes, 16 edges added from its last fifth up to its first one (after 80 short
    ones against the order in its middle), 60 edges removed: a pair from 60-70% of the order to 30-40% spans
    hundreds of words of the bit sets of the added edges' DAG nodes on either side, yet the few edges that
    cross decide most pairs that the verdicts leave open (the side of the first edge a path takes across the
    order, or of the last one where that leaves the pair open), without a search on the updated graph;
    answers equal BFS."""
    n = 60_000
    src, indices, index, comp, rank = _deep_dag_index(n, seed=31)
    rng = np.random.default_rng(32)
    up = np.column_stack([rng.choice(np.flatnonzero(rank >= 0.8), 16), rng.choice(np.flatnonzero(rank < 0.2), 16)])
    # short edges against the order in the middle first: they take the witness bits, and no pair of the
    # test crosses them
    middle = np.argsort(comp)[int(0.4 * n) : int(0.6 * n) : 150]
    short = np.column_stack([middle, np.argsort(comp)[comp[middle] - rng.integers(1, 51, size=middle.size)]])
    added = np.concatenate([short, up])
    added = added[added[:, 0] != added[:, 1]]
    gone = rng.choice(src.size, size=60, replace=False)
    final = _update_in_turns(index, src, indices, added, gone)
    sources = rng.choice(np.flatnonzero((rank >= 0.6) & (rank < 0.7)), 60)
    pairs = np.column_stack([rng.choice(sources, 400), rng.choice(np.flatnonzero((rank >= 0.3) & (rank < 0.4)), 400)])
    _check_crossed_pairs(index, n, final, pairs, comp)


def test_pairs_across_the_order_through_chained_added_edges_are_decided_without_a_search() -> None:
    """A deep DAG of 60,000 DAG nodes with two chains of edges added against the order (after 133 short ones
    in its middle that take the witness bits), of 2 and 3 edges, each leading from after the next one's
    source to before it, and 60 edges removed: a pair from 80-90% of the order to 10-35% takes at least 2 of
    them across the order (3 to below 26%), so the far end of the first edge a path takes across is itself a
    pair across the order; crossing goes on from that end (or, from the target's side, from the near end of
    the last edge) and decides such pairs without a search on the updated graph, NO ones included (targets
    just after the lowest edge's target); answers equal BFS."""
    n = 60_000
    src, indices, index, comp, rank = _deep_dag_index(n, seed=41)
    rng = np.random.default_rng(42)

    def within(low: float, high: float, count: int = 1) -> np.ndarray:
        return rng.choice(np.flatnonzero((rank >= low) & (rank < high)), count)

    # (from, to) ranges of ranks of each chain's edges: each edge's target lies before the next one's source
    two = [((0.92, 0.96), (0.51, 0.54)), ((0.56, 0.59), (0.26, 0.29))]
    three = [((0.92, 0.96), (0.66, 0.69)), ((0.71, 0.74), (0.41, 0.44)), ((0.46, 0.49), (0.06, 0.09))]
    chains = np.array([[within(*a)[0], within(*b)[0]] for a, b in two + three])
    middle = np.argsort(comp)[int(0.3 * n) : int(0.7 * n) : 300]
    short = np.column_stack([middle, np.argsort(comp)[comp[middle] - rng.integers(1, 51, size=middle.size)]])
    added = np.concatenate([short, chains])
    gone = rng.choice(src.size, size=60, replace=False)
    final = _update_in_turns(index, src, indices, added, gone)
    # targets after the lowest edge's target: most of those just after it are out of its reach (NO)
    lowest = rank[chains[-1, 1]]
    targets = np.concatenate([within(0.1, 0.35, 300), within(lowest, lowest + 0.003, 100)])
    pairs = np.column_stack([rng.choice(within(0.8, 0.9, 60), 400), targets])
    _check_crossed_pairs(index, n, final, pairs, comp, searched=0)


def test_pairs_along_the_order_that_no_removal_cut_are_decided_by_a_live_path() -> None:
    """A deep DAG of 60,000 DAG nodes, 600 edges removed and 200 short ones added against the order: pairs a
    few levels apart that the removal masks' groups put in doubt (a removal near the source and another near
    the target share a group) but that keep a path of the labels' graph whose DAG edges all live are decided
    YES without a search on the updated graph; pairs across a removed edge (its own ends, a parent of its
    source and a child of its target) and random pairs near each other stay exact; answers equal BFS."""
    from grail_core.dynamic import verdicts
    from grail_core.query import frozen
    from grail_core.records import UNDECIDED
    from grail_core.synthetic import downward_walk_pairs

    n = 60_000
    src, indices, index, comp, _ = _deep_dag_index(n, seed=61)
    rng = np.random.default_rng(62)
    order = np.argsort(comp)
    back = order[rng.integers(60, n, size=200)]
    added = np.column_stack([back, order[comp[back] - rng.integers(5, 60, size=200)]])
    gone = rng.choice(src.size, size=600, replace=False)
    final = _update_in_turns(index, src, indices, added, gone)
    indptr = np.searchsorted(src, np.arange(n + 1))
    walks = np.stack(downward_walk_pairs(indptr, indices, 6_000, positive_share=1.0, seed=63), axis=1)
    version = index.current()
    open_walks = np.count_nonzero(verdicts(version.search.hot, version._updates(), frozen(walks)) == UNDECIDED)
    answers, stats = index.query_ids(walks)
    np.testing.assert_array_equal(answers, reachable_pairs(n, final, walks))
    assert open_walks >= 150
    assert stats.searched_updated <= open_walks // 4
    near = order[rng.integers(0, n - 200, size=3_000)]
    near = np.column_stack([near, order[comp[near] + rng.integers(1, 200, size=near.size)]])
    cut = np.column_stack([src[gone], indices[gone]])
    by_target = np.argsort(indices, kind="stable")
    into = np.minimum(np.searchsorted(indices[by_target], cut[:, 0]), src.size - 1)
    parent = np.where(indices[by_target[into]] == cut[:, 0], src[by_target[into]], cut[:, 0])
    has_child = np.diff(indptr)[cut[:, 1]] > 0
    child = np.where(has_child, indices[np.minimum(indptr[cut[:, 1]], src.size - 1)], cut[:, 1])
    pairs = np.concatenate([near, cut, np.column_stack([parent, child])])
    truth = reachable_pairs(n, final, pairs)
    np.testing.assert_array_equal(index.query_ids(pairs)[0], truth)
    assert not truth[near.shape[0] :].all() and truth[near.shape[0] :].any()
    some = rng.choice(pairs.shape[0], 400, replace=False)
    assert [index.reachable(int(u), int(v)) for u, v in pairs[some]] == truth[some].tolist()


def test_crossing_searches_of_the_labels_graph_go_on_past_their_small_table() -> None:
    """Crossing's searches of the labels' graph (``dynamic._labels_reach``) hold the DAG nodes they meet in a
    small table (``_reach_within``) and go on with the stamps past SEEN_NODES of them: on a wide DAG (3,000
    nodes a level), of the pairs the labels leave open, the table alone answers those that meet few nodes and
    leaves open those that meet more (YES and NO ones both), and every answer equals BFS."""
    from grail_core.dynamic import _SEEN_SHAPE, _labels_reach, _reach_within
    from grail_core.query import classify
    from grail_core.records import UNDECIDED, YES
    from grail_core.synthetic import layered_dag

    n = 60_000
    indptr, indices = layered_dag(n, 20, 3.0, 4, seed=71)
    src = np.repeat(np.arange(n), np.diff(indptr))
    index = ReachabilityIndex.from_edges(src, indices, num_nodes=n, backend="cpu")
    version = index.current()
    hot, comp = version.search.hot, version.labels.views.forward().comp
    rng = np.random.default_rng(72)
    pairs = rng.integers(0, n, size=(4_000, 2))
    dag = comp[pairs]
    open_pairs = np.array([classify(hot.rec_dag, a, hot.rec_dag, b, hot.label_end) == UNDECIDED for a, b in dag])
    pairs, dag = pairs[open_pairs], dag[open_pairs]
    truth = reachable_pairs(n, np.column_stack([src, indices]), pairs)
    seen = np.zeros(_SEEN_SHAPE, dtype=np.int64)
    within = np.array([_reach_within(hot, a, b, seen) for a, b in dag])
    stamp = np.zeros(hot.rec_dag.shape[0], dtype=np.int32)
    stack = np.empty_like(stamp)
    marks = np.zeros(1, dtype=np.int64)
    found = np.array([_labels_reach(hot, a, b, stamp, stack, marks, seen) for a, b in dag])
    np.testing.assert_array_equal(found, truth)
    decided = within != UNDECIDED
    np.testing.assert_array_equal(within[decided] == YES, truth[decided])
    assert decided.sum() >= 50 and truth[~decided].any() and not truth[~decided].all()


def test_search_tables_are_reused_as_left_and_never_shared() -> None:
    """``SearchBuffers.take_tables`` (crossing's small tables) hands a block on as its last user left it, since
    the searches' generations in it must go on; never one block to two users at once; and a fresh, zeroed one
    where more rows are asked for."""
    pool = SearchBuffers(0)
    with pool.take_tables(2, (3, 5)) as first:
        first[0, 0, 4] = 7
        with pool.take_tables(1, (3, 5)) as nested:
            assert not np.shares_memory(first, nested)
    with pool.take_tables(1, (3, 5)) as again:
        assert again.shape == (1, 3, 5) and again[0, 0, 4] == 7
    with pool.take_tables(3, (3, 5)) as wider:
        assert wider.shape == (3, 3, 5) and not wider.any()


def test_open_pairs_are_crossed_and_searched_on_all_threads_each_on_its_own_marks() -> None:
    """Crossing and the searches on the updated graph run on numba's threads (``dynamic._cross_parallel``,
    ``traversal.walk_pairs_parallel``), a pair at a time, on its thread's row of stamps and its own marks: on
    a deep DAG of 2,000 levels with 300 edges added between random nodes and 150 removed, a batch with
    hundreds of pairs across the order (sources among the last DAG nodes) and some searched gives BFS's
    answers on two threads, on one, and pair by pair; so do all its pairs searched and crossed, again and
    again on the same buffers (marks never reused)."""
    import numba

    from grail_core import dynamic
    from grail_core.query import frozen
    from grail_core.records import UNDECIDED, YES
    from grail_core.synthetic import layered_dag

    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("needs two of numba's threads")
    n = 8_000
    indptr, indices = layered_dag(n, 2_000, 3.0, 4, seed=91)
    src = np.repeat(np.arange(n), np.diff(indptr))
    rng = np.random.default_rng(92)
    index = ReachabilityIndex.from_edges(src, indices, num_nodes=n, backend="cpu")
    added = rng.integers(0, n, size=(300, 2))
    added = added[added[:, 0] != added[:, 1]]
    final = _update_in_turns(index, src, indices, added, rng.choice(src.size, size=150, replace=False))
    version = index.current()
    comp = version.labels.views.forward().comp
    # sources among the last DAG nodes (their targets mostly across the order), and random pairs
    low = np.flatnonzero(comp >= comp.max() - 60)
    pairs = frozen(
        np.concatenate(
            [np.column_stack([rng.choice(low, 3_000), rng.integers(0, n, 3_000)]), rng.integers(0, n, (3_000, 2))]
        )
    )
    truth = reachable_pairs(n, final, pairs)
    codes = dynamic.verdicts(version.search.hot, version._updates(), pairs)
    assert np.count_nonzero(codes == UNDECIDED) >= 20 * dynamic.PARALLEL_CROSSING
    for threads in (2, 1):
        with numba_threads(threads):
            answers, stats = index.query_ids(pairs)
        np.testing.assert_array_equal(answers, truth)
        assert stats.searched_updated >= 10
    # every pair searched, and crossed, on the threads: thousands of searches per row of stamps, YES and NO
    hot, pending, views = version.search.hot, version._updates(), version.labels.views
    pool = version.search.walk_buffers(version._walk_size())
    every = np.arange(pairs.shape[0])
    for threads in (2, 2, 1):
        with numba_threads(threads):
            found = np.zeros(pairs.shape[0], dtype=np.bool_)
            dynamic.search_pairs((views.forward(), views.backward()), pending, hot, pool, pairs, every, found)
            codes = np.full(pairs.shape[0], UNDECIDED, dtype=np.int8)
            dynamic._cross(comp, pending, hot, pool, pairs, every, codes)
        np.testing.assert_array_equal(found, truth)
        decided = codes != UNDECIDED
        assert decided.sum() >= pairs.shape[0] // 4
        np.testing.assert_array_equal(codes[decided] == YES, truth[decided])
    single = [index.reachable(int(u), int(v)) for u, v in pairs[:300]]
    assert single == truth[:300].tolist()


def _deep_dag_index(n: int, seed: int):
    """A layered DAG of ``n`` nodes and n / 10 levels, its CPU index, and per node its DAG node and that node's
    rank in the topological order (0 to 1): (src, dst, index, comp, rank)."""
    from grail_core.synthetic import layered_dag

    indptr, indices = layered_dag(n, n // 10, 3.0, 4, seed=seed)
    src = np.repeat(np.arange(n), np.diff(indptr))
    index = ReachabilityIndex.from_edges(src, indices, num_nodes=n, backend="cpu")
    comp = index.current().labels.views.forward().comp
    return src, indices, index, comp, comp / (comp.max() + 1)


def test_batch_verdicts_equal_each_pairs_own_on_the_threads_slice_by_slice():
    """The verdict pass over a batch (slices of ``VERDICT_SLICE`` pairs, the records of the pairs ahead
    prefetched) gives each pair the verdict it gets alone, nodes that updates added included, on one thread
    and on two, for a batch past ``SERIAL_BATCH`` and one under it."""
    from grail_core import dynamic
    from grail_core.query import SERIAL_BATCH, frozen
    from grail_core.synthetic import layered_dag

    n = 5_000
    indptr, indices = layered_dag(n, 500, 3.0, 4, seed=21)
    src = np.repeat(np.arange(n), np.diff(indptr))
    rng = np.random.default_rng(22)
    index = ReachabilityIndex.from_edges(src, indices, num_nodes=n, backend="cpu")
    added = rng.integers(0, n + 40, size=(200, 2))
    added = added[added[:, 0] != added[:, 1]]
    _update_in_turns(index, src, indices, added, rng.choice(src.size, size=100, replace=False))
    version = index.current()
    hot, pending = version.search.hot, version._updates()
    assert pending.n_base == hot.rec_node.shape[0] < n + 40  # added nodes have no record
    count = 3 * dynamic.VERDICT_SLICE + 37
    assert count > SERIAL_BATCH
    pairs = frozen(rng.integers(0, n + 40, size=(count, 2)))
    alone = np.array([dynamic.pair_verdict(hot, pending, u, v) for u, v in pairs.tolist()], dtype=np.int8)
    assert len(np.unique(alone)) >= 3
    for threads in (2, 1):
        with numba_threads(threads):
            np.testing.assert_array_equal(dynamic.verdicts(hot, pending, pairs), alone)
            few = frozen(pairs[: SERIAL_BATCH - 1])
            np.testing.assert_array_equal(dynamic.verdicts(hot, pending, few), alone[: SERIAL_BATCH - 1])


def _update_in_turns(index: ReachabilityIndex, src: np.ndarray, dst: np.ndarray, added: np.ndarray, gone: np.ndarray):
    """One update per turn, adding the next of ``added`` and removing edge ``gone[k]`` of (src, dst); returns
    the final edge list."""
    for k in range(max(added.shape[0], gone.size)):
        index.update(
            add=added[k : k + 1].tolist() if k < added.shape[0] else [],
            remove=[[int(src[gone[k]]), int(dst[gone[k]])]] if k < gone.size else [],
        )
    keep = np.ones(src.size, dtype=bool)
    keep[gone] = False
    return np.concatenate([np.column_stack([src, dst])[keep], added])


def _check_crossed_pairs(
    index: ReachabilityIndex, n: int, final: np.ndarray, pairs: np.ndarray, comp, searched: int | None = None
) -> None:
    """Answers (batch and single) equal BFS on ``final``, both answers occur, and at most a fifth of the pairs
    the verdicts leave open (over a tenth of all) reach a search on the updated graph (``searched`` of them,
    where given)."""
    from grail_core.dynamic import verdicts
    from grail_core.query import frozen
    from grail_core.records import UNDECIDED

    answers, stats = index.query_ids(pairs)
    np.testing.assert_array_equal(answers, reachable_pairs(n, final, pairs))
    assert answers.any() and not answers.all()
    version = index.current()
    open_pairs = np.count_nonzero(verdicts(version.search.hot, version._updates(), frozen(pairs)) == UNDECIDED)
    assert open_pairs > pairs.shape[0] // 10 and stats.searched_updated <= open_pairs // 5
    assert searched is None or stats.searched_updated == searched
    single = [index.query_pair(int(u), int(v)) for u, v in pairs[:50].tolist()]
    assert [a.reachable for a in single] == answers[:50].tolist()


def _blocks(sizes: list[int]) -> list[tuple[int, int]]:
    """Cycles of ``sizes`` nodes, numbered one after the other: the blocks of the component tests below."""
    edges, first = [], 0
    for size in sizes:
        edges += [(first + i, first + (i + 1) % size) for i in range(size)]
        first += size
    return edges


def test_a_split_component_marks_both_sides_by_what_the_removal_cut() -> None:
    """Two cycles A and B joined both ways (10 -> 60, 70 -> 20) into one component, with nodes entering and
    leaving each. Removing 70 -> 20 loses exactly the pairs from B and what enters only B (p, above it pp)
    to A and what leaves A (r, below it rr): only those are searched; every other pair through the component
    stays decided, q (into A) -> w (out of B) too, which still passes 10 -> 60; answers equal BFS."""
    p, pp, q, r, rr, w = range(100, 106)
    edges = np.array(
        [*_blocks([50, 50]), (10, 60), (70, 20), (p, 55), (pp, p), (q, 5), (15, r), (r, rr), (65, w)], dtype=np.int64
    )
    nodes = 106
    pairs = np.argwhere(~np.eye(nodes, dtype=bool)).astype(np.int64)
    index = ReachabilityIndex.from_edges(edges[:, 0], edges[:, 1], num_nodes=nodes, backend="cpu")
    index.remove_edges([[70, 20]])
    kept = edges[~((edges[:, 0] == 70) & (edges[:, 1] == 20))]
    base, now = reachable_pairs(nodes, edges, pairs), reachable_pairs(nodes, kept, pairs)
    above, below = np.r_[50:100, p, pp], np.r_[0:50, r, rr]
    lost = base & np.isin(pairs[:, 0], above) & np.isin(pairs[:, 1], below)
    np.testing.assert_array_equal(lost, base & ~now)
    answers, stats = index.query_ids(pairs)
    np.testing.assert_array_equal(answers, now)
    assert stats.searched_updated == np.count_nonzero(lost)
    assert index.reachable(q, w) and not index.reachable(p, r)


def test_several_removals_in_one_component_search_only_pairs_they_may_have_cut() -> None:
    """A ring of four cycles (each joined to the next by one edge) with nodes entering and leaving it. Removed
    one after the other: the ring's closing edge, an edge of a cycle that leaves its entry unable to reach its
    exit, and a chord's edge that a bypass keeps joined. After each, answers equal BFS, and a pair is searched
    only if its source is in, or enters, what reaches some removed edge's source and not its target, and its
    target is in, or leaves, what the target reaches and the source does not (in the graph as it was then),
    and the component's root does not witness it: the members flagged as reaching the root reach every member
    flagged as reached from it."""
    from grail_core.dynamic import verdicts
    from grail_core.query import frozen
    from grail_core.records import UNDECIDED

    size, nodes = 30, 128
    ring = [*_blocks([size] * 4), *[(k * size + 5, (k + 1) % 4 * size + 10) for k in range(4)], (61, 63), (62, 64)]
    edges = [*ring, (120, 3), (121, 120), (122, 44), (75, 123), (123, 124), (100, 125), (126, 95), (17, 127)]
    removals = [(95, 10), (40, 41), (62, 63)]
    index = ReachabilityIndex.from_edges(*np.array(edges, dtype=np.int64).T, num_nodes=nodes, backend="cpu")
    pairs = np.argwhere(~np.eye(nodes, dtype=bool)).astype(np.int64)
    base = reachability_matrix(nodes, edges)
    members = np.arange(4 * size)
    up_side, down_side = np.zeros(nodes, dtype=bool), np.zeros(nodes, dtype=bool)
    previous = np.zeros(pairs.shape[0], dtype=bool)
    current = list(edges)
    for x, y in removals:
        current.remove((x, y))
        index.remove_edges([[x, y]])
        now = reachability_matrix(nodes, current)
        cut_up = np.zeros(nodes, dtype=bool)
        cut_down = np.zeros(nodes, dtype=bool)
        cut_up[members] = now[members, x] & ~now[members, y]
        cut_down[members] = now[y, members] & ~now[x, members]
        up_side |= cut_up | (base[:, cut_up].any(axis=1) & ~np.isin(np.arange(nodes), members))
        down_side |= cut_down | (base[cut_down].any(axis=0) & ~np.isin(np.arange(nodes), members))
        answers, _ = index.query_ids(pairs)
        np.testing.assert_array_equal(answers, now[pairs[:, 0], pairs[:, 1]])
        version = index.current()
        pending = version._updates()
        codes = verdicts(version.search.hot, pending, frozen(pairs))
        to_root = np.unpackbits(pending.to_root.view(np.uint8), bitorder="little")[:nodes].astype(bool)
        from_root = np.unpackbits(pending.from_root.view(np.uint8), bitorder="little")[:nodes].astype(bool)
        assert (to_root & from_root).any() and now[np.ix_(to_root, from_root)].all()
        witnessed = to_root[pairs[:, 0]] & from_root[pairs[:, 1]]
        may_search = up_side[pairs[:, 0]] & down_side[pairs[:, 1]] & ~witnessed
        searched = codes == UNDECIDED
        assert not (searched & ~may_search).any()
        # the lost pairs are searched (nothing else rules them out); the joined removal changes nothing
        lost = base[pairs[:, 0], pairs[:, 1]] & ~now[pairs[:, 0], pairs[:, 1]]
        assert searched[lost].all() and np.count_nonzero(searched) < np.count_nonzero(lost) + 4 * size * size
        if (x, y) == removals[-1]:
            np.testing.assert_array_equal(searched, previous)
        previous = searched


def _check_root_bits(index: ReachabilityIndex, reach: np.ndarray) -> None:
    """Every root bit a version's whole DAG nodes hold is a witness in the graph as it is (``reach``: its
    reachability matrix): each member reaches the root (ROOT_UP) or is reached from it (ROOT_DOWN); and the
    bits kept up update by update are those laid at once from the same state (``roots.sweep_roots``)."""
    from grail_core.pending import ROOT_DOWN, ROOT_UP, bit_set, table_key
    from grail_core.probing import lookup
    from grail_core.roots import sweep_roots
    from grail_core.staging import ROOT

    version = index.current()
    p = version._updates()
    fw, bw = version.labels.views.forward(), version.labels.views.backward()
    if p.roots.shape[0] == 0:
        return
    n_dag = p.roots.shape[0]
    broken = {c for c in range(n_dag) if bit_set(p.broken_bits, c)}
    root_of = {int(p.roots[c, ROOT_UP]).bit_length() - 1: lookup(p.table, table_key(ROOT, c)) for c in broken}
    for d in set(range(n_dag)) - broken:
        members = fw.mem[fw.mem_indptr[d] : fw.mem_indptr[d + 1]]
        for column in (ROOT_UP, ROOT_DOWN):
            bits = int(p.roots[d, column])
            for k in (k for k in range(64) if bits >> k & 1):
                root = root_of[k]
                assert (reach[members, root] if column == ROOT_UP else reach[root, members]).all()
    laid = np.array(p.roots)
    sweep_roots(fw, bw, laid, p.dead_bits, p.broken_bits, p.removed_bits, p.to_root, p.from_root)
    np.testing.assert_array_equal(laid, p.roots)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=digraphs(max_nodes=50), data=st.data())
def test_root_sets_are_exactly_what_reaches_the_root_and_what_it_reaches(
    graph: tuple[int, list[tuple[int, int]]], data: st.DataObject
) -> None:
    """Edges removed one by one, inside components and between them: after each, every broken component's
    ``to_root`` is exactly its members that reach its root inside it, in the graph as it is, and
    ``from_root`` exactly those the root reaches (the trees hang again what a removal left joined, and drop
    what it cut), and the answers equal BFS."""
    from grail_core.pending import bit_set, table_key
    from grail_core.probing import lookup
    from grail_core.staging import ROOT

    n, edges = graph
    distinct = sorted(set(edges))
    shuffled = data.draw(st.permutations(distinct)) if distinct else []
    index = ReachabilityIndex.from_edges(*np.array(edges or [(0, 0)], dtype=np.int64).T, num_nodes=n, backend="cpu")
    comp = np.asarray(index.current().labels.views.forward().comp)
    inner = [e for e in shuffled if comp[e[0]] == comp[e[1]] and e[0] != e[1]]
    removals = (inner + [e for e in shuffled if e not in inner])[: data.draw(st.integers(1, 16))]
    current = set(edges)
    pairs = np.argwhere(np.ones((n, n), dtype=bool)).astype(np.int64)
    for x, y in removals:
        current.discard((x, y))
        index.remove_edges([[x, y]])
        answers, _ = index.query_ids(pairs)
        np.testing.assert_array_equal(answers, reachability_matrix(n, sorted(current)).ravel())
        p = index.current()._updates()
        if p.to_root.size == 0:
            continue  # every component is one node: no roots
        for c in np.unique(comp):
            if not bit_set(p.broken_bits, c):
                continue
            members = np.flatnonzero(comp == c)
            inside = [(u, v) for u, v in current if comp[u] == c and comp[v] == c]
            reach = reachability_matrix(n, inside)
            root = lookup(p.table, table_key(ROOT, c))
            for bits, expected in ((p.to_root, reach[members, root]), (p.from_root, reach[root, members])):
                held = np.array([bit_set(bits, m) for m in members])
                np.testing.assert_array_equal(held, expected)


def test_pairs_through_a_broken_component_are_witnessed_by_its_root() -> None:
    """A cycle of 6,000 members that a removal opens into a chain (both sides too large to mark one by one:
    the component takes its closed marks), with nodes entering and leaving it. The pairs from outside it (or
    inside) whose path passes its root (member 100, the one with the most edges) are YES without a search,
    a node two steps out too; those entering after the root or leaving before it are not witnessed; removing
    the edge into the chain, or cutting the chain before the root, clears the bits of what no longer reaches
    it. Answers equal BFS throughout."""
    from grail_core.dynamic import verdicts
    from grail_core.query import frozen
    from grail_core.records import UNDECIDED, YES

    n = 6000
    a, aa, b, w, ww, v, c1, c2, c3 = range(n, n + 9)
    edges = [(i, (i + 1) % n) for i in range(n)]
    edges += [(a, 5), (aa, a), (b, 200), (3000, w), (w, ww), (50, v), (c1, 100), (100, c2), (c3, 20)]
    nodes = n + 9
    outside = [a, aa, b, w, ww, v, c1, c2, c3]
    ends = [*outside, 5, 20, 100, 3000]
    pairs = np.array([(s, t) for s in ends for t in ends if s != t], dtype=np.int64)
    index = ReachabilityIndex.from_edges(*np.array(edges, dtype=np.int64).T, num_nodes=nodes, backend="cpu")
    witnessed = [(a, w), (aa, ww), (5, w), (a, 3000), (c1, c2), (c3, w), (c3, c2)]
    unwitnessed = [(b, w), (a, v)]
    at = {tuple(pair): i for i, pair in enumerate(pairs.tolist())}

    def check(removed: tuple[int, int]) -> np.ndarray:
        edges.remove(removed)
        index.remove_edges([list(removed)])
        truth = reachable_pairs(nodes, np.array(edges, dtype=np.int64), pairs)
        answers, _ = index.query_ids(pairs)
        np.testing.assert_array_equal(answers, truth)
        version = index.current()
        return verdicts(version.search.hot, version._updates(), frozen(pairs))

    codes = check((n - 1, 0))
    assert all(codes[at[pair]] == YES for pair in witnessed)
    assert all(codes[at[pair]] == UNDECIDED for pair in unwitnessed)
    codes = check((a, 5))  # a and aa no longer reach the chain
    assert codes[at[(c3, w)]] == YES
    codes = check((50, 51))  # 0..50 no longer reach the root: c3 neither
    assert codes[at[(c1, c2)]] == YES and codes[at[(5, 3000)]] != YES


@st.composite
def _removals_and_additions(draw: st.DrawFn) -> tuple[int, list[tuple[int, int]], list[tuple[bool, int, int]]]:
    """A graph of cycles joined in a chain (``cycle_chains``) and steps: remove the i-th edge present (mostly
    inside components: they split), or add an edge between two nodes."""
    n, edges = draw(cycle_chains(max_cycles=5))
    steps = draw(st.lists(st.tuples(st.booleans(), st.integers(0, 10**6), st.integers(0, 10**6)), max_size=12))
    return n, edges, [(remove or k % 4 != 0, i, k) for remove, i, k in steps]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_removals_and_additions())
def test_root_bits_are_witnesses_kept_as_laid_at_once(case) -> None:
    """Removals that split components and additions between them: after each update every pair's answer
    equals BFS's, and the root bits hold (``_check_root_bits``); a journal folded at once lays the same."""
    n, edges = case[0], sorted({(u, w) for u, w in case[1] if u != w})
    index = ReachabilityIndex.from_edges(
        *np.array(edges or [(0, 0)], dtype=np.int64).T, num_nodes=n, backend="cpu", hubs=2
    )
    pairs = np.argwhere(np.ones((n, n), dtype=bool)).astype(np.int64)
    current = list(edges)
    journal = []
    for remove, i, k in case[2]:
        if remove and current:
            edge = current.pop(i % len(current))
            update = ([], [list(edge)])
        else:
            edge = (i % n, k % n)
            if edge[0] == edge[1] or edge in current:
                continue
            current.append(edge)
            update = ([list(edge)], [])
        index.update(*update)
        journal.append(update)
        reach = reachability_matrix(n, current)
        answers, _ = index.query_ids(pairs)
        np.testing.assert_array_equal(answers, reach[pairs[:, 0], pairs[:, 1]])
        _check_root_bits(index, reach)
    if journal:
        folded = ReachabilityIndex.from_edges(
            *np.array(edges or [(0, 0)], dtype=np.int64).T, num_nodes=n, backend="cpu", hubs=2
        )
        folded.update_many(journal)
        np.testing.assert_array_equal(folded.query_ids(pairs)[0], index.query_ids(pairs)[0])
        _check_root_bits(folded, reachability_matrix(n, current))


def _layered_dag_with_long_edges(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """A DAG (edges to higher ids, rows sorted): levels of random widths with edges a few levels down on the
    first two thirds of the ids, a rare edge that jumps far inside them, and the longest edges, from the last
    level of them to the last id (a sweep's end is the longest edge past the last node it entered)."""
    width = int(rng.integers(4, 40))
    dense = 2 * n // 3
    src = np.repeat(np.arange(dense), rng.integers(1, 5, size=dense))
    dst = src + rng.integers(1, 3 * width, size=src.size)
    far = rng.random(src.size) < 0.0005
    dst[far] = src[far] + rng.integers(1, dense // 4, size=int(far.sum()))
    keep = dst < dense
    last = np.arange(dense - width, dense)
    pairs = np.unique(np.column_stack([np.append(src[keep], last), np.append(dst[keep], [n - 1] * width)]), axis=0)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(pairs[:, 0], minlength=n), out=indptr[1:])
    return indptr, pairs[:, 1].astype(np.int32)


def _walked(indptr, indices, edge, start, held, dead, broken) -> list[int]:
    """Breadth first from ``start`` along a CSR, entering the nodes not ``held`` (and holding them now); with
    ``dead`` and ``broken`` bits, not along a dead edge nor into a broken node."""
    from grail_core.pending import bit_set

    order: list[int] = []
    queue = [] if held[start] else [start]
    held[start] = True
    while queue:
        x = queue.pop(0)
        order.append(x)
        for f in range(indptr[x], indptr[x + 1]):
            w = int(indices[f])
            if held[w] or bit_set(dead, f if edge.size == 0 else int(edge[f])) or bit_set(broken, w):
                continue
            held[w] = True
            queue.append(w)
    return order


@pytest.mark.parametrize("seed", range(6))
def test_a_mark_enters_what_a_walk_enters_also_where_it_sweeps(seed: int) -> None:
    """``marking.mark`` (and ``mark_reached``) once dense sweep the rest in id order, up to the longest edge
    past the last node entered, each node testing its neighbours behind it: the nodes entered, the bits set
    and the count equal a walk's, both ways, with dead edges and broken nodes cut or not, over bits an earlier
    mark laid (closed, so they stop a mark); the sweep took over (the tail of the queue is in id order)."""
    from grail_core.marking import SWEEP_AFTER, longest_edge, mark, mark_reached, walk_sides
    from grail_core.pending import bit_set
    from grail_core.traversal import Side, transpose_with_edges

    rng = np.random.default_rng(seed)
    n = 6_000
    indptr, indices = _layered_dag_with_long_edges(rng, n)
    back_indices = np.empty_like(indices)
    back_edge = np.empty(indices.size, dtype=np.int64)
    back_indptr = transpose_with_edges(indptr, indices, back_indices, back_edge)
    none = np.zeros(0, dtype=np.int64)
    fw = Side(none, none, none, indptr, indices, back_edge[:0], none, none, none)
    bw = Side(none, none, none, back_indptr, back_indices, back_edge, none, none, none)
    dead = np.zeros(indices.size // 64 + 1, dtype=np.uint64)
    broken = np.zeros(n // 64 + 1, dtype=np.uint64)
    for bits, count in ((dead, indices.size), (broken, n)):  # 2% of the edges dead, of the nodes broken
        for i in rng.choice(count, size=count // 50, replace=False):
            bits[i >> 6] |= np.uint64(1) << np.uint64(i & 63)
    span = longest_edge(indptr, indices)
    swept = reached_end = 0
    for downwards in (True, False):
        walk = walk_sides(fw, bw, downwards, span)
        ahead = walk[0]
        for cut in (False, True):
            masks = np.zeros((n, 2), dtype=np.uint64)
            held = np.zeros(n, dtype=bool)
            cuts = (dead, broken) if cut else (dead[:0], broken[:0])
            first, start = (int(v) for v in rng.choice(n // 4, size=2, replace=False) + (0 if downwards else n // 2))
            queue = np.empty(n, dtype=np.int64)
            for s in (first, start):  # an earlier mark's bits, then this one's, which stop where they are
                if cut and bit_set(broken, s):
                    continue
                walked = _walked(*ahead, s, held, *cuts)
                count = mark(walk, masks, 1, np.uint64(1), np.array([s]), cut, dead, broken, queue)
                assert count == len(walked) and set(queue[:count].tolist()) == set(walked)
                np.testing.assert_array_equal(masks[:, 1] == 1, held)
                reached_end += downwards and bool(masks[n - 1, 1])
                steps = np.diff(queue[:count] * (1 if downwards else -1)) > 0
                sorted_tail = int(np.argmin(steps[::-1])) if not steps.all() else steps.size
                swept += count > SWEEP_AFTER and sorted_tail > count // 2
        # mark_reached: every edge, dead ones too, through what holds the bit
        masks = np.zeros((n, 2), dtype=np.uint64)
        masks[rng.choice(n, size=n // 3, replace=False), 0] = 1
        seen = np.zeros(n, dtype=np.int32)
        start = int(rng.integers(0, n // 4) + (0 if downwards else n // 2))
        walked = _walked(*ahead, start, np.zeros(n, dtype=bool), dead[:0], broken[:0])
        count = mark_reached(walk, masks, 0, np.uint64(2), start, seen, 7, queue)
        assert count == len(walked) and set(queue[:count].tolist()) == set(walked)
        assert set(np.flatnonzero(masks[:, 0] & 2).tolist()) == set(walked)
        assert set(np.flatnonzero(seen == 7).tolist()) == set(walked)
    assert swept >= 2 and reached_end

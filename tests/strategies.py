"""Hypothesis strategies: random digraphs with cycles, self loops, duplicate edges and isolated nodes."""

from __future__ import annotations

from hypothesis import strategies as st


@st.composite
def digraphs(draw: st.DrawFn, max_nodes: int = 120, acyclic: bool = False) -> tuple[int, list[tuple[int, int]]]:
    """(n, edges): a sparse or dense random graph; ``acyclic`` keeps only forward edges."""
    n = draw(st.integers(min_value=1, max_value=max_nodes))
    density = draw(st.sampled_from([0.5, 1.0, 1.5, 3.0, 6.0]))
    count = draw(st.integers(min_value=0, max_value=int(density * n) + 1))
    node = st.integers(min_value=0, max_value=n - 1)
    edges = draw(st.lists(st.tuples(node, node), min_size=count, max_size=count))
    if acyclic:
        edges = [(min(u, v), max(u, v)) for u, v in edges if u != v]
    if edges and draw(st.booleans()):
        edges += draw(st.lists(st.sampled_from(edges), max_size=10))  # duplicates
    if draw(st.booleans()):
        edges += [(v, v) for v in draw(st.lists(node, max_size=5))]  # self loops
    return n, edges


@st.composite
def cycle_chains(draw: st.DrawFn, max_cycles: int = 12) -> tuple[int, list[tuple[int, int]]]:
    """(n, edges): several cycles (each a strongly connected component) joined by edges that follow a
    random order of the cycles, over randomly permuted ids, plus a few free nodes, repeats and self loops.
    Many components survive the trim and the forward-backward step: the coloring rounds have work."""
    sizes = draw(st.lists(st.integers(1, 6), min_size=1, max_size=max_cycles))
    free = draw(st.integers(0, 5))
    n = sum(sizes) + free
    ids = draw(st.permutations(range(n)))
    members, start = [], 0
    for size in sizes:
        members.append(ids[start : start + size])
        start += size
    edges = [(cycle[i], cycle[(i + 1) % len(cycle)]) for cycle in members if len(cycle) > 1 for i in range(len(cycle))]
    order = draw(st.permutations(range(len(members))))
    for a in range(len(order)):
        for b in range(a + 1, len(order)):
            if draw(st.integers(0, 3)) == 0:
                edges.append((draw(st.sampled_from(members[order[a]])), draw(st.sampled_from(members[order[b]]))))
    node = st.integers(min_value=0, max_value=n - 1)
    if draw(st.booleans()):
        edges += [(v, v) for v in draw(st.lists(node, max_size=3))]
    if edges and draw(st.booleans()):
        edges += draw(st.lists(st.sampled_from(edges), max_size=5))
    return n, edges

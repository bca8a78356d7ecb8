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

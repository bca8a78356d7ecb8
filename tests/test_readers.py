"""Graph readers: every format, gzip, names kept as uploaded, and clear errors naming the line."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from grail_core import GraphFormatError, InvalidParameterError, ReachabilityIndex, UnknownNodeError, read_graph
from grail_core.readers import guess_format

GRA = b"graph_for_greach\n4\n0: 2 1 1 #\n1: 3 #\n2: #\n3: 3 #\n"


def edges_of(graph) -> set[tuple[object, object]]:
    names = graph.names
    return set(zip(names.names_of(graph.src), names.names_of(graph.dst), strict=True))


def test_gra_keeps_duplicates_for_the_graph_builder_and_names_are_line_numbers() -> None:
    graph = read_graph(GRA)
    assert graph.format == "gra" and graph.num_nodes == 4
    assert sorted(zip(graph.src.tolist(), graph.dst.tolist(), strict=True)) == [(0, 1), (0, 1), (0, 2), (1, 3), (3, 3)]
    assert graph.names.kind == "range"


def test_gra_accepts_crlf_and_a_missing_hash() -> None:
    graph = read_graph(b"graph_for_greach\r\n2\r\n0: 1\r\n1: #\r\n")
    assert graph.num_nodes == 2 and graph.src.tolist() == [0] and graph.dst.tolist() == [1]


@pytest.mark.parametrize(
    ("data", "line", "words"),
    [
        (b"graph_for_grepp\n1\n0: #\n", 1, "header"),
        (b"graph_for_greach\nx\n0: #\n", 2, "number of nodes"),
        (b"graph_for_greach\n0\n", 2, "empty graph"),
        (b"graph_for_greach\n2\n0: 1 #\n", 4, "only 1 adjacency lines"),
        (b"graph_for_greach\n2\n0: 1 #\n1: #\n2: #\n", 5, "more adjacency lines"),
        (b"graph_for_greach\n3\n0: 1 #\n2: #\n1: #\n", 4, "describes node 2"),
        (b"graph_for_greach\n2\n0: 7 #\n1: #\n", 3, "out of range"),
        (b"graph_for_greach\n2\n0: a #\n1: #\n", 3, "malformed node id"),
        (b"graph_for_greach\n2\n0 1 #\n1: #\n", 3, "malformed adjacency line"),
        (b"graph_for_greach\n2\n0: -1 #\n1: #\n", 3, "malformed node id"),
    ],
)
def test_gra_errors_name_the_line(data: bytes, line: int, words: str) -> None:
    with pytest.raises(GraphFormatError) as caught:
        read_graph(data, "gra")
    assert caught.value.line == line and words in str(caught.value)


def test_edge_list_separators_comments_header_and_extra_columns() -> None:
    text = b"# a comment\n% another\nsource,target,weight\n10,20,0.5\n20\t30\n 30 10 \n\n10,10\n"
    graph = read_graph(text, "edgelist")
    assert graph.names.are_integers
    assert edges_of(graph) == {(10, 20), (20, 30), (30, 10), (10, 10)}


def test_edge_list_integer_names_are_kept_not_renumbered() -> None:
    index = ReachabilityIndex.from_bytes(b"1000000 5\n5 -7\n", format="edgelist", backend="cpu")
    assert index.names_are_integers
    assert index.reachable(1000000, -7) and not index.reachable(-7, 5)
    assert index.reachable("1000000", "5")  # integer names may come as decimal strings
    with pytest.raises(UnknownNodeError) as caught:
        index.reachable(1, 5)
    assert caught.value.name == 1


def test_edge_list_string_names_and_quotes() -> None:
    graph = read_graph(b'from,to\n"alice",bob\nbob,"carol"\ncarol,dave\n')
    assert not graph.names.are_integers
    assert edges_of(graph) == {("alice", "bob"), ("bob", "carol"), ("carol", "dave")}
    index = ReachabilityIndex.build(graph, backend="cpu")
    assert index.query_batch([["alice", "dave"], ["dave", "alice"], ["bob", "bob"]]).tolist() == [True, False, True]
    with pytest.raises(UnknownNodeError):
        index.reachable("alice", "eve")


def test_edge_list_unicode_names() -> None:
    index = ReachabilityIndex.from_bytes("zürich bern\nbern 東京\n".encode(), backend="cpu")
    assert index.reachable("zürich", "東京") and not index.reachable("東京", "bern")


def test_edge_list_header_is_detected_only_when_it_is_one() -> None:
    assert read_graph(b"a b\nb c\n").num_nodes == 3  # string names: no header
    assert read_graph(b"x y\n1 2\n").num_nodes == 2  # the only non-integer line is the header
    assert read_graph(b"1 2\n2 3\n", header=True).num_nodes == 2


@pytest.mark.parametrize(
    ("data", "line"),
    [(b"1 2\n3\n", 2), (b"1 2\n\n# c\nlonely\n", 4)],
)
def test_edge_list_errors_name_the_line(data: bytes, line: int) -> None:
    with pytest.raises(GraphFormatError) as caught:
        read_graph(data, "edgelist")
    assert caught.value.line == line


def test_empty_inputs_are_rejected() -> None:
    for data in (b"", b"   \n", b"# only a comment\n"):
        with pytest.raises(GraphFormatError, match="empty"):
            read_graph(data, "edgelist")


def test_json_with_isolated_nodes() -> None:
    graph = read_graph(json.dumps({"edges": [[1, 2], [2, 3]], "nodes": [9]}).encode())
    assert graph.num_nodes == 4 and sorted(graph.names.names_of(range(4))) == [1, 2, 3, 9]
    index = ReachabilityIndex.build(graph, backend="cpu")
    assert index.reachable(1, 3) and not index.reachable(9, 1) and index.reachable(9, 9)


@pytest.mark.parametrize(
    ("document", "words"),
    [
        ('{"edges": [[1, 2], [2]]}', "pair"),
        ('{"edges": [[1, "a"]]}', "not a mix"),
        ('{"edges": [[1.5, 2]]}', "integers or strings"),
        ('{"nodes": [1]}', "edges"),
        ('{"edges": []}', "empty"),
        ("[1, 2]", "object"),
    ],
)
def test_json_errors(document: str, words: str) -> None:
    with pytest.raises(GraphFormatError, match=words):
        read_graph(document.encode(), "json")


def test_json_syntax_error_names_the_line() -> None:
    with pytest.raises(GraphFormatError) as caught:
        read_graph(b'{"edges": [\n[1, 2],\n[2, 3\n}', "json")
    assert caught.value.line == 4


def test_gzip_input_and_format_guessing(tmp_path) -> None:
    path = tmp_path / "graph.gra.gz"
    path.write_bytes(gzip.compress(GRA))
    assert read_graph(path).num_nodes == 4
    assert read_graph(gzip.compress(b"a b\n")).num_nodes == 2
    assert guess_format(b"graph_for_greach\n1\n") == "gra" and guess_format(b' {"edges": []}') == "json"
    assert guess_format(b"", "edges.csv.gz") == "edgelist"
    with pytest.raises(GraphFormatError, match="gzip"):
        read_graph(gzip.compress(GRA)[:20])


def test_unknown_format_is_a_parameter_error() -> None:
    with pytest.raises(InvalidParameterError):
        read_graph(GRA, "graphml")


def test_large_gra_parses_in_seconds_into_compact_arrays(datasets) -> None:
    graph = read_graph(datasets / "uniprotenc_22m.scc.gra")
    assert graph.num_nodes == 1595444 and graph.src.size == 1595442
    # One int64 per edge end and nothing else: no Python object per edge, no spare capacity kept.
    assert graph.src.base is None and graph.src.nbytes == 8 * graph.src.size


def test_json_integer_fast_path_agrees_with_the_json_module() -> None:
    from grail_core.readers import jsonformat

    document = {"nodes": [-4, 100], "edges": [[1, 2], [2, -4], [1, 2], [7, 7]]}
    text = json.dumps(document, indent=2).encode()
    fast = read_graph(text, "json")
    scanned = jsonformat._scan_integer_document(
        np.frombuffer(text, dtype=np.uint8), jsonformat.EDGES_KEY, jsonformat.NODES_KEY
    )
    assert scanned[-1], "an all-integer document must take the array scanner"
    assert edges_of(fast) == {(1, 2), (2, -4), (7, 7)}
    assert sorted(fast.names.names_of(range(fast.num_nodes))) == [-4, 1, 2, 7, 100]
    # A document the scanner declines (an extra key) still parses, through the json module.
    slow = read_graph(json.dumps(document | {"directed": True}).encode(), "json")
    assert edges_of(slow) == edges_of(fast) and slow.num_nodes == fast.num_nodes


def test_size_limit_applies_after_decompression() -> None:
    from grail_core import InputTooLargeError

    text = b"1 2\n" * 10_000
    assert read_graph(gzip.compress(text), max_bytes=len(text)).num_nodes == 2
    with pytest.raises(InputTooLargeError):
        read_graph(gzip.compress(text), max_bytes=len(text) - 1)
    with pytest.raises(InputTooLargeError):
        read_graph(text, max_bytes=100)

"""Graph readers: every format, gzip, names kept as uploaded, and clear errors naming the line."""

from __future__ import annotations

import gzip
import json
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grail_core import GraphFormatError, InvalidParameterError, ReachabilityIndex, UnknownNodeError, read_graph
from grail_core.names import NameTokens
from grail_core.readers import guess_format
from tests.reference import reachability_matrix
from tests.strategies import digraphs

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
    text = b"# a comment\n% another\nsource,target,weight\n10,20,0.5\n20,30,1\n30,10,2\n\n10,10,3\n"
    graph = read_graph(text, "edgelist")
    assert graph.names.are_integers
    assert edges_of(graph) == {(10, 20), (20, 30), (30, 10), (10, 10)}
    blanks = read_graph(b"# a comment\n10 20\n20\t30\n 30 10 \n\n10  10\n", "edgelist")
    assert edges_of(blanks) == edges_of(graph)


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
        read_graph(GRA, "svg")


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


# Named graphs against brute force: every format's names map to the same graph, answered by name.

# Without the delimiters and comment marks: a space-separated line whose names hold one ';' each reads, as
# documented, as a semicolon-delimited file (tests/test_formats.py has the dialects).
NAME_ALPHABET = st.characters(blacklist_categories=("Cs", "Zs", "Cc"), blacklist_characters="#%,;\"'")
# Not all decimal integers: an edge list of those is a graph of integer names.
STRING_NAMES = (
    st.text(NAME_ALPHABET, min_size=1, max_size=8)
    .map(lambda s: s + "\0" if s.endswith("0") else s)
    .filter(lambda s: re.fullmatch(r"[+-]?[0-9]+", s) is None)
)
SPARSE_INTS = st.one_of(st.integers(-(2**63), 2**63 - 1), st.sampled_from([-(2**63), 2**63 - 1, -1, 0]))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=digraphs(max_nodes=25), data=st.data())
def test_named_graphs_in_every_format_match_bfs(graph: tuple[int, list[tuple[int, int]]], data: st.DataObject) -> None:
    n, edges = graph
    strings = data.draw(st.booleans())
    names = data.draw(st.lists(STRING_NAMES if strings else SPARSE_INTS, min_size=n, max_size=n, unique=True))
    truth = reachability_matrix(n, edges)
    edge_list = "".join(f"{names[u]} {names[v]}\n" for u, v in edges).encode()
    document = json.dumps({"edges": [[names[u], names[v]] for u, v in edges], "nodes": names}).encode()
    present = sorted({u for edge in edges for u in edge})
    for data_bytes, format_name, nodes in ((edge_list, "edgelist", present), (document, "json", range(n))):
        if not nodes:
            continue
        options = {"header": False} if format_name == "edgelist" else {}
        index = ReachabilityIndex.build(read_graph(data_bytes, format_name, **options), backend="cpu")
        assert index.names.kind in (("str",) if strings else ("int", "range"))
        assert sorted(index.names.names_of(range(index.names.size)), key=str) == sorted(
            (names[u] for u in nodes), key=str
        )
        pairs = [[names[u], names[v]] for u in nodes for v in nodes]
        expected = [bool(truth[u, v]) for u in nodes for v in nodes]
        assert index.query_batch(pairs).tolist() == expected
        assert index.query_batch(np.array(pairs, dtype=object)).tolist() == expected
        tokens = NameTokens.from_strings([str(name) for pair in pairs for name in pair])
        assert index.query_batch(tokens).tolist() == expected
        u, v = nodes[0], nodes[-1]
        assert index.reachable(names[u], names[v]) == truth[u, v]


def test_names_differing_by_a_trailing_nul_are_two_nodes() -> None:
    graph = read_graph(b"a a\0\na\0 b\n", "edgelist")
    assert graph.num_nodes == 3 and edges_of(graph) == {("a", "a\0"), ("a\0", "b")}
    document = json.dumps({"edges": [["a", "a\u0000"]], "nodes": ["a\u0000\u0000"]}).encode()
    assert sorted(read_graph(document, "json").names.names_of(range(3))) == ["a", "a\0", "a\0\0"]


def test_long_names_are_refused_naming_the_line_unless_allowed() -> None:
    long_name = "n" * 5000
    text = f"a b\nb c\nc {long_name}\n".encode()
    with pytest.raises(GraphFormatError, match="5000 bytes") as caught:
        read_graph(text, "edgelist")
    assert caught.value.line == 3
    graph = read_graph(text, "edgelist", max_name_bytes=5000)
    assert long_name in graph.names.names_of(range(graph.num_nodes))
    with pytest.raises(GraphFormatError) as caught:
        read_graph(b"source target\n" + text, "edgelist")  # the header line counts
    assert caught.value.line == 4
    document = json.dumps({"edges": [["a", "b"], ["b", long_name]]}, indent=1).encode()
    with pytest.raises(GraphFormatError, match=r"edge 1 \(target\).*longer than the limit of 4096") as caught:
        read_graph(document, "json")
    assert caught.value.line == 9
    assert read_graph(document, "json", max_name_bytes=5000).num_nodes == 3
    with pytest.raises(InvalidParameterError):
        read_graph(text, "edgelist", max_name_bytes=0)


def test_a_megabyte_name_takes_megabytes_not_gigabytes() -> None:
    """Names are stored as bytes and offsets: one long name among short ones costs its own length."""
    names = [f"n{i}" for i in range(1000)] + ["x" * (1 << 20)]
    text = "".join(f"{names[i]} {names[i + 1]}\n" for i in range(1000)).encode()
    graph = read_graph(text, "edgelist", max_name_bytes=1 << 20)
    assert graph.num_nodes == 1001 and graph.names.nbytes < (1 << 20) + 100_000


@pytest.mark.parametrize(
    ("data", "line", "words"),
    [
        (b'a b\n"" c\n', 2, "empty node name"),
        (b"a b\nb \xff\xfe\n", 2, "not valid UTF-8"),
        (b"a b\nb \xed\xa0\x81\n", 2, "not valid UTF-8"),  # an encoded surrogate
    ],
)
def test_edge_list_name_errors_name_the_line(data: bytes, line: int, words: str) -> None:
    with pytest.raises(GraphFormatError, match=words) as caught:
        read_graph(data, "edgelist")
    assert caught.value.line == line


@pytest.mark.parametrize(
    ("document", "line", "words"),
    [
        ('{"edges": [\n["a", "b"],\n["\\ud801", "c"]\n]}', 3, "lone surrogate"),
        ('{"edges": [["a", ""]]}', 1, "edge 0 \\(target\\) is empty"),
        ('{"edges": [[1, 2]], "nodes": [\n9223372036854775808]}', None, "outside the range of 64-bit"),
        ('{"edges": [[1, true]]}', None, "integers or strings"),
    ],
)
def test_json_name_errors(document: str, line: int | None, words: str) -> None:
    with pytest.raises(GraphFormatError, match=words) as caught:
        read_graph(document.encode(), "json")
    assert caught.value.line == line

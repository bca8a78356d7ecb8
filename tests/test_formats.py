"""Every format as the real tools write it, read back exactly (answers against breadth-first search), and every
way an input used to build a wrong graph: now the right graph, or a clear error."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import networkx as nx
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp

from grail_core import GraphFormatError, InvalidParameterError, ReachabilityIndex, read_graph
from grail_core.formats import ReadOptions
from grail_core.readers import guess_format, read_with
from tests.exports import EXPORTS, check_index, named_graph


def edges_of(graph) -> set[tuple[object, object]]:
    names = graph.names
    return set(zip(names.names_of(graph.src), names.names_of(graph.dst), strict=True))


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("export_name", sorted(EXPORTS))
def test_exports_of_the_real_tools_read_exactly(export_name: str, seed: int, tmp_path) -> None:
    kind, write = EXPORTS[export_name]
    graph = named_graph(seed, kind=kind)
    export = write(graph, tmp_path)
    check_index(ReachabilityIndex.from_file(export.path, backend="cpu", **export.options), graph, export)
    # Told nothing, the reader finds the format from the content and the file name.
    assert read_graph(export.path).format == read_graph(export.path, **export.options).format


@pytest.mark.parametrize("seed", [3, 4])
def test_python_objects(seed: int) -> None:
    graph = named_graph(seed)
    whole = type("Whole", (), {"names": None, "isolated": True, "undirected": False})
    check_index(ReachabilityIndex.from_networkx(graph.networkx(), backend="cpu"), graph, whole)
    undirected = type("Undirected", (), {"names": None, "isolated": True, "undirected": True})
    check_index(ReachabilityIndex.from_networkx(graph.networkx(directed=False), backend="cpu"), graph, undirected)
    edges_only = type("EdgesOnly", (), {"names": None, "isolated": False, "undirected": False})
    frame = graph.df(weight=1.0)
    check_index(ReachabilityIndex.from_pandas(frame, backend="cpu"), graph, edges_only)
    check_index(ReachabilityIndex.from_pandas(frame, "source", 2, backend="cpu"), graph, edges_only)
    numbered = type("Numbered", (), {"names": list(range(graph.n)), "isolated": True, "undirected": False})
    check_index(ReachabilityIndex.from_scipy(graph.matrix(), backend="cpu"), graph, numbered)
    check_index(ReachabilityIndex.from_scipy(graph.matrix().toarray(), backend="cpu"), graph, numbered)
    explicit_zero = sp.csr_array((np.array([0.0]), (np.array([0]), np.array([1]))), shape=(2, 2))
    assert ReachabilityIndex.from_scipy(explicit_zero, backend="cpu").reachable(0, 1)  # a stored entry is an edge


def test_python_object_errors() -> None:
    with pytest.raises(GraphFormatError, match="integers or strings"):
        ReachabilityIndex.from_networkx(nx.grid_2d_graph(2, 2))  # tuples are no names
    with pytest.raises(GraphFormatError, match="not a mix"):
        ReachabilityIndex.from_networkx(nx.DiGraph([(1, "a")]))
    with pytest.raises(InvalidParameterError, match="square"):
        ReachabilityIndex.from_scipy(sp.csr_array((2, 3)))
    with pytest.raises(GraphFormatError, match="give source and target"):
        ReachabilityIndex.from_pandas(pd.DataFrame({"a": [1], "b": [2], "c": [3]}))
    with pytest.raises(GraphFormatError, match=r"row 1.*null"):
        ReachabilityIndex.from_pandas(pd.DataFrame({"src": ["a", None], "dst": ["b", "c"]}))
    with pytest.raises(GraphFormatError, match="double"):
        ReachabilityIndex.from_pandas(pd.DataFrame({"src": [0.5], "dst": [1.5]}))


# ---- the cases that built a wrong graph, each now exact or refused ---------------------------------------


def test_pandas_index_column_is_not_the_source(tmp_path) -> None:
    frame = pd.DataFrame({"source": ["a", "b", "c"], "target": ["b", "c", "a"]}, index=[0, 1, 2])
    frame.to_csv(tmp_path / "edges.csv")
    assert edges_of(read_graph(tmp_path / "edges.csv")) == {("a", "b"), ("b", "c"), ("c", "a")}
    # Read and written again by pandas, the index is named "Unnamed: 0".
    pd.read_csv(tmp_path / "edges.csv").to_csv(tmp_path / "again.csv", index=False)
    assert edges_of(read_graph(tmp_path / "again.csv")) == {("a", "b"), ("b", "c"), ("c", "a")}
    # Columns whose names say nothing: the index is still skipped, and the two others are the edge.
    frame.rename(columns={"source": "pkg", "target": "needs"}).to_csv(tmp_path / "plain.csv")
    assert edges_of(read_graph(tmp_path / "plain.csv")) == {("a", "b"), ("b", "c"), ("c", "a")}
    # Without a header the index cannot be told from a column of sources: refused, saying what to give.
    frame.to_csv(tmp_path / "bare.csv", header=False)
    with pytest.raises(GraphFormatError, match=r"counts the rows.*source_column"):
        read_graph(tmp_path / "bare.csv")
    assert edges_of(read_graph(tmp_path / "bare.csv", source_column=1, target_column=2)) == {
        ("a", "b"),
        ("b", "c"),
        ("c", "a"),
    }


def test_columns_are_chosen_by_their_names() -> None:
    assert edges_of(read_graph(b"weight,source,target\n0.5,1,2\n0.7,2,3\n")) == {(1, 2), (2, 3)}
    assert edges_of(read_graph(b"FromNodeId\tToNodeId\tw\n1\t2\t9\n")) == {(1, 2)}
    assert edges_of(read_graph(b"id;caller;callee\n7;main;parse\n")) == {("main", "parse")}
    assert edges_of(read_graph(b"dst,src\nb,a\n")) == {("a", "b")}  # the names say the direction
    for text, words in (
        (b"a,b,c\n1,2,3\n", "give source_column and target_column"),
        (b"a,b,weight\nx,y,0.5\ny,z,1e3\n", "give source_column and target_column"),  # a word atop numbers
        (b"src,dst,from,to\n1,2,3,4\n", "apart"),
        (b"head,relation,tail\nx,r,y\n", "both ways round"),
    ):
        with pytest.raises(GraphFormatError, match=words):
            read_graph(text)
    chosen = read_graph(b"a,b,c\n1,2,3\n4,5,6\n", source_column="c", target_column=0)
    assert edges_of(chosen) == {(3, 1), (6, 4)}
    assert edges_of(read_graph(b"head,relation,tail\nx,r,y\n", source_column="head", target_column="tail")) == {
        ("x", "y")
    }
    with pytest.raises(GraphFormatError, match="no column named 'nope' in"):
        read_graph(b"a,b\n1,2\n", source_column="nope", target_column="b")
    with pytest.raises(GraphFormatError, match="no column 5"):
        read_graph(b"1 2\n", source_column=5, target_column=0)


def test_quoted_names_keep_their_commas_and_spaces() -> None:
    text = b'"lib 0, v0",mod1\nmod1,"say ""hi"""\n"say ""hi""","lib 0, v0"\n'
    assert edges_of(read_graph(text)) == {("lib 0, v0", "mod1"), ("mod1", 'say "hi"'), ('say "hi"', "lib 0, v0")}
    # Blank-separated text may quote names with blanks.
    assert edges_of(read_graph(b'"New York" Boston\nBoston "New York"\n')) == {
        ("New York", "Boston"),
        ("Boston", "New York"),
    }


def test_networkx_adjacency_list_keeps_every_successor(tmp_path) -> None:
    graph = nx.DiGraph([(0, 1), (0, 2), (0, 3), (1, 2)])
    graph.add_node(9)
    nx.write_adjlist(graph, tmp_path / "g.adjlist")
    read = read_graph(tmp_path / "g.adjlist")
    assert read.format == "adjlist" and edges_of(read) == {(0, 1), (0, 2), (0, 3), (1, 2)} and read.num_nodes == 5
    # Read as an edge list it is refused (its lines differ in length), not cut to first successors.
    with pytest.raises(GraphFormatError, match="format=adjlist"):
        read_graph(tmp_path / "g.adjlist", "edgelist")


def test_symmetric_matrix_market_has_no_size_edge_and_both_directions(tmp_path) -> None:
    text = b"%%MatrixMarket matrix coordinate pattern symmetric\n% a comment\n4 4 2\n2 1\n4 3\n"
    graph = read_graph(text)
    assert graph.format == "mtx" and graph.num_nodes == 4
    assert edges_of(graph) == {(2, 1), (1, 2), (4, 3), (3, 4)}
    real = b"%%MatrixMarket matrix coordinate real general\n3 3 2\n1 2 0.5\n2   3   -1e3\n"
    assert edges_of(read_graph(real)) == {(1, 2), (2, 3)} and read_graph(real).num_nodes == 3
    for bad, words in (
        (b"%%MatrixMarket matrix coordinate real general\n2 3 1\n1 2 1\n", "square"),
        (b"%%MatrixMarket matrix coordinate real general\n2 2 2\n1 2 1\n", "only 1"),
        (b"%%MatrixMarket matrix coordinate real general\n2 2 1\n1 2 1\n2 1 1\n", "more"),
        (b"%%MatrixMarket matrix coordinate real general\n2 2 1\n1 3 1\n", "from 1 to 2"),
        (b"%%MatrixMarket matrix array real general\n2 2\n1\n0\n0\n1\n", "dense"),
    ):
        with pytest.raises(GraphFormatError, match=words):
            read_graph(bad)
    with pytest.raises(GraphFormatError) as caught:
        read_graph(b"%%MatrixMarket matrix coordinate real general\n% c\n3 3 2\n1 2 1\n\n2 x 1\n")
    assert caught.value.line == 6


def test_dot_files_are_refused_not_read_as_edges(tmp_path) -> None:
    for text in (b"digraph G { a -> b; }", b"strict graph {\n a -- b\n}\n", b"/* made by hand */\ndigraph x {a->b}"):
        for format_name in (None, "edgelist"):
            with pytest.raises(GraphFormatError, match=r"DOT.*supported formats are gra, edgelist"):
                read_graph(text, format_name)
    gexf = b'<?xml version="1.0"?>\n<gexf xmlns="http://gexf.net/1.3"><graph></graph></gexf>'
    with pytest.raises(GraphFormatError, match="GEXF"):
        read_graph(gexf)
    with pytest.raises(InvalidParameterError, match="DOT"):
        read_graph(b"a b\n", "dot")
    assert guess_format(b"digraph G { a -> b }") == "dot" and guess_format(b"a b", "x.gexf") == "gexf"


def test_names_starting_with_a_hash_are_names_in_csv_with_a_header(tmp_path) -> None:
    pd.DataFrame({"source": ["#a", "%b"], "target": ["%b", "#c"]}).to_csv(tmp_path / "tags.csv", index=False)
    assert edges_of(read_graph(tmp_path / "tags.csv")) == {("#a", "%b"), ("%b", "#c")}
    # In blank-separated files, and above a header, they are comments.
    assert edges_of(read_graph(b"# made by hand\nsource,target\n1,2\n")) == {(1, 2)}
    assert edges_of(read_graph(b"# Directed graph\n# FromNodeId\tToNodeId\n0\t1\n# mid\n1\t2\n")) == {(0, 1), (1, 2)}


def test_excel_byte_order_mark_is_not_part_of_the_header(tmp_path) -> None:
    pd.DataFrame({"Source": [1, 2], "Target": [2, 3]}).to_csv(tmp_path / "x.csv", index=False, encoding="utf-8-sig")
    assert (tmp_path / "x.csv").read_bytes().startswith(b"\xef\xbb\xbf")
    graph = read_graph(tmp_path / "x.csv")
    assert edges_of(graph) == {(1, 2), (2, 3)} and graph.names.are_integers
    assert edges_of(read_graph(b"\xef\xbb\xbfa b\nb c\n")) == {("a", "b"), ("b", "c")}
    assert edges_of(read_graph(b"\xef\xbb\xbf# exported\na b\n")) == {("a", "b")}  # a comment after the mark


def test_json_is_refused_as_an_edge_list() -> None:
    body = json.dumps({"edges": [[1, 2], [2, 3]]}).encode()
    with pytest.raises(GraphFormatError, match="format=json"):
        read_graph(body, "edgelist")
    with pytest.raises(GraphFormatError, match="format=gra"):
        read_graph(b"graph_for_greach\n2\n0: 1 #\n1: #\n", "edgelist")


def test_a_19_digit_integer_on_the_first_line_is_a_name() -> None:
    big = 9_223_372_036_854_775_807
    graph = read_graph(f"{big} 5\n5 7\n".encode())
    assert edges_of(graph) == {(big, 5), (5, 7)} and graph.names.are_integers
    beyond = read_graph(b"92233720368547758070 5\n5 7\n")  # past int64: string names, none dropped
    assert edges_of(beyond) == {("92233720368547758070", "5"), ("5", "7")}
    assert edges_of(read_graph(b"x y\n1 2\n")) == {(1, 2)}  # a header is still recognised


def test_formats_that_used_to_be_malformed_lines(tmp_path) -> None:
    graph = nx.DiGraph([("a", "b"), ("b", "c")])
    nx.write_graphml(graph, tmp_path / "g.graphml")
    nx.write_gexf(graph, tmp_path / "g.gexf")
    (tmp_path / "g.json").write_text(json.dumps(nx.node_link_data(graph, edges="links")))
    pq.write_table(pa.table({"source": ["a", "b"], "target": ["b", "c"]}), tmp_path / "g.parquet")
    with pa.OSFile(str(tmp_path / "g.arrow"), "wb") as sink:
        table = pa.table({"source": ["a", "b"], "target": ["b", "c"]})
        with pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
    for name in ("g.graphml", "g.json", "g.parquet", "g.arrow"):
        assert edges_of(read_graph(tmp_path / name)) == {("a", "b"), ("b", "c")}, name
        data = (tmp_path / name).read_bytes()
        assert edges_of(read_graph(data)) == {("a", "b"), ("b", "c")}, name  # by content alone
    with pytest.raises(GraphFormatError, match="GEXF files are not read; the supported formats are"):
        read_graph(tmp_path / "g.gexf")


# ---- edge lists: the rules of the first look ----------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "edges"),
    [
        (b"1 2\n2 3\n", {(1, 2), (2, 3)}),
        (b"  1   2  \n\n2\t\t3\r\n", {(1, 2), (2, 3)}),  # runs of blanks, CRLF, blank lines
        (b"1 2 0.5\n2 3 0.7\n", {(1, 2), (2, 3)}),  # a weight column
        (b"1 2 {'weight': 3}\n2 3 {}\n", {(1, 2), (2, 3)}),  # networkx's edge data
        (b"a;b\nb;c\n", {("a", "b"), ("b", "c")}),
        (b"a, b\nb, c\n", {("a", "b"), ("b", "c")}),  # blanks around a delimited name are not part of it
        (b"% matrix-like comment\n1 2\n", {(1, 2)}),
        (b"u v\nv w\n", {("u", "v"), ("v", "w")}),  # column-like names that are nodes below: no header
        (b"source target\n007 8\n", {(7, 8)}),
        (b"x,y,0.5\ny,z,inf\n", {("x", "y"), ("y", "z")}),  # numbers all the way down: no header
    ],
)
def test_edge_list_dialects(text: bytes, edges: set) -> None:
    assert edges_of(read_graph(text, "edgelist")) == edges


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        (b"1 2\n2 3 4\n", 2, "found 3"),
        (b"a,b\nc,d\ne,f,g\n", 3, "found 3"),
        (b"1 2\n\n# c\nlonely\n", 4, "two node names"),
        (b'a,b\n"c\nd",e\n', 2, "line break"),
        (b"source,target\n1,2\n3,4,5\n", 3, "expected 2 fields"),
        (b"source,target\n" + b"1,2\n" * 300_000 + b"3,4,5\n", 300_002, "the header names 2 columns"),
        (b"a b\n" * 300_000 + b"1 2 3\n", 300_001, "found 3"),  # past the first block and the sample
    ],
)
def test_edge_list_errors_name_the_line(text: bytes, line: int, words: str) -> None:
    with pytest.raises(GraphFormatError, match=words) as caught:
        read_graph(text, "edgelist")
    assert caught.value.line == line


def test_names_that_stop_being_integers_after_the_first_blocks() -> None:
    """Integer names for a few MB, then a string: the graph's names are all strings, none lost or merged."""
    lines = [f"{i} {i + 1}\n" for i in range(400_000)]
    text = "".join(lines).encode() + b"400000 last\n"
    graph = read_graph(text)
    assert not graph.names.are_integers and graph.num_nodes == 400_002
    index = ReachabilityIndex.build(graph, backend="cpu")
    assert index.reachable("0", "last") and not index.reachable("last", "0")
    # Written unlike str(int) ("007" is 7 as an integer, but a name of its own as a string): read again as strings.
    padded = b"007 8\n" + "".join(lines[8:]).encode() + b"8 x\n7 y\n"
    graph = read_graph(padded)
    assert ("007", "8") in edges_of(graph) and ("7", "y") in edges_of(graph) and graph.num_nodes == 400_001 - 8 + 4


def test_long_lines_and_gzip_members(tmp_path) -> None:
    long_name = "n" * 6_000_000  # longer than a block
    text = f"a b\nb {long_name}\n".encode()
    assert read_graph(text, max_name_bytes=len(long_name)).num_nodes == 3
    members = gzip.compress(b"1 2\n") + gzip.compress(b"2 3\n")
    assert edges_of(read_graph(members)) == {(1, 2), (2, 3)}
    with pytest.raises(GraphFormatError, match="after the end"):
        read_graph(gzip.compress(b"1 2\n") + b"junk")
    assert edges_of(read_graph(io.BytesIO(b"x y\n1 2\n"))) == {(1, 2)}


def test_graphml_rules() -> None:
    document = b"""<?xml version="1.0"?>
<graphml xmlns="http://graphml.graphdrawing.org/xmlns"><graph edgedefault="undirected">
<node id="a"/><node id="b"/><node id="lonely"/>
<edge source="a" target="b"/><edge source="b" target="c" directed="true"/>
</graph></graphml>"""
    graph = read_graph(document)
    assert edges_of(graph) == {("a", "b"), ("b", "a"), ("b", "c")} and graph.num_nodes == 4
    bomb = b'<?xml version="1.0"?><!DOCTYPE g [<!ENTITY a "aaaa">]><graphml><graph>&a;</graph></graphml>'
    for bad, words in (
        (bomb, "DTD"),
        (b"<graphml><graph><hyperedge/></graph></graphml>", "hyperedges"),
        (b"<graphml><graph></graph><graph></graph></graphml>", "more than one graph"),
        (b"<graphml><graph><edge source='a'/></graph></graphml>", "'target'"),
        (b"<graphml><graph><node id='a'>\n</graph></graphml>", "malformed"),
    ):
        with pytest.raises(GraphFormatError, match=words):
            read_graph(bad, "graphml")


def test_node_link_json_rules() -> None:
    document = {"directed": True, "nodes": [{"id": 1}, {"id": 5}], "links": [{"source": 1, "target": 2, "w": 3}]}
    graph = read_graph(json.dumps(document).encode())
    assert edges_of(graph) == {(1, 2)} and graph.num_nodes == 3
    for bad, words in (
        ({"links": [{"source": 1}]}, '"source" and "target"'),
        ({"links": [], "nodes": [{"name": 1}]}, '"id"'),
        ({"links": [{"source": 1, "target": "a"}]}, "not a mix"),
        ({"links": [], "edges": []}, "not both"),
    ):
        with pytest.raises(GraphFormatError, match=words):
            read_graph(json.dumps(bad).encode(), "json")


def test_table_rules(tmp_path) -> None:
    pq.write_table(pa.table({"a": [1, 2], "b": [2, None]}), tmp_path / "nulls.parquet")
    with pytest.raises(GraphFormatError, match="row 1: the target"):
        read_graph(tmp_path / "nulls.parquet")
    pq.write_table(pa.table({"x": [1], "y": [2], "z": [3]}), tmp_path / "three.parquet")
    with pytest.raises(GraphFormatError, match="give source_column"):
        read_graph(tmp_path / "three.parquet")
    assert edges_of(read_graph(tmp_path / "three.parquet", source_column="z", target_column="x")) == {(3, 1)}
    pq.write_table(pa.table({"s": [1.5], "t": [2.5]}), tmp_path / "floats.parquet")
    with pytest.raises(GraphFormatError, match="double"):
        read_graph(tmp_path / "floats.parquet")
    with pytest.raises(GraphFormatError, match="Parquet"):
        read_graph(b"PAR1 not really", "parquet")
    big = pa.table({"s": pa.array([2**64 - 1, 1], pa.uint64()), "t": pa.array([1, 2], pa.uint64())})
    pq.write_table(big, tmp_path / "uint64.parquet")
    assert edges_of(read_graph(tmp_path / "uint64.parquet")) == {(str(2**64 - 1), "1"), ("1", "2")}


@pytest.mark.parametrize("format", ["arrow", "parquet"])
def test_corrupt_table_bytes_are_the_uploads_fault(format: str) -> None:
    table = pa.table({"s": list(range(1000)), "t": list(range(1, 1001))})
    out = io.BytesIO()
    if format == "arrow":
        with pa.ipc.new_stream(out, table.schema) as writer:
            writer.write_table(table)
    else:
        pq.write_table(table, out)
    whole = out.getvalue()
    # Garbage, and the real bytes overwritten at every offset: a format error each time, never another exception.
    samples = [b"_\x18\xf2\x85\x80\xb0\xc3\xaf}\xf2\xb9\x9a\xb7\xf3\x93\xb5\xab\x11d"]
    samples += [whole[:at] + b"\xff\xff\xff\xff\x00\x00\x00\x80" + whole[at + 8 :] for at in range(0, 400, 4)]
    refused = 0
    for data in samples:
        try:
            graph = read_graph(data, format)
        except GraphFormatError:
            refused += 1
        else:
            assert graph.num_nodes >= 1
    assert refused >= len(samples) // 2


def test_reading_options_are_checked() -> None:
    # Given with a format that does not take them: refused.
    with pytest.raises(InvalidParameterError, match="source_column"):
        read_graph(b'{"edges": [[1, 2]]}', "json", source_column=0, target_column=1)
    with pytest.raises(InvalidParameterError, match="header"):
        read_graph(b"graph_for_greach\n1\n0: #\n", "gra", header=True)
    # Given without a format: they apply where the format found takes them.
    assert edges_of(read_graph(b'{"edges": [[1, 2]]}', source_column=0, target_column=1)) == {(1, 2)}
    assert read_graph(b"graph_for_greach\n2\n0: 1 #\n1: #\n", header=True).num_nodes == 2
    with pytest.raises(InvalidParameterError, match="unknown graph format"):
        read_graph(b"1 2\n", "svg")


def test_the_format_table_names_each_format_once() -> None:
    from grail_core.formats import FORMAT_TABLE, FORMATS, ReadOptions, format_of_media_type, format_of_name
    from grail_core.readers import _reader

    suffixes = [suffix for row in FORMAT_TABLE.values() for suffix in row.suffixes]
    media = [media for row in FORMAT_TABLE.values() for media in row.media_types]
    assert len(suffixes) == len(set(suffixes)) and len(media) == len(set(media))
    for row in FORMAT_TABLE.values():
        assert all(format_of_name(f"x{suffix}.gz") == row.name for suffix in row.suffixes)
        assert all(format_of_media_type(m) == row.name for m in row.media_types)
        assert all(m is None or m in row.media_types for m in row.suffixes.values())
        assert callable(_reader(row.name)) if row.readable else row.name not in FORMATS
    with pytest.raises(InvalidParameterError, match="header applies to edge lists"):
        ReadOptions("parquet", header=True).check()
    ReadOptions("parquet", source_column="a").check()


@pytest.mark.parametrize("name", ["edges.txt", "edges.csv", "edges.txt.gz", "edges.gra"])
def test_reading_a_file_reports_its_progress(tmp_path: Path, name: str) -> None:
    count = 200_000
    if name.endswith(".gra"):
        text = f"graph_for_greach\n{count + 1}\n" + "".join(f"{i}: {i + 1} #\n" for i in range(count)) + f"{count}: #\n"
    else:
        sep = "," if name.endswith(".csv") else " "
        text = "".join(f"{i}{sep}{i + 1}\n" for i in range(count))
    data = gzip.compress(text.encode()) if name.endswith(".gz") else text.encode()
    path = tmp_path / name
    path.write_bytes(data)
    seen: list[float] = []
    graph = read_with(path, ReadOptions(), progress=seen.append)
    assert graph.num_nodes == count + 1
    assert seen and seen == sorted(set(seen)) and seen[-1] == 1.0 and 0 < seen[0] <= 1.0

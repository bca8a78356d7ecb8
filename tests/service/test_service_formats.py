"""Every graph format through a real server, as users upload them: files written by pandas, networkx, scipy and
pyarrow, the format told by the file's name alone; the issue's wrong graphs, now exact or a clear 4xx; the
column options; and the CLI's progress."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from grail_core.formats import FORMATS
from service.cli import main as cli_main
from service.client import GrailClient, GrailServiceError
from tests.exports import EXPORTS, Export, NamedGraph, named_graph
from tests.reference import reachability_matrix

pytestmark = pytest.mark.timeout(180)


def answers_exactly(client: GrailClient, graph_id: str, graph: NamedGraph, export: Export) -> None:
    """The server answers every pair of the nodes the file knows as breadth-first search does, by name."""
    edges = graph.edges + ([(v, u) for u, v in graph.edges] if export.undirected else [])
    truth = reachability_matrix(graph.n, edges)
    names = export.names or graph.names
    known = range(graph.n) if export.isolated else sorted({u for edge in graph.edges for u in edge})
    pairs = [(names[u], names[v]) for u in known for v in known]
    assert client.query_batch(graph_id, pairs).tolist() == [bool(truth[u, v]) for u in known for v in known]
    assert client.get(graph_id)["stats"]["nodes"] == len(known)


@pytest.mark.parametrize("export_name", sorted(EXPORTS))
def test_every_format_uploads_by_its_file_name_and_answers_exactly(
    client: GrailClient, export_name: str, tmp_path: Path
) -> None:
    kind, write = EXPORTS[export_name]
    graph = named_graph(5, kind=kind)
    export = write(graph, tmp_path)
    record = client.upload(export.path, wait=True)  # no format: the name's suffix (and the content) tell
    assert record["status"] == "ready", record
    answers_exactly(client, record["id"], graph, export)


def upload_text(client: GrailClient, text: bytes, **options: object) -> dict:
    options.setdefault("content_type", "text/csv")
    return client.upload(text, wait=True, **options)  # type: ignore[arg-type]


def edges_answered(client: GrailClient, graph_id: str, pairs: list[tuple[object, object]]) -> list[bool]:
    return client.query_batch(graph_id, pairs).tolist()


def test_the_issues_wrong_graphs_are_now_exact(client: GrailClient) -> None:
    # Columns weight,source,target with a header: the weights are no names, the header is no edge.
    record = upload_text(client, b"weight,source,target\n0.5,a,b\n1.5,b,c\n")
    assert record["stats"]["nodes"] == 3 and record["stats"]["edge_entries"] == 2
    assert edges_answered(client, record["id"], [("a", "c"), ("c", "a")]) == [True, False]
    # Quoted names with commas and spaces stay whole.
    record = upload_text(client, b'source,target\n"lib 0, v0",mod1\nmod1,"x ""y"""\n')
    assert record["stats"]["nodes"] == 3
    assert edges_answered(client, record["id"], [("lib 0, v0", 'x "y"')]) == [True]
    # Names starting with '#' in a CSV with a header are names, not comments.
    record = upload_text(client, b"source,target\n#a,b\nb,#c\n")
    assert edges_answered(client, record["id"], [("#a", "#c")]) == [True]
    # Excel's byte-order mark is not part of the header's first name, and the header is no edge.
    record = upload_text(client, "\ufeffFrom;To\r\nx;y\r\n".encode())
    assert record["stats"]["nodes"] == 2 and edges_answered(client, record["id"], [("x", "y")]) == [True]
    # A 19-digit integer on the first line is a node, not a header.
    record = upload_text(client, b"1234567890123456789 2\n2 3\n", content_type="text/plain")
    assert record["stats"]["edge_entries"] == 2
    assert edges_answered(client, record["id"], [(1234567890123456789, 3)]) == [True]


def test_the_issues_refused_inputs_are_clear_4xx(client: GrailClient, tmp_path: Path) -> None:
    supported = ", ".join(FORMATS)
    # A one-line DOT file: by its name (Content-Type text/vnd.graphviz) refused before the upload ...
    dot = tmp_path / "g.dot"
    dot.write_text("digraph G { a -> b }\n")
    with pytest.raises(GrailServiceError) as refused:
        client.upload(dot, wait=True)
    assert refused.value.status == 415 and supported in refused.value.detail
    # ... and by its content when it comes as plain text, never the edge 'digraph -> G'.
    with pytest.raises(GrailServiceError) as failed:
        upload_text(client, b"digraph G { a -> b }\n", content_type="text/plain")
    assert failed.value.status == 422 and "DOT" in failed.value.detail and supported in failed.value.detail
    gexf = b'<?xml version="1.0"?>\n<gexf xmlns="http://gexf.net/1.3"><graph/></gexf>\n'
    with pytest.raises(GrailServiceError) as failed:
        upload_text(client, gexf, content_type="application/xml")
    assert "GEXF" in failed.value.detail and supported in failed.value.detail
    # A JSON body with format=edgelist: not a 2-node graph.
    with pytest.raises(GrailServiceError) as failed:
        upload_text(client, b'{"edges": [[0, 1], [1, 2]]}', format="edgelist")
    assert "format=json" in failed.value.detail
    # An unknown format names the supported ones.
    with pytest.raises(GrailServiceError) as unknown:
        upload_text(client, b"a b\n", format="gexf")
    assert unknown.value.status == 422 and "graphml" in unknown.value.detail


def test_columns_are_chosen_by_parameter_where_the_names_do_not_tell(client: GrailClient) -> None:
    ambiguous = b"a,b,c\nx,y,1\ny,z,2\n"
    with pytest.raises(GrailServiceError) as failed:
        upload_text(client, ambiguous)
    assert failed.value.status == 422
    assert "source_column" in failed.value.detail and "target_column" in failed.value.detail
    record = upload_text(client, ambiguous, source_column="b", target_column=0)
    assert edges_answered(client, record["id"], [("z", "x"), ("x", "z")]) == [True, False]
    # head/tail run both ways round: never a guess.
    with pytest.raises(GrailServiceError) as failed:
        upload_text(client, b"head,tail\nx,y\n")
    assert "source_column" in failed.value.detail
    record = upload_text(client, b"head,tail\nx,y\n", source_column="tail", target_column="head")
    assert edges_answered(client, record["id"], [("y", "x"), ("x", "y")]) == [True, False]
    # header=false: the first row is an edge.
    record = upload_text(client, b"source,target\nsource,x\n", header=False)
    assert edges_answered(client, record["id"], [("source", "x")]) == [True]
    # Options a format does not take are refused before the upload is read: no graph is made.
    graphs = len(client.list())
    with pytest.raises(GrailServiceError) as refused:
        upload_text(client, b'{"edges": [[0, 1]]}', format="json", source_column="a")
    assert refused.value.status == 422 and refused.value.error == "InvalidParameter"
    assert "source_column" in refused.value.detail
    with pytest.raises(GrailServiceError) as refused:
        upload_text(client, b"a b\n", format="parquet", header=True)
    assert refused.value.status == 422 and "header" in refused.value.detail
    assert len(client.list()) == graphs


def test_cli_infers_the_format_and_shows_upload_then_build_progress(
    server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    graph = named_graph(6, kind="tricky")
    export = EXPORTS["parquet-pandas"][1](graph, tmp_path)
    assert cli_main(["--url", server.url, "upload", str(export.path), "--json"]) == 0
    out, err = capsys.readouterr()
    assert '"status": "ready"' in out and '"format": "parquet"' in out  # from the Content-Type the name set
    assert "uploaded" in err and "MiB/s" in err and "ready" in err
    adjlist = EXPORTS["adjlist-networkx"][1](named_graph(6, kind="plain"), tmp_path)
    assert cli_main(["--url", server.url, "upload", str(adjlist.path), "--json"]) == 0
    assert '"format": "adjlist"' in capsys.readouterr().out
    csv = tmp_path / "ambiguous.csv"
    csv.write_text("a,b,c\nx,y,1\n")
    argv = ["--url", server.url, "upload", str(csv), "--source-column", "a", "--target-column", "b", "--json"]
    assert cli_main(argv) == 0
    assert '"status": "ready"' in capsys.readouterr().out


def test_upload_progress_reaches_the_whole_size(client: GrailClient) -> None:
    body = b"".join(b"%d %d\n" % (k, k + 1) for k in range(300_000))
    seen: list[tuple[int, int]] = []
    record = client.upload(body, content_type="text/plain", on_upload=lambda sent, total: seen.append((sent, total)))
    assert len(seen) > 1 and seen[-1] == (len(body), len(body))
    assert [sent for sent, _ in seen] == sorted(sent for sent, _ in seen)
    client.wait_until_ready(record["id"])


def test_cli_upload_bar_on_a_terminal() -> None:
    from service.cli import UploadBar

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Terminal()
    bar = UploadBar(stream)
    for sent in (1 << 20, 2 << 20, 3 << 20):
        bar(sent, 3 << 20)
    bar.close()
    assert "upload" in stream.getvalue() and "3.00M/3.00M" in stream.getvalue()

"""Node names over HTTP: string and sparse-integer graphs on every query path, and the names' edge cases
(trailing NUL, booleans, integers outside int64, invalid UTF-8, empty names, lone surrogates, long names)."""

from __future__ import annotations

import json

import httpx
import numpy as np
import pytest

from benchmarks.generate import package_graph, package_names
from service.client import GrailClient, GrailServiceError
from tests.reference import reachability_matrix

from .conftest import Server

pytestmark = pytest.mark.timeout(180)

# Names a real upload may hold besides package names: unicode, a number, and two that differ by a trailing NUL.
SPECIAL = ["zürich", "東京", "9", "a", "a\0", "😀x", 'q"uote']
NODES = 300


@pytest.fixture(scope="module")
def named(client: GrailClient) -> tuple[str, list[str], np.ndarray]:
    """A package-like graph with string names, uploaded as TSV; its names and brute-force reachability."""
    names = package_names(NODES - len(SPECIAL), seed=7) + SPECIAL
    src, dst = package_graph(NODES, 900, seed=7)
    extra = [(NODES - 4, NODES - 3), (NODES - 3, NODES - 7), (NODES - 7, 0)]  # a -> a\0 -> zürich -> ...
    edges = list(zip(src.tolist(), dst.tolist(), strict=True)) + extra + [(v, v) for v in range(NODES)]
    tsv = "".join(f"{names[u]}\t{names[v]}\n" for u, v in edges).encode()
    record = client.upload(tsv, content_type="text/tab-separated-values", wait=True)
    assert record["stats"]["names"] == "str" and record["stats"]["nodes"] == NODES
    return record["id"], names, reachability_matrix(NODES, edges)


def sample(truth: np.ndarray, count: int, seed: int) -> np.ndarray:
    """Pairs, half of them reachable ones."""
    rng = np.random.default_rng(seed)
    reach = np.argwhere(truth)
    pairs = np.concatenate([reach[rng.integers(0, len(reach), count // 2)], rng.integers(0, NODES, (count // 2, 2))])
    return pairs[rng.permutation(count)]


def error_of(response: httpx.Response, status: int) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["detail"] and body["error"]
    return body


def test_string_names_on_every_query_path(client: GrailClient, named: tuple[str, list[str], np.ndarray]) -> None:
    graph_id, names, truth = named
    http = client.http
    pairs = sample(truth, 4000, seed=1)
    expected = truth[pairs[:, 0], pairs[:, 1]]
    as_names = [[names[u], names[v]] for u, v in pairs]
    queries = f"/graphs/{graph_id}/queries"
    # JSON read by the scanner (escapes included: the quote, NUL, non-ASCII as \\u escapes) ...
    for ensure_ascii in (True, False):
        body = json.dumps({"pairs": as_names}, ensure_ascii=ensure_ascii).encode()
        answer = http.post(queries, content=body, headers={"Content-Type": "application/json"})
        assert answer.status_code == 200 and answer.json()["reachable"] == expected.tolist()
    # ... and by json.loads (another key), and through the client.
    body = json.dumps({"pairs": as_names, "comment": "x"}).encode()
    assert http.post(queries, content=body, headers={"Content-Type": "application/json"}).json()["reachable"] == (
        expected.tolist()
    )
    assert np.array_equal(client.query_batch(graph_id, as_names), expected)
    # Text lines: every name here is free of whitespace.
    text = "".join(f"{u}\t{v}\r\n" for u, v in as_names).encode()
    lines = "".join(f"{int(a)}\n" for a in expected).encode()
    assert client.query_lines(graph_id, text) == lines
    # GETs: single pairs (every special name, both ways) and ?pairs=.
    special = [names.index(s) for s in SPECIAL]
    for u in special:
        for v in special[:3]:
            body = http.get(f"/graphs/{graph_id}/reachable", params={"source": names[u], "target": names[v]}).json()
            assert body == {"source": names[u], "target": names[v], "reachable": bool(truth[u, v])}
    few = [p for p in as_names[:200] if not any("," in n or ";" in n for n in p)]
    assert client.reachable_many(graph_id, few) == [bool(truth[names.index(u), names.index(v)]) for u, v in few]
    # Binary integers on a string graph: read as decimal strings (the name "9").
    binary = np.array([[9, 9]], dtype="<i8").tobytes()
    answer = http.post(queries, content=binary, headers={"Content-Type": "application/octet-stream"})
    assert answer.status_code == 200 and answer.json()["reachable"] == [True]


def test_trailing_nul_empty_and_unknown_string_names(client: GrailClient, named: tuple[str, list, np.ndarray]) -> None:
    graph_id, names, truth = named
    http = client.http
    a, a_nul = names.index("a"), names.index("a\0")
    assert truth[a, a_nul] and not truth[a_nul, a]
    assert client.reachable(graph_id, "a", "a\0") and not client.reachable(graph_id, "a\0", "a")
    queries = f"/graphs/{graph_id}/queries"
    answer = http.post(queries, json={"pairs": [["a", "a\u0000"], ["a\u0000", "a"]]})
    assert answer.json()["reachable"] == [True, False]
    for bad in ("a\0\0", "", "A", "zurich"):
        body = error_of(http.get(f"/graphs/{graph_id}/reachable", params={"source": bad, "target": "a"}), 404)
        assert body["error"] == "UnknownNodeError" and body["node"] == bad
        # A batch naming an unknown node: 404 as on GET, the pair listed.
        listed = error_of(http.post(queries, json={"pairs": [["a", bad]]}), 404)
        assert listed["node"] == bad and listed["unknown"] == [{"pair": 0, "end": "target", "name": bad}]
    for not_a_name in (True, None):
        assert error_of(http.post(queries, json={"pairs": [[not_a_name, "a"]]}), 422)["error"] == "BadPairs"


def test_lone_surrogates_and_invalid_utf8_get_a_4xx_with_a_json_body(
    client: GrailClient, named: tuple[str, list, np.ndarray]
) -> None:
    graph_id = named[0]
    http = client.http
    queries = f"/graphs/{graph_id}/queries"
    for body in (b'{"pairs": [["a", "\\ud801"]]}', b'{"pairs": [["a", "\\ud801"]], "x": 1}'):  # scanner, json.loads
        answer = error_of(http.post(queries, content=body, headers={"Content-Type": "application/json"}), 404)
        assert answer["node"] == "\\ud801" and "ud801" in answer["detail"]
    for content_type in ("application/json", "text/plain"):
        body = b'{"pairs": [["a", "\xff"]]}' if content_type == "application/json" else b"a \xff\n"
        answer = error_of(http.post(queries, content=body, headers={"Content-Type": content_type}), 422)
        assert answer["error"] in ("BadJSON", "BadText")
    # A percent-encoded invalid byte in a URL is decoded as U+FFFD: an unknown name, not a server error.
    answer = error_of(http.get(f"/graphs/{graph_id}/reachable?source=%FF&target=a"), 404)
    assert answer["node"] == "\ufffd"


def test_sparse_integer_names_on_every_query_path(client: GrailClient) -> None:
    top, bottom = 2**63 - 1, -(2**63)
    names = [top, bottom, 10**18, -5, 0, 7_000_000_000]
    edges = [(0, 1), (1, 2), (2, 3), (3, 1), (4, 5), (5, 0)]
    text = "".join(f"{names[u]} {names[v]}\n" for u, v in edges).encode()
    record = client.upload(text, content_type="text/plain", wait=True)
    assert record["stats"]["names"] == "int"
    graph_id = record["id"]
    truth = reachability_matrix(len(names), edges)
    pairs = np.array([[names[u], names[v]] for u in range(len(names)) for v in range(len(names))])
    expected = truth.ravel()
    http = client.http
    queries = f"/graphs/{graph_id}/queries"
    assert np.array_equal(client.query_batch(graph_id, pairs), expected)  # binary int64
    assert http.post(queries, json={"pairs": pairs.tolist()}).json()["reachable"] == expected.tolist()
    as_strings = [[str(u), f"+{v}" if v >= 0 else str(v)] for u, v in pairs.tolist()]
    assert http.post(queries, json={"pairs": as_strings}).json()["reachable"] == expected.tolist()
    lines = "".join(f"{u} {v}\n" for u, v in as_strings).encode()
    answer = http.post(queries, content=lines, headers={"Content-Type": "text/plain", "Accept": "text/plain"})
    assert answer.content == "".join(f"{int(a)}\n" for a in expected).encode()
    assert client.reachable(graph_id, str(top), bottom) is bool(truth[0, 1])
    body = http.get(f"/graphs/{graph_id}/reachable", params={"pairs": f"{top},{bottom};-5,0"}).json()
    assert body["reachable"] == [bool(truth[0, 1]), bool(truth[3, 4])]
    # Integers outside int64 and things that are not integers: unknown names, named in the answer.
    for outside in (2**63, -(2**63) - 1, 10**20):
        answer = error_of(http.post(queries, json={"pairs": [[0, outside]]}), 404)
        assert answer["node"] in (outside, str(outside))
        answer = error_of(
            http.post(queries, content=f"0 {outside}\n".encode(), headers={"Content-Type": "text/plain"}), 404
        )
        assert answer["node"] == str(outside)
        answer = error_of(http.get(f"/graphs/{graph_id}/reachable", params={"source": outside, "target": 0}), 404)
        assert answer["node"] == str(outside)
    for other in (1.5, "zero", " 7"):
        assert error_of(http.post(queries, json={"pairs": [[0, other]]}), 404)["node"] in (other, str(other))
    assert error_of(http.post(queries, json={"pairs": [[0, True]]}), 422)["error"] == "BadPairs"
    assert http.post(queries, json={"pairs": [[0.0, 0]]}).json()["reachable"] == [True]  # an integral float
    metrics = http.get("/metrics").text
    assert 'status="500"' not in metrics


def test_long_names_are_refused_with_the_line(client: GrailClient, server: Server) -> None:
    text = ("a b\n" + "b " + "x" * 5000 + "\n").encode()
    response = client.http.post("/graphs", params={"wait": "true"}, content=text, headers={"Content-Type": "text/csv"})
    body = error_of(response, 422)
    assert body["error"] == "GraphFormatError" and body["line"] == 2 and "4096" in body["detail"]


def test_the_name_limit_is_a_setting(tmp_path) -> None:
    server = Server(tmp_path / "data", tmp_path / "server.log", "--max-name-bytes", "8").start()
    try:
        with server.client() as client:
            assert client.upload(b"abcdefgh b\n", wait=True)["status"] == "ready"
            with pytest.raises(GrailServiceError) as caught:
                client.upload(b"a b\nabcdefghi b\n", wait=True)
            assert caught.value.status == 422 and caught.value.body["line"] == 2
    finally:
        server.stop()


def test_names_with_whitespace_and_commas_from_a_json_upload(client: GrailClient) -> None:
    """Names an edge list cannot hold: the client sends such pairs as JSON instead of text."""
    names = ["new york", "a,b", "tab\there", "line\nbreak", "plain", " lead", "trail "]
    edges = [[names[i], names[i + 1]] for i in range(len(names) - 1)]
    record = client.upload(json.dumps({"edges": edges}).encode(), content_type="application/json", wait=True)
    graph_id = record["id"]
    pairs = [[u, v] for u in names for v in names]
    expected = [names.index(u) <= names.index(v) for u, v in pairs]
    assert client.query_batch(graph_id, pairs).tolist() == expected
    assert client.query_batch(graph_id, [["plain", "trail "]]).tolist() == [True]
    assert client.reachable(graph_id, "new york", "line\nbreak")

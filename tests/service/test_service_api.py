"""The HTTP API end to end: uploads in every format, exact answers, errors, metrics, concurrency, CLI."""

from __future__ import annotations

import asyncio
import gzip
import json
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import numpy as np
import pytest

from service.client import AsyncGrailClient, BuildFailedError, GrailClient, GrailServiceError
from service.exceptions import UnknownNodeError
from tests.reference import dag_levels

from ..gpu import device_present
from .conftest import REPO, GraphFiles, Server, wait_until

pytestmark = pytest.mark.timeout(180)


def gra_edges(files: GraphFiles, name: str) -> tuple[int, np.ndarray]:
    """Node count and (m, 2) edges of a .gra file, read here independently of grail_core."""
    lines = files.path(name).read_text().splitlines()
    n = int(lines[1])
    edges = [(i, int(v)) for i, line in enumerate(lines[2 : 2 + n]) for v in line.split(":")[1].split()[:-1]]
    return n, np.array(edges, dtype=np.int64)


def expect(
    client: GrailClient,
    files: GraphFiles,
    graph_id: str,
    stem: str,
    pairs: np.ndarray | None = None,
    answers: np.ndarray | None = None,
) -> None:
    """Both query sets of a graph answered exactly as its .ans files (optionally a subset)."""
    for kind in ("", ".pos"):
        q = files.pairs(f"{stem}{kind}.que") if pairs is None else pairs
        a = files.answers(f"{stem}{kind}.ans") if answers is None else answers
        got = client.query_batch(graph_id, q)
        assert got.dtype == bool and got.shape == a.shape
        assert np.array_equal(got, a), f"{stem}{kind}: {np.count_nonzero(got != a)} wrong answers"
        if pairs is not None:
            return


@pytest.fixture(scope="module")
def kegg(client: GrailClient, files: GraphFiles) -> str:
    """The sparse DAG with isolated nodes (the KEGG graphs' shape), uploaded as .gra."""
    record = client.upload(files.path("dag.gra"), name="kegg", wait=True)
    assert record["status"] == "ready"
    return record["id"]


def test_gra_upload_answers_exactly(client: GrailClient, files: GraphFiles, kegg: str) -> None:
    record = client.get(kegg)
    assert record["name"] == "kegg" and record["format"] == "gra"
    stats = record["stats"]
    dag = files.graphs["dag"]
    expected = (dag.num_nodes, len(dag.edges), dag.num_nodes, dag_levels(dag.num_nodes, dag.edges), "cpu")
    assert (stats["nodes"], stats["edges"], stats["components"], stats["levels"], stats["backend"]) == expected
    assert set(stats["phase_seconds"]) >= {"graph", "condense", "labels", "hubs"}
    expect(client, files, kegg, "dag")


def test_all_query_encodings_agree(client: GrailClient, files: GraphFiles, kegg: str) -> None:
    pairs = files.pairs("dag.pos.que")[:2000]
    answers = files.answers("dag.pos.ans")[:2000]
    text = "".join(f"{u} {v}\n" for u, v in pairs).encode()
    expected_lines = "".join(f"{int(a)}\n" for a in answers).encode()
    assert client.query_lines(kegg, text) == expected_lines  # parsed by the client, sent binary
    as_text = client.http.post(
        f"/graphs/{kegg}/queries", content=text, headers={"Content-Type": "text/plain", "Accept": "text/plain"}
    )
    assert as_text.status_code == 200 and as_text.content == expected_lines
    response = client.http.post(f"/graphs/{kegg}/queries", json={"pairs": [[int(u), str(v)] for u, v in pairs]})
    assert response.status_code == 200
    body = response.json()
    assert body["reachable"] == answers.tolist()
    assert body["stats"]["pairs"] == 2000 and body["stats"]["positives"] == int(answers.sum())
    assert client.reachable_many(kegg, [tuple(p) for p in pairs[:50]]) == answers[:50].tolist()
    u, v = pairs[0]
    single = client.http.get(f"/graphs/{kegg}/reachable", params={"source": u, "target": v}).json()
    assert single == {"source": int(u), "target": int(v), "reachable": bool(answers[0])}
    assert client.reachable(kegg, str(u), int(v)) is bool(answers[0])
    assert client.http.post(f"/graphs/{kegg}/queries", json={"pairs": []}).json()["reachable"] == []


def test_gzip_gra_upload(client: GrailClient, files: GraphFiles, tmp_path) -> None:
    """The graph with cycles, self loops and duplicate edges, gzip-compressed."""
    packed = tmp_path / "cyclic.gra.gz"
    packed.write_bytes(gzip.compress(files.path("cyclic.gra").read_bytes()))
    record = client.upload(packed, wait=True)  # Content-Encoding: gzip from the name
    assert record["status"] == "ready" and record["name"] == record["id"]  # no name given: its id
    expect(client, files, record["id"], "cyclic")


def test_json_upload_with_isolated_nodes(client: GrailClient, files: GraphFiles) -> None:
    n, edges = gra_edges(files, "cyclic.gra")
    body = json.dumps({"edges": edges.tolist(), "nodes": list(range(n))}).encode()
    record = client.upload(body, content_type="application/json", wait=True)
    assert record["format"] == "json" and record["stats"]["nodes"] == n
    expect(client, files, record["id"], "cyclic")


def test_csv_edge_list_upload(client: GrailClient, files: GraphFiles) -> None:
    """An edge list has no isolated nodes: queries naming one get 404, all others are exact."""
    n, edges = gra_edges(files, "dag.gra")
    csv = "source,target\n" + "".join(f"{u},{v}\n" for u, v in edges)
    record = client.upload(gzip.compress(csv.encode()), content_type="text/csv", content_encoding="gzip", wait=True)
    assert record["format"] == "edgelist"
    graph_id = record["id"]
    present = np.zeros(n, dtype=bool)
    present[edges.ravel()] = True
    for kind in ("", ".pos"):
        pairs, answers = files.pairs(f"dag{kind}.que"), files.answers(f"dag{kind}.ans")
        keep = present[pairs].all(axis=1)
        assert 0 < keep.sum() < len(pairs) or kind == ".pos"
        expect(client, files, graph_id, "dag", pairs[keep], answers[keep])
    isolated = int(np.flatnonzero(~present)[0])
    with pytest.raises(GrailServiceError) as info:
        client.reachable(graph_id, isolated, 0)
    assert info.value.status == 404 and info.value.body["node"] in (isolated, str(isolated))


def test_string_names(client: GrailClient, files: GraphFiles) -> None:
    """Names that are not integers stay strings, in tab-separated edge lists and in the answers."""
    _, edges = gra_edges(files, "dag.gra")
    tsv = "".join(f"gene:{u}\tgene:{v}\n" for u, v in edges).encode()
    graph_id = client.upload(tsv, content_type="text/tab-separated-values", wait=True)["id"]
    pairs = files.pairs("dag.pos.que")[:3000]
    answers = files.answers("dag.pos.ans")[:3000]
    connected = np.isin(pairs, edges).all(axis=1)  # names an edge list knows
    pairs, answers = pairs[connected], answers[connected]
    named = [[f"gene:{u}", f"gene:{v}"] for u, v in pairs]
    assert np.array_equal(client.query_batch(graph_id, named), answers)
    lines = "".join(f"{u} {v}\n" for u, v in named).encode()  # not integers: sent as the text itself
    assert client.query_lines(graph_id, lines) == "".join(f"{int(a)}\n" for a in answers).encode()
    u, v = named[0]
    body = client.http.get(f"/graphs/{graph_id}/reachable", params={"source": u, "target": v}).json()
    assert body == {"source": u, "target": v, "reachable": bool(answers[0])}
    with pytest.raises(GrailServiceError) as info:
        client.reachable(graph_id, "gene:nope", u)
    assert info.value.status == 404 and "gene:nope" in info.value.detail


def test_binary_pairs_and_answers_of_every_width(
    client: GrailClient, files: GraphFiles, server: Server, kegg: str
) -> None:
    pairs = np.concatenate([files.pairs("dag.que"), files.pairs("dag.pos.que")])
    answers = np.concatenate([files.answers("dag.ans"), files.answers("dag.pos.ans")])
    pairs, answers = pairs[:9999], answers[:9999]  # not a multiple of 8: the packed answers end in padding
    assert 0 < answers.sum() < len(answers)
    for width in (None, 16, 32, 64):
        assert np.array_equal(client.query_batch(kegg, pairs, width=width), answers), width

    async def from_async_client() -> tuple[np.ndarray, bytes]:
        async with AsyncGrailClient(server.url) as ac:
            text = "".join(f"{u} {v}\n" for u, v in pairs[:100]).encode()
            return await ac.query_batch(kegg, pairs, width=32), await ac.query_lines(kegg, text)

    batch, lines = asyncio.run(from_async_client())
    assert np.array_equal(batch, answers)
    assert lines == "".join(f"{int(a)}\n" for a in answers[:100]).encode()
    packed = np.packbits(answers).tobytes()
    for width, dtype in ((16, "<i2"), (32, "<i4"), (64, "<i8")):
        for accept, expected in (
            ("application/octet-stream", answers.astype(np.uint8).tobytes()),
            ("application/octet-stream; width=1", packed),
        ):
            response = client.http.post(
                f"/graphs/{kegg}/queries",
                content=pairs.astype(dtype).tobytes(),
                headers={"Content-Type": f"application/octet-stream; width={width}", "Accept": accept},
            )
            assert response.status_code == 200, response.text
            assert response.headers["content-type"] == accept and response.content == expected, (width, accept)
    with pytest.raises(ValueError):
        client.query_batch(kegg, np.array([[0, 40000]]), width=16)


def test_integer_names_wider_than_16_and_32_bits(client: GrailClient) -> None:
    """The client picks the narrowest width that holds the names; wide names still answer exactly."""
    big, mid = 2**40 + 5, 70_000
    edges = f"{big} {mid}\n{mid} 3\n3 {-big}\n"
    graph_id = client.upload(edges.encode(), content_type="text/plain", wait=True)["id"]
    pairs = np.array([[big, -big], [-big, big], [mid, 3], [3, mid], [big, 3]])
    assert client.query_batch(graph_id, pairs).tolist() == [True, False, True, False, True]
    assert client.query_batch(graph_id, pairs[2:4]).tolist() == [True, False]  # 32 bits suffice
    assert client.query_lines(graph_id, f"{big} {-big}\n3 {mid}\n".encode()) == b"1\n0\n"
    with pytest.raises(UnknownNodeError) as info:
        client.query_batch(graph_id, np.array([[mid, 2**40]]))
    assert info.value.status == 404 and info.value.node in (2**40, str(2**40))
    assert info.value.unknown == [{"pair": 0, "end": "target", "name": 2**40}]
    with pytest.raises(ValueError):
        client.query_batch(graph_id, pairs, width=32)


def error_of(response: httpx.Response, status: int) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["detail"] and body["error"]
    return body


def test_bad_uploads(client: GrailClient, server: Server) -> None:
    http = client.http
    bad_gra = b"graph_for_greach\n3\n0: 1 #\n1: x #\n2: #\n"
    body = error_of(
        http.post("/graphs", params={"wait": "true"}, content=bad_gra, headers={"Content-Type": "text/x-grail-gra"}),
        422,
    )
    assert body["error"] == "GraphFormatError" and body["line"] == 4 and body["graph"]["status"] == "failed"
    # Without wait: accepted, then failed with the same line in the record.
    record = client.upload(bad_gra, content_type="text/x-grail-gra")
    with pytest.raises(BuildFailedError) as info:
        client.wait_until_ready(record["id"], timeout=150)  # a hang guard
    assert info.value.record["error"]["line"] == 4
    # Failed for good: 424, with the build's error (409 is for a graph still queued or building).
    failed = error_of(http.get(f"/graphs/{record['id']}/reachable", params={"source": 0, "target": 1}), 424)
    assert failed["error"] == "GraphFailed" and failed["build"]["line"] == 4
    out_of_range = b"graph_for_greach\n2\n0: 7 #\n1: #\n"
    assert (
        error_of(
            http.post("/graphs?wait=true", content=out_of_range, headers={"Content-Type": "text/x-grail-gra"}), 422
        )["line"]
        == 3
    )
    assert (
        error_of(
            http.post("/graphs?wait=true", content=b"{not json", headers={"Content-Type": "application/json"}), 422
        )["error"]
        == "GraphFormatError"
    )
    assert (
        error_of(
            http.post(
                "/graphs?wait=true", content=b"\x1f\x8b\x08\x00garbage", headers={"Content-Type": "application/gzip"}
            ),
            422,
        )["error"]
        == "GraphFormatError"
    )
    assert (
        error_of(http.post("/graphs", content=b"", headers={"Content-Type": "text/csv"}), 422)["error"] == "EmptyBody"
    )
    assert error_of(http.post("/graphs", content=b"0 1\n", headers={"Content-Type": "image/png"}), 415)
    assert error_of(
        http.post("/graphs", content=b"0 1\n", headers={"Content-Type": "text/csv", "Content-Encoding": "br"}), 415
    )
    for params in ({"format": "xml"}, {"dims": 0}, {"dims": 9}, {"seed": -1}, {"backend": "tpu"}, {"wait": "maybe"}):
        body = error_of(
            http.post("/graphs", params=params, content=b"0 1\n", headers={"Content-Type": "text/csv"}), 422
        )
        assert next(iter(params)) in body["detail"]
    cuda = http.post("/graphs", params={"backend": "cuda"}, content=b"0 1\n", headers={"Content-Type": "text/csv"})
    if not device_present():  # 'cuda' is a valid request only where there is a device
        assert error_of(cuda, 422)["error"] == "BackendUnavailableError"
    else:
        assert cuda.status_code == 202, cuda.text
    big = b"0 1\n" * (13 * 1024 * 1024 // 4)  # 13 MiB, the test server takes 12
    assert (
        error_of(http.post("/graphs", content=big, headers={"Content-Type": "text/plain"}), 413)["error"]
        == "PayloadTooLarge"
    )

    def chunks():  # no Content-Length: the limit is enforced while streaming
        for _ in range(52):
            yield b"0 1\n" * 65536

    assert error_of(http.post("/graphs", content=chunks(), headers={"Content-Type": "text/plain"}), 413)
    leftovers = list((server.data_dir / "uploads").iterdir())
    assert leftovers == [], leftovers
    # 25 MiB of text in a gzip body of a few KiB: the limit on the decompressed graph (24 MiB) stops it.
    bomb = gzip.compress(b"0 1\n" * (25 * 1024 * 1024 // 4))
    assert len(bomb) < 12 * 1024 * 1024
    body = error_of(
        http.post(
            "/graphs",
            params={"wait": "true"},
            content=bomb,
            headers={"Content-Type": "text/csv", "Content-Encoding": "gzip"},
        ),
        413,
    )
    assert body["error"] == "InputTooLargeError" and "decompresses" in body["detail"]


def test_bad_queries(client: GrailClient, kegg: str) -> None:
    http = client.http
    assert (
        error_of(http.get("/graphs/nope/reachable", params={"source": 0, "target": 1}), 404)["error"] == "GraphNotFound"
    )
    assert error_of(http.get("/graphs/nope"), 404)
    assert error_of(http.delete("/graphs/nope"), 404)
    assert error_of(http.post("/graphs/nope/queries", json={"pairs": [[0, 1]]}), 404)
    body = error_of(http.get(f"/graphs/{kegg}/reachable", params={"source": 0, "target": 99999}), 404)
    assert body["error"] == "UnknownNodeError" and "99999" in body["detail"]
    assert (
        "abc" in error_of(http.get(f"/graphs/{kegg}/reachable", params={"source": "abc", "target": 1}), 404)["detail"]
    )
    assert error_of(http.get(f"/graphs/{kegg}/reachable", params={"source": 0}), 422)
    assert error_of(http.get(f"/graphs/{kegg}/reachable", params={"pairs": "1,2;3"}), 422)["error"] == "BadPairs"
    assert error_of(http.get(f"/graphs/{kegg}/reachable", params={"pairs": "1,2", "source": 1}), 422)
    many = ";".join(["1,2"] * 1001)
    assert error_of(http.get(f"/graphs/{kegg}/reachable", params={"pairs": many}), 422)["error"] == "TooManyPairs"
    queries = f"/graphs/{kegg}/queries"
    assert error_of(http.post(queries, content=b"{bad", headers={"Content-Type": "application/json"}), 422)
    assert error_of(http.post(queries, json={"pairs": [[1, 2, 3]]}), 422)["error"] == "BadPairs"
    assert error_of(http.post(queries, json=[[1, 2]]), 422)
    assert error_of(http.post(queries, content=b"1 2\n3\n", headers={"Content-Type": "text/plain"}), 422)
    assert error_of(http.post(queries, content=b"\xff\xfe", headers={"Content-Type": "text/plain"}), 422)
    assert error_of(http.post(queries, content=b"123", headers={"Content-Type": "application/octet-stream"}), 422)
    for width, size in ((16, 6), (32, 12), (64, 24)):  # one and a half pairs
        body = error_of(
            http.post(
                queries, content=bytes(size), headers={"Content-Type": f"application/octet-stream; width={width}"}
            ),
            422,
        )
        assert body["error"] == "BadPairs" and f"width {width}" in body["detail"] and str(size) in body["detail"]
    body = error_of(
        http.post(queries, content=bytes(12), headers={"Content-Type": "application/octet-stream; width=8"}), 415
    )
    assert body["error"] == "UnsupportedPairWidth" and "16, 32 or 64" in body["detail"]
    body = error_of(
        http.post(
            queries,
            content=bytes(16),
            headers={"Content-Type": "application/octet-stream", "Accept": "application/octet-stream; width=4"},
        ),
        406,
    )
    assert body["error"] == "UnsupportedAnswerWidth" and "1 or 8" in body["detail"]
    unknown = np.array([[0, 1], [30000, 2]], dtype="<i2").tobytes()
    body = error_of(
        http.post(queries, content=unknown, headers={"Content-Type": "application/octet-stream; width=16"}), 404
    )
    assert body["error"] == "UnknownNodeError" and body["node"] in (30000, "30000")
    assert body["unknown"] == [{"pair": 1, "end": "source", "name": 30000}] and body["unknown_count"] == 1
    too_big = np.zeros(13 * 1024 * 1024 // 8, dtype="<i8").tobytes()  # 13 MiB, the test server takes 12
    body = error_of(http.post(queries, content=too_big, headers={"Content-Type": "application/octet-stream"}), 413)
    assert body["error"] == "PayloadTooLarge"
    assert error_of(http.post(queries, content=b"1 2", headers={"Content-Type": "image/png"}), 415)
    body = error_of(http.post(queries, json={"pairs": [[1, 2], [3, 123456]]}), 404)  # as on GET
    assert body["node"] in (123456, "123456")


def grail_cli() -> list[str]:
    """The ``grail`` command the install puts beside this Python (the README's), else the module."""
    installed = Path(sys.executable).with_name("grail")
    return [str(installed)] if installed.is_file() else [sys.executable, "-m", "service.cli"]


def test_cli_upload_and_query(server: Server, files: GraphFiles, tmp_path) -> None:
    cli = [*grail_cli(), "--url", server.url]

    def run(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([*cli, *args], cwd=REPO, capture_output=True, input=stdin, timeout=120)

    upload = run("upload", str(files.path("cyclic.gra")), "--name", "cli", "--json")
    assert upload.returncode == 0, upload.stderr
    record = json.loads(upload.stdout)
    assert record["status"] == "ready" and record["name"] == "cli"
    assert b"ready" in upload.stderr  # the progress lines
    query = run("query", record["id"], "-", stdin=files.path("cyclic.que").read_bytes())
    assert query.returncode == 0, query.stderr
    rows = [line.split(b"\t") for line in query.stdout.splitlines()]
    assert rows[0] == [b"source", b"target", b"reachable"]
    expected = [b"true" if line == b"1" else b"false" for line in files.path("cyclic.ans").read_bytes().split()]
    assert [row[2] for row in rows[1:]] == expected
    missing = run("query", "nope", str(files.path("cyclic.que")))
    assert missing.returncode == 3 and b"404" in missing.stderr
    # A malformed graph: the error names the line the server found.
    bad = tmp_path / "bad.gra"
    bad.write_bytes(b"graph_for_greach\n3\n0: 1 #\n1: x #\n2: #\n")
    failed = run("upload", str(bad))
    assert failed.returncode == 4 and b"GraphFormatError" in failed.stderr and b"line 4" in failed.stderr
    listed = run("list", "--status", "failed", "--json")
    assert listed.returncode == 0 and {r["status"] for r in json.loads(listed.stdout)} == {"failed"}
    assert record["id"] not in {r["id"] for r in json.loads(listed.stdout)}


def test_concurrent_queries_during_build(server: Server, big_files: GraphFiles, kegg: str) -> None:
    """Single GETs from 32 async clients stay exact while a large graph builds, and run beside the build's
    compute phases (not only while it saves): the core gate lets them through."""
    files = big_files
    pairs = np.concatenate([files.pairs("dag.pos.que")[:1000], files.pairs("dag.que")[:1000]])
    answers = np.concatenate([files.answers("dag.pos.ans")[:1000], files.answers("dag.ans")[:1000]])

    async def scenario() -> tuple[int, int, list[str]]:
        async with AsyncGrailClient(server.url, timeout=120) as ac:
            record = await ac.upload(files.path("big.gra.gz"), name="big")
            status, phase = record["status"], record["phase"]
            seen = [status]
            wrong = overlapped = 0

            async def worker(start: int) -> None:
                nonlocal wrong, overlapped
                i = start
                while status != "ready":
                    u, v = int(pairs[i][0]), int(pairs[i][1])
                    wrong += await ac.reachable(kegg, u, v) != answers[i]
                    overlapped += status == "building" and phase not in (None, "read", "save")
                    i = (i + 32) % len(pairs)

            async def monitor() -> None:
                nonlocal status, phase
                while status != "ready":
                    current = await ac.get(record["id"])
                    status, phase = current["status"], current["phase"]
                    seen.append(status)
                    assert status != "failed"
                    await asyncio.sleep(0.05)

            await asyncio.gather(monitor(), *(worker(s) for s in range(32)))
            await ac.delete(record["id"])
            return wrong, overlapped, seen

    wrong, overlapped, seen = asyncio.run(scenario())
    assert wrong == 0
    assert seen[-1] == "ready" and "building" in seen
    assert overlapped > 100, f"only {overlapped} queries overlapped the build's compute phases"


def test_delete_while_querying(client: GrailClient, files: GraphFiles, server: Server) -> None:
    graph_id = client.upload(files.path("cyclic.gra"), wait=True)["id"]
    pairs = files.pairs("cyclic.pos.que")
    codes: list[int] = []
    stop = threading.Event()

    def hammer() -> None:
        with GrailClient(server.url) as own:
            while not stop.is_set():
                codes.append(
                    own.http.post(
                        f"/graphs/{graph_id}/queries",
                        content=pairs.astype("<i8").tobytes(),
                        headers={"Content-Type": "application/octet-stream"},
                    ).status_code
                )

    thread = threading.Thread(target=hammer)
    thread.start()
    while not codes:
        pass
    client.delete(graph_id)
    stop.set()
    thread.join()
    assert set(codes) <= {200, 404} and 200 in codes
    assert error_of(client.http.get(f"/graphs/{graph_id}"), 404)
    # Its files go once the grace period (1 s here) has passed: a request holding its version needs none of them.
    wait_until(lambda: not (server.data_dir / "graphs" / graph_id).exists(), timeout=30)


def test_health_metrics_openapi(client: GrailClient, files: GraphFiles, kegg: str) -> None:
    health = client.health()
    assert health["status"] == "ok" and health["backend"] == "cpu" and health["gpu"] is None
    assert health["graphs"]["ready"] >= 1
    client.query_batch(kegg, files.pairs("dag.pos.que")[:100])

    def pairs_counted(metrics: str) -> float:
        return sum(
            float(line.split()[-1]) for line in metrics.splitlines() if line.startswith("grail_query_pairs_total{")
        )

    before = pairs_counted(client.http.get("/metrics").text)
    client.reachable(kegg, 0, 1)
    text = client.http.get("/metrics").text
    assert pairs_counted(text) == before + 1  # a single GET is counted by what decided it too
    assert 'grail_http_requests_total{method="GET",route="/graphs/{graph_id}/reachable",status="200"}' in text
    assert 'grail_graphs{status="ready"}' in text
    assert 'grail_build_duration_seconds_count{result="ready"}' in text
    searched = [line for line in text.splitlines() if line.startswith('grail_query_pairs_total{decided_by="search"}')]
    assert searched and float(searched[0].split()[-1]) > 0
    assert 'status="500"' not in text, "a request ended in a server error"
    spec = client.http.get("/openapi.json").json()
    assert {
        "/graphs",
        "/graphs/{graph_id}",
        "/graphs/{graph_id}/reachable",
        "/graphs/{graph_id}/queries",
        "/health",
        "/ready",
        "/metrics",
    } <= set(spec["paths"])
    batch = spec["paths"]["/graphs/{graph_id}/queries"]["post"]
    assert "width=32" in batch["requestBody"]["content"]["application/octet-stream"]["schema"]["description"]
    assert "width=1" in batch["responses"]["200"]["description"]
    assert {"406", "413", "415", "422"} <= set(batch["responses"])
    # Reads of a graph take min_version and Grail-Min-Version, and say they may answer 503 VersionNotHere.
    for path, method in (("/graphs/{graph_id}/reachable", "get"), ("/graphs/{graph_id}/queries", "post")):
        operation = spec["paths"][path][method]
        taken = {(p["name"], p["in"]) for p in operation["parameters"]}
        assert {("min_version", "query"), ("Grail-Min-Version", "header")} <= taken, path
        assert "VersionNotHere" in operation["responses"]["503"]["description"]
        assert "Retry-After" in operation["responses"]["503"]["headers"]
    edges = spec["paths"]["/graphs/{graph_id}/edges"]["post"]
    assert "min_version" not in {p["name"] for p in edges.get("parameters", [])}, "a write is no read"
    assert client.http.get("/docs").status_code == 200


def test_edge_updates_route(client: GrailClient) -> None:
    """POST /graphs/{id}/edges is a plain route served ahead of FastAPI's: the same conventions, metrics and
    description as every route."""
    http = client.http
    graph_id = client.upload(b"a b\nb c\n", content_type="text/plain", wait=True)["id"]
    edges = f"/graphs/{graph_id}/edges"
    answer = http.post(edges, json={"add": [["c", "d"]], "remove": [["a", "b"]]})
    assert answer.status_code == 200 and answer.headers["grail-graph-version"] == "2" and answer.headers["x-request-id"]
    assert answer.json() == {"version": 2, "added": 1, "removed": 1, "new_nodes": 1, "pending_updates": 1}
    assert client.reachable(graph_id, "b", "d") and not client.reachable(graph_id, "a", "c")
    assert error_of(http.post(edges, params={"wait": "true"}, json={"add": []}), 422)["error"] == "BadParameters"
    assert error_of(http.post(edges, content=b"{", headers={"Content-Type": "application/json"}), 422)["error"] == (
        "InvalidParameter"
    )
    assert error_of(http.post("/graphs/nosuchgraph/edges", json={"add": [["a", "b"]]}), 404)["error"] == "GraphNotFound"
    refused = http.get(edges)
    assert error_of(refused, 405) and refused.headers["allow"] == "POST, OPTIONS"
    assert http.options(edges).headers["allow"] == "POST, OPTIONS"
    assert http.post(edges, json={"add": [["d", "a"]]}, params={"min_version": "2"}).json()["version"] == 3
    text = http.get("/metrics").text
    for status in (200, 404, 405, 422):  # counted by route template, not by path
        method = "GET" if status == 405 else "POST"
        assert (
            f'grail_http_requests_total{{method="{method}",route="/graphs/{{graph_id}}/edges",status="{status}"}}'
            in text
        )
    operation = http.get("/openapi.json").json()["paths"]["/graphs/{graph_id}/edges"]["post"]
    assert [(p["name"], p["in"], p["required"]) for p in operation["parameters"]] == [("graph_id", "path", True)]
    assert operation["requestBody"]["content"]["application/json"]["schema"]["properties"].keys() == {"add", "remove"}
    ok = operation["responses"]["200"]["content"]["application/json"]["schema"]
    assert ok == {"$ref": "#/components/schemas/EdgesOut"}
    assert {"404", "409", "413", "422", "424", "507"} <= set(operation["responses"])


def test_text_answers_by_accept(client: GrailClient, files: GraphFiles, kegg: str) -> None:
    pairs = files.pairs("dag.que")[:500]
    answers = files.answers("dag.ans")[:500]
    body = "".join(f"{u}\t{v}\n" for u, v in pairs).encode()
    response = client.http.post(
        f"/graphs/{kegg}/queries", content=body, headers={"Content-Type": "text/plain", "Accept": "text/plain"}
    )
    assert response.headers["content-type"].startswith("text/plain")
    assert response.text == "".join(f"{int(a)}\n" for a in answers)

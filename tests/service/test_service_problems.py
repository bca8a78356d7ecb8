"""Error answers as RFC 9457 problem details on every route (the framework's own 404, 405 and 422 included), one
status per condition, and ``?unknown=`` on the batch routes: against a real server."""

from __future__ import annotations

import json

import httpx
import pytest

from service.client import GrailClient
from service.errors import ERRORS, KINDS, PROBLEM_JSON

from .conftest import REPO

pytestmark = pytest.mark.timeout(180)

STANDARD = ("type", "title", "status", "detail", "instance")


def problem(response: httpx.Response, status: int, kind: str) -> dict:
    """The answer's problem document, checked against RFC 9457 and the kinds table."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM_JSON
    body = response.json()
    assert all(body.get(member) for member in STANDARD), body
    assert body["status"] == status and body["error"] == kind and body["type"] == f"/problems/{kind}"
    assert body["title"] == KINDS[kind].title and body["instance"] == response.request.url.path
    assert body["request_id"] == response.headers["x-request-id"]
    return body


@pytest.fixture(scope="module")
def graphs(client: GrailClient) -> dict[str, str]:
    ready = client.upload(b"a b\nb c\nc a\nc d\n", content_type="text/plain", wait=True)["id"]
    failed = client.upload(b"graph_for_greach\n2\n0: x #\n1: #\n", content_type="text/x-grail-gra")["id"]
    while client.get(failed)["status"] != "failed":
        pass
    return {"ready": ready, "failed": failed}


def test_every_route_answers_problem_details(client: GrailClient, graphs: dict[str, str]) -> None:
    http = client.http
    ready, failed = graphs["ready"], graphs["failed"]
    cases = [
        (http.get("/no/such/route"), 404, "NotFound"),
        (http.put("/health"), 405, "MethodNotAllowed"),
        (http.post(f"/graphs/{ready}"), 405, "MethodNotAllowed"),
        (http.get("/graphs", params={"status": "bad"}), 422, "InvalidParameter"),
        (http.get("/graphs/nope"), 404, "GraphNotFound"),
        (http.delete("/graphs/nope"), 404, "GraphNotFound"),
        (http.post("/graphs", params={"dims": 0}, content=b"a b\n"), 422, "InvalidParameter"),
        (http.post("/graphs", params={"format": "gra", "source_column": "a"}, content=b"x"), 422, "InvalidParameter"),
        (http.post("/graphs", content=b"a b", headers={"Content-Type": "image/png"}), 415, "UnknownFormat"),
        (http.get(f"/graphs/{ready}/reachable", params={"source": "a"}), 422, "BadParameters"),
        (http.get(f"/graphs/{ready}/reachable", params={"source": "a", "target": "zz"}), 404, "UnknownNodeError"),
        (http.get(f"/graphs/{ready}/reachable", params={"pairs": "a,b;zz"}), 422, "BadPairs"),
        (http.get(f"/graphs/{ready}/reachable", params={"pairs": "a,b", "unknown": "x"}), 422, "BadParameters"),
        (http.post(f"/graphs/{ready}/queries", json={"pairs": [["a", "zz"]]}), 404, "UnknownNodeError"),
        (http.post(f"/graphs/{ready}/queries", params={"unknown": "x"}, json={"pairs": []}), 422, "InvalidParameter"),
        (http.get(f"/graphs/{ready}/path", params={"source": "zz", "target": "a"}), 404, "UnknownNodeError"),
        (http.get(f"/graphs/{ready}/descendants", params={"node": "zz"}), 404, "UnknownNodeError"),
        (http.get(f"/graphs/{ready}/ancestors"), 422, "InvalidParameter"),
        (http.post(f"/graphs/{ready}/edges", json={"remove": [["a", "zz"]]}), 404, "UnknownNodeError"),
        (http.post(f"/graphs/{ready}/edges", json={"added": [["a", "b"]]}), 422, "InvalidParameter"),
        (http.get(f"/graphs/{failed}/reachable", params={"source": "0", "target": "1"}), 424, "GraphFailed"),
        (http.post(f"/graphs/{failed}/queries", json={"pairs": [[0, 1]]}), 424, "GraphFailed"),
        (http.get(f"/graphs/{failed}/path", params={"source": 0, "target": 1}), 424, "GraphFailed"),
        (http.post(f"/graphs/{failed}/edges", json={"add": [[0, 1]]}), 424, "GraphFailed"),
        (http.get("/problems/NoSuchKind"), 404, "ProblemNotFound"),
        # A parameter the route does not take, or a single one given twice: refused, never ignored.
        (
            http.get(f"/graphs/{ready}/reachable", params={"source": "a", "target": "b", "unknwon": "x"}),
            422,
            "BadParameters",
        ),
        (http.get(f"/graphs/{ready}", params={"verbose": "1"}), 422, "BadParameters"),
        (http.post("/graphs", params=[("name", "a"), ("name", "b")], content=b"a b\n"), 422, "BadParameters"),
        (http.post(f"/graphs/{ready}/queries", params={"unkown": "null"}, json={"pairs": []}), 422, "BadParameters"),
    ]
    for response, status, kind in cases:
        problem(response, status, kind)
    # A parameter that takes several values may be repeated.
    assert http.get("/graphs", params=[("status", "ready"), ("status", "failed")]).status_code == 200
    # The failed graph's answer carries its build's error, with the line.
    build = problem(http.get(f"/graphs/{failed}/descendants", params={"node": 0}), 424, "GraphFailed")["build"]
    assert build["type"] == "GraphFormatError" and build["line"] == 3


def test_asking_for_problem_details_is_never_a_406(client: GrailClient, graphs: dict[str, str]) -> None:
    http = client.http
    ready = graphs["ready"]
    accept = {"Accept": PROBLEM_JSON}
    assert http.get(f"/graphs/{ready}", headers=accept).json()["id"] == ready
    assert http.get("/graphs", headers=accept).status_code == 200
    answer = http.get(f"/graphs/{ready}/reachable", params={"source": "a", "target": "d"}, headers=accept)
    assert answer.json()["reachable"] is True
    batch = http.post(f"/graphs/{ready}/queries", json={"pairs": [["d", "a"]]}, headers=accept)
    assert batch.json()["reachable"] == [False]
    problem(http.get("/graphs/nope", headers=accept), 404, "GraphNotFound")
    problem(http.get(f"/graphs/{ready}", headers={"Accept": "image/png"}), 406, "NotAcceptable")


def test_unknown_names_in_batches(client: GrailClient, graphs: dict[str, str]) -> None:
    http = client.http
    ready = graphs["ready"]
    queries = f"/graphs/{ready}/queries"
    pairs = [["a", "d"], ["zz", "a"], ["d", "a"], ["a", "yy"], ["xx", "ww"]]
    # error (the default): every unknown name listed with its pair and end, in order.
    body = problem(http.post(queries, json={"pairs": pairs}), 404, "UnknownNodeError")
    assert body["unknown_count"] == 4 and body["node"] == "zz"
    assert body["unknown"] == [
        {"pair": 1, "end": "source", "name": "zz"},
        {"pair": 3, "end": "target", "name": "yy"},
        {"pair": 4, "end": "source", "name": "xx"},
        {"pair": 4, "end": "target", "name": "ww"},
    ]
    # Listed up to a limit, counted in all.
    many = [["a", f"n{i}"] for i in range(250)]
    body = problem(http.post(queries, json={"pairs": many}), 404, "UnknownNodeError")
    assert body["unknown_count"] == 250 and len(body["unknown"]) == 100 and body["unknown"][99]["pair"] == 99
    text = "".join(f"{u} {v}\n" for u, v in pairs).encode()
    for unknown, expected in (("false", [True, False, False, False, False]), ("null", [True, None, False, None, None])):
        answer = http.post(queries, params={"unknown": unknown}, json={"pairs": pairs})
        assert answer.json()["reachable"] == expected and answer.json()["stats"]["unknown_pairs"] == 3
        lines = http.post(
            queries,
            params={"unknown": unknown},
            content=text,
            headers={"Content-Type": "text/plain", "Accept": "text/plain"},
        ).text.split()
        assert lines == [{True: "1", False: "0", None: "null"}[a] for a in expected]
        few = ";".join(f"{u},{v}" for u, v in pairs)
        got = http.get(f"/graphs/{ready}/reachable", params={"pairs": few, "unknown": unknown}).json()["reachable"]
        assert got == expected
        one = http.get(f"/graphs/{ready}/reachable", params={"source": "zz", "target": "a", "unknown": unknown})
        assert one.json()["reachable"] is (None if unknown == "null" else False)
    # Binary answers have no null: 406 before the body is read; with unknown=false they are plain bits.
    binary = {"Accept": "application/octet-stream"}
    problem(http.post(queries, params={"unknown": "null"}, content=text, headers=binary), 406, "NotAcceptable")
    bits = http.post(
        queries, params={"unknown": "false"}, content=text, headers={**binary, "Content-Type": "text/plain"}
    )
    assert list(bits.content) == [1, 0, 0, 0, 0]


def test_problem_types_are_served_and_documented(client: GrailClient) -> None:
    listed = client.http.get("/problems").json()["problems"]
    assert [p["error"] for p in listed] == [kind.name for kind in ERRORS]
    assert len({kind.name for kind in ERRORS}) == len(ERRORS)  # one status per kind
    one = client.http.get("/problems/GraphFailed").json()
    assert one == {
        "type": "/problems/GraphFailed",
        "error": "GraphFailed",
        "title": KINDS["GraphFailed"].title,
        "status": 424,
    }
    docs = (REPO / "docs" / "errors.md").read_text()
    for kind in ERRORS:
        assert f"| `{kind.name}` | {kind.status} |" in docs, kind.name


def test_the_document_describes_problem_details(client: GrailClient) -> None:
    schema = client.http.get("/openapi.json").json()
    for path, operations in schema["paths"].items():
        for operation in operations.values():
            for status, response in operation["responses"].items():
                if status.startswith(("4", "5")) and (path, status) != ("/ready", "503"):
                    assert list(response["content"]) == [PROBLEM_JSON], (path, status)


def test_the_documents_upload_examples_build(client: GrailClient) -> None:
    """Every example body the document gives an upload (what Swagger UI sends when tried) builds a ready graph."""
    content = client.http.get("/openapi.json").json()["paths"]["/graphs"]["post"]["requestBody"]["content"]
    examples = {media: body["schema"]["example"] for media, body in content.items() if "example" in body["schema"]}
    assert "text/plain" in examples and "text/x-grail-gra" in examples and "application/json" in examples
    for media, example in examples.items():
        data = json.dumps(example).encode() if media == "application/json" else example.encode()
        answer = client.http.post("/graphs", params={"wait": "true"}, content=data, headers={"Content-Type": media})
        assert answer.status_code == 201 and answer.json()["stats"]["edges"] >= 2, (media, answer.text)

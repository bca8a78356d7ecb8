"""Edge updates over HTTP on a real server: every query after the answer exact for the updated graph, the
version in the answers and the record, the background rebuild folding the updates in, nothing lost to a
SIGKILL, errors in the service's shape."""

from __future__ import annotations

import itertools
import time

import httpx
import numpy as np
import pytest

from service.client import GrailClient
from service.routers.queries import VERSION_HEADER
from tests.reference import reachability_matrix

from .conftest import Server

pytestmark = pytest.mark.timeout(240)

START = [("a", "b"), ("b", "c"), ("c", "a"), ("c", "d"), ("d", "e"), ("x", "y"), ("y", "y")]
# Each step: (add, remove); names beyond the upload's are new nodes.
STEPS = [
    ([["e", "a"]], []),
    ([], [["c", "a"]]),
    ([["y", "new1"], ["new1", "b"]], [["d", "e"]]),
    ([["e", "x"]], [["a", "b"], ["y", "new1"]]),
    ([["new1", "e"], ["d", "e"]], []),
]


def upload(client: GrailClient) -> str:
    text = "".join(f"{u} {v}\n" for u, v in START).encode()
    return str(client.upload(text, format="edgelist", wait=True)["id"])


def check_exact(http: httpx.Client, graph_id: str, edges: set[tuple[str, str]], version: int) -> None:
    """Every pair, a path for each reachable one, and the listings, against brute force on ``edges``."""
    nodes = sorted({node for edge in edges for node in edge} | {n for e in START for n in e})
    position = {node: i for i, node in enumerate(nodes)}
    truth = reachability_matrix(len(nodes), [(position[u], position[v]) for u, v in edges])
    pairs = [[u, v] for u, v in itertools.product(nodes, repeat=2)]
    response = http.post(f"/graphs/{graph_id}/queries", json={"pairs": pairs})
    assert response.status_code == 200, response.text
    assert int(response.headers[VERSION_HEADER]) == version
    assert response.json()["reachable"] == truth.ravel().tolist()
    for u, v in pairs[::3]:
        got = http.get(f"/graphs/{graph_id}/path", params={"source": u, "target": v})
        path = got.json()["path"]
        if u == v:
            assert path == [u]
        elif not truth[position[u], position[v]]:
            assert path is None
        else:
            assert path[0] == u and path[-1] == v and all(edge in edges for edge in itertools.pairwise(path))
    np.fill_diagonal(truth, False)
    for node in nodes:
        below = http.get(f"/graphs/{graph_id}/descendants", params={"node": node}).json()["nodes"]
        assert sorted(below) == [nodes[i] for i in np.flatnonzero(truth[position[node]])]


def apply(edges: set[tuple[str, str]], add: list[list[str]], remove: list[list[str]]) -> None:
    edges |= {(u, v) for u, v in add if u != v}
    edges -= {(u, v) for u, v in remove}


def wait_for_rebuild(client: GrailClient, graph_id: str, timeout: float = 120.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        record = client.get(graph_id)
        if record["pending_updates"]["updates"] == 0 and record["rebuild"] is None:
            return record
        assert time.monotonic() < deadline, record
        time.sleep(0.1)


def test_updates_are_exact_at_once_and_rebuilt_in_the_background(client: GrailClient) -> None:
    graph_id = upload(client)
    http = client.http
    edges = {(u, v) for u, v in START if u != v}
    first = client.get(graph_id)
    assert first["version"] == 1 and first["checksum"].startswith("sha256:")
    version = 1
    for add, remove in STEPS:
        response = http.post(f"/graphs/{graph_id}/edges", json={"add": add, "remove": remove})
        assert response.status_code == 200, response.text
        version += 1
        assert response.json()["version"] == version and int(response.headers[VERSION_HEADER]) == version
        apply(edges, add, remove)
        check_exact(http, graph_id, edges, version)
    record = wait_for_rebuild(client, graph_id)
    assert record["version"] == version and record["checksum"] != first["checksum"]
    assert record["stats"]["edges"] == len(edges)
    check_exact(http, graph_id, edges, version)


def test_nothing_is_lost_to_a_sigkill(fresh_server: Server) -> None:
    server = fresh_server.start()
    with server.client() as client:
        graph_id = upload(client)
        edges = {(u, v) for u, v in START if u != v}
        for i, (add, remove) in enumerate(STEPS * 4):
            add = [[u, f"{v}{i}"] if v.startswith("new") else [u, v] for u, v in add]
            assert client.update_edges(graph_id, add=add, remove=remove)["version"] == i + 2
            apply(edges, add, remove)
        version = 1 + 4 * len(STEPS)
    server.kill()  # maybe while a rebuild runs: the journal holds every answered update
    server.start()
    with server.client() as client:
        record = client.wait_until_ready(graph_id, timeout=60)
        assert record["version"] == version
        check_exact(client.http, graph_id, edges, version)
        assert wait_for_rebuild(client, graph_id)["version"] == version


def test_update_errors_change_nothing(client: GrailClient) -> None:
    graph_id = upload(client)
    cases = [
        ({"remove": [["a", "nowhere"]]}, 422, "UnknownNodeError"),
        ({"add": [["a", "c"]], "remove": [["a", "c"]]}, 422, "InvalidParameterError"),
        ({"add": [["a", "b", "c"]]}, 422, "InvalidParameter"),
        ({"add": "a b"}, 422, "InvalidParameter"),
    ]
    for body, status, kind in cases:
        response = client.http.post(f"/graphs/{graph_id}/edges", json=body)
        assert response.status_code == status, (body, response.text)
        assert response.json()["error"] == kind and response.json()["detail"]
    assert client.get(graph_id)["version"] == 1
    missing = client.http.post("/graphs/no-such-graph/edges", json={"add": [["a", "b"]]})
    assert missing.status_code == 404 and missing.json()["error"] == "GraphNotFound"

"""Paths, descendants, ancestors and edge updates over HTTP on real servers (one module: one server).

Every path checked edge by edge and against BFS, listings and counts against brute force, pages, a listing
streamed over several slices; updates exact for every query after the answer, the version in the answers and
the record, the background rebuild folding them in, nothing lost to a SIGKILL; errors in the service's shape."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from service.client import GrailClient
from service.routers.queries import VERSION_HEADER
from service.routers.reach import LISTING_SLICE
from tests.reference import bfs_distances, named_reachability, reachability_matrix

from .conftest import Server, publish_in_process

pytestmark = pytest.mark.timeout(240)

# Two cycles joined by a tail, a self loop, a duplicate edge, an isolated node; names as a user writes them.
NAMES = ["a", "b", "c", "d", "e", "f", "g", "h", "zürich", "9", "東京"]
EDGES = [(0, 1), (1, 2), (2, 0), (2, 3), (3, 4), (4, 5), (5, 3), (5, 6), (1, 6), (6, 6), (3, 4), (7, 8), (8, 9)]


@pytest.fixture(scope="module")
def named(client: GrailClient) -> str:
    lines = [f"{NAMES[u]}\t{NAMES[v]}" for u, v in EDGES] + [f"{NAMES[10]}\t{NAMES[10]}"]
    record = client.upload("\n".join(lines).encode(), content_type="text/tab-separated-values", wait=True)
    return str(record["id"])


def get(client: GrailClient, url: str, **params: object) -> httpx.Response:
    return client.http.get(url, params=params)


def test_paths_are_shortest_walks_of_the_upload(client: GrailClient, named: str) -> None:
    n = len(NAMES)
    edges = set(EDGES)
    for s, t in itertools.product(range(n), repeat=2):
        response = get(client, f"/graphs/{named}/path", source=NAMES[s], target=NAMES[t])
        assert response.status_code == 200, response.text
        assert int(response.headers[VERSION_HEADER]) == 1
        body = response.json()
        assert (body["source"], body["target"]) == (NAMES[s], NAMES[t])
        distance = bfs_distances(n, EDGES, s)[t]
        if distance < 0:
            assert body["path"] is None
            continue
        ids = [NAMES.index(name) for name in body["path"]]
        assert ids[0] == s and ids[-1] == t and len(ids) - 1 == distance
        assert all(edge in edges for edge in itertools.pairwise(ids))


def test_listings_and_counts_match_brute_force(client: GrailClient, named: str) -> None:
    n = len(NAMES)
    truth = reachability_matrix(n, EDGES)
    np.fill_diagonal(truth, False)
    for node in range(n):
        for kind, row in (("descendants", truth[node]), ("ancestors", truth[:, node])):
            expected = [NAMES[i] for i in np.flatnonzero(row)]
            response = get(client, f"/graphs/{named}/{kind}", node=NAMES[node])
            assert response.status_code == 200 and VERSION_HEADER in response.headers
            assert response.json() == {"node": NAMES[node], "count": len(expected), "offset": 0, "nodes": expected}
            page = get(client, f"/graphs/{named}/{kind}", node=NAMES[node], offset=1, limit=2).json()
            assert page["nodes"] == expected[1:3] and page["count"] == len(expected)
            counted = get(client, f"/graphs/{named}/{kind}", node=NAMES[node], count="true").json()
            assert counted["count"] == len(expected) and counted["method"] in ("labels", "traversal")
            assert "nodes" not in counted


def test_integer_names_and_a_listing_over_several_slices(client: GrailClient) -> None:
    # A hub reaching more nodes than one slice holds, on sparse integer names (written back as numbers).
    size = LISTING_SLICE + 1000
    leaves = np.arange(size, dtype=np.int64) * 3 + 7
    text = "".join(f"-5 {leaf}\n" for leaf in leaves.tolist()) + f"{leaves[0]} -5\n"
    record = client.upload(text.encode(), format="edgelist", wait=True)
    url = f"/graphs/{record['id']}"
    everything = get(client, f"{url}/descendants", node=-5).json()
    assert everything["count"] == size and everything["nodes"] == leaves.tolist()
    page = get(client, f"{url}/descendants", node="-5", offset=LISTING_SLICE - 2, limit=5).json()
    assert page["nodes"] == leaves[LISTING_SLICE - 2 : LISTING_SLICE + 3].tolist() and page["node"] == -5
    past_the_end = get(client, f"{url}/descendants", node=-5, offset=size + 3).json()
    assert past_the_end["nodes"] == [] and past_the_end["count"] == size
    assert get(client, f"{url}/ancestors", node=int(leaves[1])).json()["nodes"] == [-5, int(leaves[0])]
    assert get(client, f"{url}/path", source=int(leaves[3]), target=int(leaves[0])).json()["path"] is None
    assert client.path(record["id"], int(leaves[0]), int(leaves[9])) == [int(leaves[0]), -5, int(leaves[9])]
    above = client.descendants(record["id"], int(leaves[2]), ancestors=True, offset=1, limit=1)
    assert above == {"node": int(leaves[2]), "count": 2, "offset": 1, "nodes": [int(leaves[0])]}
    # HEAD checks the node and lists nothing.
    head = client.http.head(f"{url}/descendants", params={"node": -5})
    assert head.status_code == 200 and head.content == b"" and int(head.headers[VERSION_HEADER]) == 1
    assert client.http.head(f"{url}/ancestors", params={"node": 4}).status_code == 404


def test_errors_in_the_service_shape(client: GrailClient, named: str) -> None:
    cases = [
        (f"/graphs/{named}/path", {"source": "a", "target": "nowhere"}, 404, "UnknownNodeError"),
        (f"/graphs/{named}/path", {"source": "a"}, 422, "InvalidParameter"),
        (f"/graphs/{named}/descendants", {"node": "nowhere"}, 404, "UnknownNodeError"),
        (f"/graphs/{named}/ancestors", {}, 422, "InvalidParameter"),
        (f"/graphs/{named}/descendants", {"node": "a", "offset": -1}, 422, "InvalidParameter"),
        (f"/graphs/{named}/descendants", {"node": "a", "limit": "many"}, 422, "InvalidParameter"),
        ("/graphs/no-such-graph/path", {"source": "a", "target": "b"}, 404, "GraphNotFound"),
    ]
    for url, params, status, kind in cases:
        response = client.http.get(url, params=params)
        assert response.status_code == status, (url, params, response.text)
        body = response.json()
        assert body["error"] == kind and body["detail"], body
    assert client.http.get(f"/graphs/{named}/path", params={"source": "a", "target": "nowhere"}).json()["node"] == (
        "nowhere"
    )


# ---- edge updates ----------------------------------------------------------------------------------------

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
    truth = named_reachability(nodes, edges)
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


def test_update_errors_change_nothing(client: GrailClient) -> None:
    graph_id = upload(client)
    cases = [
        ({"remove": [["a", "nowhere"]]}, 404, "UnknownNodeError"),
        ({"add": [["a", "c"]], "remove": [["a", "c"]]}, 409, "UpdateConflictError"),
        ({"add": [[True, "c"]]}, 422, "InvalidParameter"),
        ({"add": [[5.0, "c"]]}, 422, "InvalidParameter"),
        ({"add": [[1e3, "c"]]}, 422, "InvalidParameter"),
        ({"added": [["a", "c"]]}, 422, "InvalidParameter"),
        ({"add": [["a", "c"]], "extra": 1}, 422, "InvalidParameter"),
        ({"add": [["a", "n" * 5000]]}, 422, "InvalidParameter"),
        ({"add": [["a", "b", "c"]]}, 422, "InvalidParameter"),
        ({"add": "a b"}, 422, "InvalidParameter"),
        ("{not json", 422, "InvalidParameter"),
    ]
    for body, status, kind in cases:
        content = body if isinstance(body, str) else json.dumps(body)
        response = client.http.post(
            f"/graphs/{graph_id}/edges", content=content, headers={"Content-Type": "application/json"}
        )
        assert response.status_code == status, (body, response.text)
        assert response.json()["error"] == kind and response.json()["detail"]
    assert client.get(graph_id)["version"] == 1
    missing = client.http.post("/graphs/no-such-graph/edges", json={"add": [["a", "b"]]})
    assert missing.status_code == 404 and missing.json()["error"] == "GraphNotFound"


def test_every_answer_holds_for_the_version_in_its_header(tmp_path: Path) -> None:
    """Edge b -> c added and removed again and again while other clients ask every kind of question: each answer
    is the truth of the version its header names (b -> c is there in the even versions). The server process
    switches threads every microsecond (a sitecustomize on its path; not its build workers), so that a route
    that reads one version for its header and computes from another is likely caught."""
    site = tmp_path / "site"
    site.mkdir()
    switch = 'import sys\n\nif "service.main" in sys.orig_argv:\n    sys.setswitchinterval(1e-6)\n'
    (site / "sitecustomize.py").write_text(switch)
    path = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    server = Server(tmp_path / "data", tmp_path / "server.log", env={**os.environ, "PYTHONPATH": path}).start()
    try:
        with server.client() as client:
            graph_id = client.upload(b"a b\nc c\n", wait=True)["id"]
        base = f"{server.url}/graphs/{graph_id}"
        kinds: dict[str, tuple[Callable[[httpx.Client], httpx.Response], Callable[[dict], object]]] = {
            "path": (lambda http: http.get(f"{base}/path?source=a&target=c"), lambda body: body["path"] is not None),
            "count": (lambda http: http.get(f"{base}/descendants?node=a&count=true"), lambda body: body["count"] == 2),
            "listing": (lambda http: http.get(f"{base}/ancestors?node=c"), lambda body: body["nodes"] == ["a", "b"]),
            "pair": (lambda http: http.get(f"{base}/reachable?source=a&target=c"), lambda body: body["reachable"]),
            "batch": (
                lambda http: http.post(f"{base}/queries", json={"pairs": [["a", "c"], ["b", "c"]]}),
                lambda body: body["reachable"] == [True, True],
            ),
        }
        seen: dict[str, set[tuple[int, bool]]] = {kind: set() for kind in kinds}
        failures: list[str] = []
        done = threading.Event()

        def ask(kind: str) -> None:
            request, holds = kinds[kind]
            with httpx.Client(timeout=60) as http:
                while not done.is_set():
                    response = request(http)
                    if response.status_code != 200:
                        failures.append(f"{kind}: {response.status_code} {response.text}")
                        return
                    version = int(response.headers[VERSION_HEADER])
                    seen[kind].add((version, bool(holds(response.json()))))

        askers = [threading.Thread(target=ask, args=(kind,)) for kind in kinds for _ in range(2)]
        for thread in askers:
            thread.start()
        try:
            with httpx.Client(timeout=60) as http:
                for i in range(120):
                    body = {"add": [["b", "c"]]} if i % 2 == 0 else {"remove": [["b", "c"]]}
                    response = http.post(f"{base}/edges", json=body)
                    assert response.status_code == 200 and response.json()["version"] == i + 2, response.text
        finally:
            done.set()
            for thread in askers:
                thread.join()
        assert not failures, failures
        for kind, answers in seen.items():
            wrong = sorted((version, holds) for version, holds in answers if holds != (version % 2 == 0))
            assert not wrong, f"{kind}: answers that do not hold for the version in their header: {wrong[:5]}"
            assert {version % 2 for version, _ in answers} == {0, 1}, f"{kind} saw one kind of version only"
    finally:
        server.stop()


def test_nothing_is_lost_to_a_sigkill(server: Server) -> None:
    # The module's last test: it kills the module's server and starts it again on the same data.
    with server.client() as client:
        graph_id = upload(client)
        edges = {(u, v) for u, v in START if u != v}
        for i, (add, remove) in enumerate(STEPS * 2):
            add = [[u, f"{v}{i}"] if v.startswith("new") else [u, v] for u, v in add]
            assert client.update_edges(graph_id, add=add, remove=remove)["version"] == i + 2
            apply(edges, add, remove)
        version = 1 + 2 * len(STEPS)
    server.kill()  # maybe while a rebuild runs: the journal holds every answered update
    server.start()
    with server.client() as client:
        record = client.wait_until_ready(graph_id, timeout=180)  # a hang guard: a restart may rebuild
        assert record["version"] == version
        check_exact(client.http, graph_id, edges, version)
        assert wait_for_rebuild(client, graph_id)["version"] == version


def test_an_update_landing_inside_a_request_changes_nothing_it_answers(tmp_path: Path) -> None:
    """The adversary of the race above, made certain: in process, the moment a route's first call into
    grail_core returns, an update lands (edge b -> c added, then removed); every answer must still hold for the
    version in its header. A route that read the graph twice (a version for its header, then the graph again
    to compute) would answer for the new version under the old number."""
    import asyncio
    import sys
    from types import SimpleNamespace

    from service.registry import GraphRegistry
    from service.routers import reach
    from service.state import open_artifacts, open_metadata

    metadata, artifacts = open_metadata(None, tmp_path / "data"), open_artifacts(None, tmp_path / "data")
    registry = GraphRegistry(metadata, artifacts)
    registry.start()
    graph_id = "aaaaaaaaaaaa"
    publish_in_process(registry, tmp_path, graph_id, "race", b"a b\nc c\n")
    state = SimpleNamespace(
        registry=registry, core_gate=contextlib.nullcontext(), settings=SimpleNamespace(send_timeout=30.0)
    )
    updating = threading.local()

    def update() -> None:
        edge = [["b", "c"]]
        if registry.ready_version(graph_id).number % 2:
            registry.update(graph_id, add=edge, remove=[])
        else:
            registry.update(graph_id, add=[], remove=edge)

    def hook(frame: Any, event: str, arg: Any) -> None:
        # A return from grail_core into a route's code: the graph moves on right there.
        caller = frame.f_back
        if event != "return" or getattr(updating, "busy", False) or caller is None:
            return
        if "grail_core" in frame.f_code.co_filename and "routers" in caller.f_code.co_filename:
            updating.busy = True
            try:
                update()
            finally:
                updating.busy = False

    routes = {route.path.rsplit("/", 1)[-1]: route.endpoint for route in reach.router.routes}  # type: ignore[attr-defined]

    async def answers() -> list[tuple[str, int, bool]]:
        found = []
        for _ in range(3):
            response = await routes["path"](graph_id, state, "a", "c")
            found.append(("path", int(response.headers[VERSION_HEADER]), json.loads(response.body)["path"] is not None))
            response = await routes["descendants"](graph_id, state, "a", 0, None, True)
            found.append(("count", int(response.headers[VERSION_HEADER]), json.loads(response.body)["count"] == 2))
            response = await routes["ancestors"](graph_id, state, "c", 0, None, False)
            body = b"".join([chunk async for chunk in response.body_iterator])
            found.append(("listing", int(response.headers[VERSION_HEADER]), json.loads(body)["nodes"] == ["a", "b"]))
        return found

    threading.setprofile(hook)
    sys.setprofile(hook)
    try:
        found = asyncio.run(answers())
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
    assert registry.ready_version(graph_id).number > 9  # the adversary struck inside every request
    metadata.close()
    wrong = [(kind, version) for kind, version, holds in found if holds != (version % 2 == 0)]
    assert not wrong, f"answers that do not hold for the version in their header: {wrong}"
    assert {version % 2 for _, version, _ in found} == {0, 1}

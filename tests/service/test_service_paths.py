"""Paths, descendants and ancestors over HTTP on a real server: every path checked edge by edge and against
BFS, listings and counts against brute force, pages, a listing streamed over several slices, errors."""

from __future__ import annotations

import itertools

import httpx
import numpy as np
import pytest

from service.client import GrailClient
from service.routers.queries import VERSION_HEADER
from service.routers.reach import LISTING_SLICE
from tests.reference import bfs_distances, reachability_matrix

pytestmark = pytest.mark.timeout(180)

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


def test_errors_in_the_service_shape(client: GrailClient, named: str) -> None:
    cases = [
        (f"/graphs/{named}/path", {"source": "a", "target": "nowhere"}, 404, "UnknownNodeError"),
        (f"/graphs/{named}/path", {"source": "a"}, 422, "BadParameters"),
        (f"/graphs/{named}/descendants", {"node": "nowhere"}, 404, "UnknownNodeError"),
        (f"/graphs/{named}/ancestors", {}, 422, "BadParameters"),
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

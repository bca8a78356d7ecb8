"""Graph names on a real server: unique, taken by every route as well as the id; PUT /graphs/{name} (the
client's replace=True, the CLI's --replace) swaps a new graph in under the name once it is built, queries by
the name answering the old one until then, and a failed build leaves the old one in place."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from grail_core import ReachabilityIndex
from service.client import GrailClient
from service.errors import ServiceError
from service.exceptions import BuildFailedError, InvalidRequestError, NameTakenError
from service.options import UploadOptions
from service.registry import GraphRegistry
from service.state import open_artifacts, open_metadata
from service.state.errors import GraphNotFound

from .conftest import Server, wait_until
from .test_service_cli import run

pytestmark = pytest.mark.timeout(240)


def test_names_are_unique_and_taken_by_every_route(client: GrailClient) -> None:
    record = client.upload(b"a b\nb c\n", name="deps-1.0_x", wait=True)
    assert record["name"] == "deps-1.0_x"
    assert client.get("deps-1.0_x")["id"] == record["id"]
    assert client.reachable("deps-1.0_x", "a", "c") and not client.reachable(record["id"], "c", "a")
    assert client.update_edges("deps-1.0_x", add=[["c", "a"]])["version"] == 2
    assert client.reachable("deps-1.0_x", "c", "b")
    with pytest.raises(NameTakenError):
        client.upload(b"x y\n", name="deps-1.0_x")
    with pytest.raises(InvalidRequestError):
        client.upload(b"x y\n", name="no spaces")
    # An id is no other graph's name: a name that is an id is refused.
    with pytest.raises(NameTakenError):
        client.upload(b"x y\n", name=record["id"])
    client.delete("deps-1.0_x")
    assert client.http.get(f"/graphs/{record['id']}").status_code == 404
    assert client.upload(b"x y\n", name="deps-1.0_x", wait=True)["id"] != record["id"]  # the name is free again


def test_put_replaces_a_graph_under_its_name_once_built(client: GrailClient) -> None:
    old = client.upload(b"a b\n", name="nightly", wait=True)
    new = client.upload(b"a b\nb c\n", name="nightly", replace=True)
    assert new["id"] != old["id"] and new["replaces"] == "nightly"
    # Until the new one is built, the name is the old graph's.
    ask = {"source": "a", "target": "c", "unknown": "false"}
    while client.get(new["id"])["status"] != "ready":
        answer = client.http.get("/graphs/nightly/reachable", params=ask)
        assert answer.status_code == 200
        if answer.json()["reachable"]:
            break  # the swap came between the two requests
        assert client.get("nightly")["id"] in (old["id"], new["id"])
    client.wait_until_ready(new["id"], timeout=120)
    assert client.get("nightly")["id"] == new["id"] and client.get(new["id"])["replaces"] is None
    assert client.reachable("nightly", "a", "c")
    assert client.http.get(f"/graphs/{old['id']}").status_code == 404  # deleted in the swap
    assert [r["id"] for r in client.list() if r["name"] == "nightly"] == [new["id"]]

    # A build that fails leaves the graph under the name in place.
    failed = client.upload(b'{"edges": 5}', name="nightly", replace=True, content_type="application/json")
    with pytest.raises(BuildFailedError):
        client.wait_until_ready(failed["id"], timeout=120)
    assert client.get("nightly")["id"] == new["id"] and client.reachable("nightly", "a", "c")

    # A name no graph holds is simply taken.
    fresh = client.upload(b"p q\n", name="brand-new", replace=True, wait=True)
    assert client.get("brand-new")["id"] == fresh["id"]


def test_cli_uploads_with_a_name_and_replaces(server: Server, tmp_path_factory: pytest.TempPathFactory) -> None:
    folder = tmp_path_factory.mktemp("names")
    first, second = folder / "first.csv", folder / "second.csv"
    first.write_text("source,target\na,b\nc,c\n")
    second.write_text("source,target\na,b\nb,c\n")
    done = run(server, "upload", str(first), "--name", "cli-deps", "--json")
    assert done.returncode == 0, done.stderr
    assert run(server, "reachable", "cli-deps", "a", "c").returncode == 1  # no
    done = run(server, "upload", str(second), "--name", "cli-deps", "--replace", "--json")
    assert done.returncode == 0, done.stderr
    with httpx.Client(base_url=server.url) as http:
        assert http.get("/graphs/cli-deps").json()["name"] == "cli-deps"
    assert run(server, "reachable", "cli-deps", "a", "c").returncode == 0  # yes, from the new graph
    refused = run(server, "upload", str(first), "--replace")
    assert refused.returncode == 2 and "--replace needs --name" in refused.stderr


def test_updates_racing_a_delete_answer_404_never_500(client: GrailClient, server: Server) -> None:
    """Edge updates sent while their graph is deleted: each is answered 200 (journaled before the delete) or
    404 (the delete came first), never a 500, and no answer holds a path of the server's."""
    statuses: set[int] = set()
    for round_number in range(8):
        graph_id = client.upload(b"0 1\n1 2\n", wait=True)["id"]
        answers: list[httpx.Response] = []

        def updates(graph_id: str = graph_id, answers: list[httpx.Response] = answers) -> None:
            with httpx.Client(base_url=server.url, timeout=60) as http:
                for k in range(15):
                    answers.append(http.post(f"/graphs/{graph_id}/edges", json={"add": [[2, 3 + k]]}))

        thread = threading.Thread(target=updates)
        thread.start()
        wait_until(lambda answers=answers, r=round_number: len(answers) >= r)
        client.delete(graph_id)
        thread.join()
        for answer in answers:
            assert answer.status_code in (200, 404), answer.text
            assert str(server.data_dir) not in answer.text and "/tmp" not in answer.text
            statuses.add(answer.status_code)
        assert client.http.get(f"/graphs/{graph_id}").status_code == 404
    assert statuses == {200, 404}


class _Probed:
    """A store whose every call is followed by ``probe``: what a request arriving right then would see."""

    def __init__(self, inner: Any, probe: Callable[[str], None]) -> None:
        self._inner, self._probe = inner, probe

    def __getattr__(self, attribute: str) -> Any:
        found = getattr(self._inner, attribute)
        if not callable(found):
            return found

        def call(*args: Any, **kwargs: Any) -> Any:
            result = found(*args, **kwargs)
            self._probe(attribute)
            return result

        return call


def test_a_replacement_swaps_in_with_no_moment_the_name_cannot_answer(tmp_path: Path) -> None:
    """The swap of a name, made certain: in process, after every call the registry makes into its stores while
    it publishes a replacement (and while a second registry on the same store follows it), the name answers
    from the old graph or the new one, never 409, and a graph whose record says ready answers by its id."""
    metadata, artifacts = open_metadata(None, tmp_path / "data"), open_artifacts(None, tmp_path / "data")
    registry = GraphRegistry(metadata, artifacts)
    registry.start()

    def build(graph_id: str, edges: bytes, replace: bool) -> Path:
        artifacts.put_upload(graph_id, [edges])
        registry.add(
            graph_id,
            UploadOptions(backend="cpu"),
            name="nightly",
            replace=replace,
            upload_key=graph_id,
            upload_bytes=len(edges),
            memory_bytes=0,
            request_id="-",
        )
        folder = tmp_path / graph_id
        ReachabilityIndex.from_bytes(edges, backend="cpu").save(folder)
        return folder

    old, new = "aaaaaaaaaaaa", "bbbbbbbbbbbb"
    folder = build(old, b"a b\n", replace=False)
    job = metadata.claim_job("test", 600)
    assert job is not None
    assert registry.publish(job, folder, None, "cpu") is not None
    follower = GraphRegistry(metadata, artifacts)  # another server on the same store
    follower.start()
    follower.load(old)
    folder = build(new, b"a b\nb c\n", replace=True)
    job = metadata.claim_job("test", 600)
    assert job is not None

    seen: list[tuple[str, str, str]] = []
    busy = threading.local()

    def probe(watched: GraphRegistry, call: str) -> None:
        if getattr(busy, "on", False):
            return
        busy.on = True
        try:
            try:
                version = watched.ready_version("nightly")
                seen.append((call, "new" if version.num_nodes == 3 else "old", ""))
            except ServiceError as exc:
                seen.append((call, "refused", exc.kind))
            for graph_id in (old, new):
                with contextlib.suppress(ServiceError, GraphNotFound):
                    if watched.record(graph_id).status == "ready":
                        watched.ready_version(graph_id)  # a ready record answers by its id
        finally:
            busy.on = False

    registry.metadata = _Probed(metadata, lambda call: probe(registry, call))  # type: ignore[assignment]
    registry.artifacts = _Probed(artifacts, lambda call: probe(registry, call))  # type: ignore[assignment]
    assert registry.publish(job, folder, None, "cpu") is not None
    follower.metadata = _Probed(metadata, lambda call: probe(follower, call))  # type: ignore[assignment]
    follower.artifacts = _Probed(artifacts, lambda call: probe(follower, call))  # type: ignore[assignment]
    follower.sync(new)
    follower.sync(old)
    probe(registry, "done")
    probe(follower, "done")
    metadata.close()

    assert len(seen) > 5 and not [s for s in seen if s[1] == "refused"], seen
    answers = [answer for _, answer, _ in seen]
    assert answers[-2:] == ["new", "new"] and "old" in answers
    assert registry.ready_version("nightly").number == follower.ready_version("nightly").number
    assert follower.ready_version("nightly").reachable("a", "c")

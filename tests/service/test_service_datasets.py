"""Every shared dataset (GRAIL_DATASETS) uploaded to a real server and both its query sets answered exactly, over
binary pairs and over text lines. An extra layer over the generated graphs: skipped as a whole where the datasets
are absent (a fresh clone)."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from service.client import GrailClient
from tests.conftest import dataset_graphs, datasets_dir

if not datasets_dir().is_dir():
    pytest.skip(f"datasets folder {datasets_dir()} is absent (set GRAIL_DATASETS)", allow_module_level=True)

pytestmark = pytest.mark.timeout(600)


@pytest.mark.parametrize("graph", dataset_graphs())
def test_dataset_answers_exactly_over_http(client: GrailClient, graph: str) -> None:
    folder = datasets_dir()
    path = folder / f"{graph}.gra"
    if path.stat().st_size > 4 * 1024 * 1024:  # gzip: the largest are over the test server's 12 MiB body limit
        record = client.upload(gzip.compress(path.read_bytes(), 1), name=graph, content_encoding="gzip", wait=True)
    else:
        record = client.upload(path, name=graph, wait=True)
    try:
        with open(folder / f"{graph}.gra") as fh:
            fh.readline()
            assert record["stats"]["nodes"] == int(fh.readline())
        for kind in ("", ".pos"):
            pairs = np.loadtxt(folder / f"{graph}{kind}.que", dtype=np.int64, ndmin=2)
            truth = np.loadtxt(folder / f"{graph}{kind}.ans", dtype=np.int64).astype(bool)
            answers = client.query_batch(record["id"], pairs)
            wrong = np.flatnonzero(answers != truth)
            assert wrong.size == 0, f"{graph}{kind}: {wrong.size} wrong, first pair {pairs[wrong[0]]}"
        text = (folder / f"{graph}.pos.que").read_bytes()[:20_000].rsplit(b"\n", 1)[0] + b"\n"
        lines = client.http.post(
            f"/graphs/{record['id']}/queries",
            content=text,
            headers={"Content-Type": "text/plain", "Accept": "text/plain"},
        )
        expected = (folder / f"{graph}.pos.ans").read_bytes().splitlines()[: text.count(b"\n")]
        assert lines.status_code == 200 and lines.content.splitlines() == expected
    finally:
        client.delete(record["id"])

"""The service on the device: a real server with ``--backend cuda`` builds in its worker processes (spawned,
under their memory limit) on the GPU, and answers exactly what a CPU build of the same graph answers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from grail_core import ReachabilityIndex
from grail_core.build import DEVICE_BUILD_MIN_EDGES

from ..service.conftest import Server
from . import device_present

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not device_present(), reason="needs a CUDA device")]


@pytest.fixture(scope="module")
def gpu_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("grail-gpu-server")
    srv = Server(root / "data", root / "server.log", "--backend", "cuda").start()
    srv.wait_until_ready(timeout=300)
    yield srv
    srv.stop()


def _rmat_text(edges: int, seed: int) -> tuple[bytes, np.ndarray, np.ndarray]:
    from benchmarks.generate import rmat_edges

    scale = max(4, round(np.log2(edges / 6)))
    src, dst = rmat_edges(scale, edges, seed=seed)
    lines = np.char.add(np.char.add(src.astype(str), " "), dst.astype(str))
    return "\n".join(lines.tolist()).encode() + b"\n", src, dst


def test_upload_builds_on_the_device_and_answers_as_the_cpu(gpu_server: Server, tmp_path: Path) -> None:
    text, src, dst = _rmat_text(DEVICE_BUILD_MIN_EDGES + 100_000, seed=5)
    cpu = ReachabilityIndex.from_edges(src, dst, backend="cpu")
    rng = np.random.default_rng(0)
    names = np.unique(np.concatenate([src, dst]))
    pairs = rng.choice(names, size=(200_000, 2))
    with gpu_server.client() as client:
        record = client.upload(text, format="edgelist", wait=True)
        assert record["status"] == "ready", record
        stats = record["stats"]
        # The graph and its components on the device (labels go where the cost model sends them).
        assert stats["phase_backends"]["graph"] == "cuda", stats["phase_backends"]
        assert stats["phase_backends"]["condense"].startswith("cuda"), stats["phase_backends"]
        answers = client.query_batch(record["id"], pairs)
    expected = cpu.query_batch(pairs)
    assert expected.any() and not expected.all()
    np.testing.assert_array_equal(answers.astype(bool), expected.astype(bool))
    log = gpu_server.log()
    assert "Traceback" not in log and "cuMemFree" not in log

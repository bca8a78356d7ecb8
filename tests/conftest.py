"""Shared fixtures: where the real GRAIL datasets live (skipped cleanly when absent)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from service.main import numba_cache_dir

REPO_ROOT = Path(__file__).resolve().parent.parent

# The test servers keep numba's compiled kernels where grail-serve does; this process uses the same folder (set
# before numba is first imported), so that a fresh clone compiles each kernel once, not once here and once there.
os.environ.setdefault("NUMBA_CACHE_DIR", str(numba_cache_dir()))


def pytest_collection_finish(session: pytest.Session) -> None:
    """Before any test runs (outside their timeouts): when service tests are to run, compile the server's and
    the build workers' kernels once into numba's on-disk cache. On a fresh clone a test server and its two
    build workers would otherwise all compile them at the same time, in whichever test comes first (minutes
    on two cores)."""
    service_tests = REPO_ROOT / "tests" / "service"
    if session.config.option.collectonly or not any(service_tests in item.path.parents for item in session.items):
        return
    from service.warmup import warm_up, warm_up_beyond
    from service.worker import warm_up_builds

    warm_up("cpu")
    warm_up_beyond()
    warm_up_builds("cpu")


def datasets_dir() -> Path:
    """``GRAIL_DATASETS`` when set, else ``../shared/datasets`` beside the repository."""
    return Path(os.environ.get("GRAIL_DATASETS", REPO_ROOT.parent / "shared" / "datasets"))


def dataset_graphs() -> list[str]:
    """Names of the ``.gra`` files that come with query sets, smallest first."""
    folder = datasets_dir()
    if not folder.is_dir():
        return []
    graphs = [path for path in folder.glob("*.gra") if path.with_suffix(".que").exists()]
    return [path.stem for path in sorted(graphs, key=lambda path: path.stat().st_size)]


@pytest.fixture(scope="session")
def datasets() -> Path:
    folder = datasets_dir()
    if not folder.is_dir():
        pytest.skip(f"datasets folder {folder} is absent (set GRAIL_DATASETS)")
    return folder

"""Shared fixtures: where the real GRAIL datasets live (skipped cleanly when absent); a real PostgreSQL server
(tests/postgres_server.py), one per session, started by the first test that needs it."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from service.main import numba_cache_dir

REPO_ROOT = Path(__file__).resolve().parent.parent
# A file that the warm-up creates once a core is free, the build kernels being in numba's cache (make test waits
# for it to start the CUDA-simulator suite).
WARMED_VARIABLE = "GRAIL_TEST_WARMED"

# The test servers keep numba's compiled kernels where grail-serve does; this process uses the same folder (set
# before numba is first imported), so that a fresh clone compiles each kernel once, not once here and once there.
os.environ.setdefault("NUMBA_CACHE_DIR", str(numba_cache_dir()))
if "numba.core.config" in sys.modules:  # a plugin imported numba first: it reads its settings again
    sys.modules["numba.core.config"].reload_config()


def pytest_collection_finish(session: pytest.Session) -> None:
    """Before any test runs (outside their timeouts): when service tests are to run, compile the server's and
    the build workers' kernels once into numba's on-disk cache. On a fresh clone a test server and its two
    build workers would otherwise all compile them at the same time, in whichever test comes first (minutes
    on two cores). Under pytest-xdist the workers share the compiling (``_warm_up_shared``)."""
    service_tests = REPO_ROOT / "tests" / "service"
    if session.config.option.collectonly:
        return
    workers = getattr(session.config, "workerinput", None)
    if not any(service_tests in item.path.parents for item in session.items):
        _warmed()
        return
    from service.warmup import warm_up, warm_up_beyond
    from service.worker import warm_up_builds

    if workers is None:
        warm_up("cpu")
        warm_up_beyond()
        warm_up_builds("cpu")
        _warmed()
        return
    # The workers' temporary folders are popen-gw0, popen-gw1, ... in this run's own folder.
    run_folder = session.config._tmp_path_factory.getbasetemp().parent  # type: ignore[attr-defined]
    _warm_up_shared(run_folder / "warm-up", first=workers["workerid"] == "gw0")


def _warmed() -> None:
    """Tell make test (the file ``GRAIL_TEST_WARMED`` names) that a core is free and the build kernels, which the
    CUDA-simulator suite uses too, are in the cache: it starts that suite, a process of its own."""
    warmed = os.environ.get(WARMED_VARIABLE)
    if warmed:
        Path(warmed).touch()


def _warm_up_shared(folder: Path, first: bool) -> None:
    """The warm-up on several pytest-xdist workers: the build kernels first, by the first worker (every part
    needs them; the others meanwhile compile the readers' and the request bodies' kernels, which need none),
    then each worker takes the next part nobody has taken, the longest first, and waits until every part is in
    the cache (a server started before then would compile the rest in its own processes). Files say which parts
    are taken and which are done."""
    from grail_core.warmup import warm_up_build
    from service.warmup import warm_up, warm_up_beyond, warm_up_bodies
    from service.worker import warm_up_builds, warm_up_readers

    parts: dict[str, Callable[[], object]] = {
        "paths": warm_up_beyond,
        "queries": lambda: warm_up("cpu"),
        "formats": lambda: warm_up_builds("cpu"),
    }
    folder.mkdir(exist_ok=True)
    if first:
        try:
            warm_up_build("cpu")
        finally:  # a failure is this worker's to report; the others go on and compile what they need
            (folder / "build.done").touch()
    else:
        warm_up_readers()
        warm_up_bodies()
    _wait_for(folder / "build.done")
    for name, part in parts.items():
        try:
            os.close(os.open(folder / f"{name}.taken", os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            continue
        try:
            part()
        finally:
            (folder / f"{name}.done").touch()
    _warmed()  # this worker now waits for the others' parts: its core is free
    for name in parts:
        _wait_for(folder / f"{name}.done")


def _wait_for(marker: Path, timeout: float = 3600.0) -> None:
    deadline = time.monotonic() + timeout
    while not marker.exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"another test worker did not finish its part of the warm-up ({marker.name})")
        time.sleep(0.2)


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


@pytest.fixture(scope="module")
def updates_kept() -> Iterator[None]:
    """Indexes that keep their updates pending (``ReachabilityIndex.auto_rebuild`` off), for the tests of answers
    with updates pending: a rebuild, started by the searches' seconds (a first compilation's included), would
    answer in their place."""
    from grail_core import ReachabilityIndex

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ReachabilityIndex, "auto_rebuild", False)
        yield


@pytest.fixture(scope="session")
def datasets() -> Path:
    folder = datasets_dir()
    if not folder.is_dir():
        pytest.skip(f"datasets folder {folder} is absent (set GRAIL_DATASETS)")
    return folder


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[object]:
    """A throwaway PostgreSQL server for the session. When none can start, the tests that need it fail (CI must
    not pass without them), unless GRAIL_TEST_SKIP_POSTGRES=1 says this machine has none."""
    from tests.postgres_server import SKIP_VARIABLE, PostgresServer

    try:
        server = PostgresServer().start()
    except (RuntimeError, OSError, KeyError) as exc:
        if os.environ.get(SKIP_VARIABLE) == "1":
            pytest.skip(f"no PostgreSQL server ({SKIP_VARIABLE}=1): {exc}")
        pytest.fail(f"no PostgreSQL server could start for the tests: {exc}", pytrace=False)
    try:
        yield server
    finally:
        server.stop()

"""Index builds in a separate process: a failed, killed or out-of-memory build returns all its memory to the
system and cannot take the server down.

``BuildWorker`` is the server's handle on one spawned process (``spawn``, not ``fork``: the server has threads,
and a CUDA context must not cross a fork), reused build after build while it stays healthy; numba's on-disk
cache (``NUMBA_CACHE_DIR``, inherited) keeps a new one warm, and it builds a small graph of every format before
it says it is ready. The process runs at a lower priority than the server (queries first), decompresses the
upload as a stream into its staging folder with the size cap enforced on the way, reads and indexes it under
a data-size limit (``RLIMIT_DATA``: an allocation past it is a MemoryError, not the machine's OOM killer), and
saves the index into the staging folder; the server publishes it as a version (service.registry). A rebuild
loads the published version, applies the journal rows the server wrote into the staging folder, and builds new
labels of the result. Failure messages name no file of the server.

Messages, over a pipe: the server sends a ``BuildJob``; the worker answers ``("progress", phase, fraction)``
any number of times, then ``("result", ("done", stats) or ("failed", kind, message, line), retiring)``; a
retiring worker exits after that message.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import gc
import logging
import multiprocessing
import os
import resource
import shutil
import signal
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from .errors import (
    BUILD_CRASHED,
    DISK_FULL,
    GRAPH_TOO_LARGE,
    OUT_OF_MEMORY,
    READ_ONLY_STORAGE,
    STORAGE_ERROR,
    ServiceError,
)
from .options import UploadOptions

__all__ = [
    "BuildJob",
    "BuildWorker",
    "BuildOutcome",
    "RebuildSource",
    "WORKER_NICENESS",
    "warm_up_builds",
    "warm_up_readers",
]

log = logging.getLogger("grail.service.worker")

# Builds yield the CPU to the server's queries (a nice value of 10 gets about a tenth of a core's share
# against the server where both want it).
WORKER_NICENESS = 10
# A worker whose resident memory stays this much above its idle size after a build is replaced, not reused.
_RECYCLE_GROWTH_BYTES = 256 << 20
_CHUNK = 1 << 20
_GZIP_MAGIC = b"\x1f\x8b"
_POLL_SECONDS = 0.1
_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class RebuildSource:
    """A rebuild after edge updates: the published version's folder and the journal rows past it (a file of
    ``service.updates.write_rows``, ``updates`` rows), which the new index folds in."""

    index: Path
    journal: Path
    updates: int


@dataclass(frozen=True)
class BuildJob:
    """One build: the graph's upload read and indexed as ``options`` say (its backend resolved), or a rebuild
    (``rebuild``); the index is saved in ``staging``."""

    graph_id: str
    staging: Path
    options: UploadOptions
    memory_bytes: int  # the most this build may allocate, beyond the worker's idle size
    max_graph_bytes: int
    max_name_bytes: int
    request_id: str
    upload: Path | None = None
    rebuild: RebuildSource | None = None

    def with_upload(self, upload: Path) -> BuildJob:
        return replace(self, upload=upload)

    def with_rebuild(self, rebuild: RebuildSource) -> BuildJob:
        return replace(self, rebuild=rebuild)


@dataclass(frozen=True)
class BuildOutcome:
    """``stats`` when the index is saved in ``job.staging / "index"``; else the failure's kind and message."""

    stats: dict[str, Any] | None = None
    kind: str | None = None
    message: str | None = None
    line: int | None = None


# ---- the worker process ---------------------------------------------------------------------------------


def _status(key: str, pid: int | str = "self") -> int:
    """A size from /proc/PID/status in bytes (0 where it is not there)."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _serve(conn: Connection, backend: str, log_level: str, log_format: str) -> None:
    """The worker process's main loop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the server stops its workers itself
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)  # no build outlives a killed server
    with contextlib.suppress(OSError):
        os.nice(WORKER_NICENESS)
    from .logs import configure_logging, set_request_id

    configure_logging(log_level, log_format)
    warm_up_builds(backend)
    idle_data, idle_rss = _status("VmData"), _status("VmRSS")
    conn.send(("ready", os.getpid()))
    while True:
        try:
            job: BuildJob = conn.recv()
        except (EOFError, OSError):
            return
        set_request_id(job.request_id)
        _, hard = resource.getrlimit(resource.RLIMIT_DATA)
        limit = idle_data + job.memory_bytes
        resource.setrlimit(resource.RLIMIT_DATA, (limit if hard == resource.RLIM_INFINITY else min(limit, hard), hard))
        try:
            result = _build(job, lambda phase, fraction: conn.send(("progress", phase, fraction)))
            healthy = True
        except MemoryError:
            result = ("failed", OUT_OF_MEMORY.name, _out_of_memory(job), None)
            healthy = False
        finally:
            resource.setrlimit(resource.RLIMIT_DATA, (hard, hard))
        gc.collect()
        # Retiring: all of this one's memory goes back to the system, and the server starts a fresh worker.
        retiring = not healthy or _status("VmRSS") - idle_rss > _RECYCLE_GROWTH_BYTES
        conn.send(("result", result, retiring))
        if retiring:
            return


def _out_of_memory(job: BuildJob) -> str:
    return (
        f"the build ran out of memory: it needed more than the {job.memory_bytes >> 20} MiB it may use "
        "(--max-build-memory-mb)"
    )


# A small graph of every input format (format None: told by its content).
_FORMAT_SAMPLES: tuple[tuple[bytes, str | None], ...] = (
    (b"0 1\n1 2\n2 0\n2 3\n", None),
    (b"a b\nb c\nc a\n", None),
    (b'source,target\n"a, b",c\nc,"a, b"\n', None),
    (b'{"edges": [[0, 1], [1, 2], [2, 0]], "nodes": [3]}', None),
    (b'{"nodes": [{"id": "a"}], "links": [{"source": "a", "target": "b"}]}', None),
    (b"graph_for_greach\n3\n0: 1 #\n1: 2 #\n2: 0 #\n", None),
    (b"%%MatrixMarket matrix coordinate pattern symmetric\n3 3 2\n2 1\n3 2\n", None),
    (b"# networkx\na b c\nb a\n", "adjlist"),
    (b'<graphml><graph><node id="a"/><edge source="a" target="b"/></graph></graphml>', None),
)


def warm_up_builds(backend: str) -> None:
    """Compile (or load from the disk caches) the build kernels of ``backend`` and read and build a small graph
    of every format, so that the first real build compiles and loads nothing. A worker builds labels and saves
    them, and never searches them: it makes no search engines, so its indexes stay off the GPU."""
    from grail_core.labels import Labels
    from grail_core.warmup import warm_up_build

    warm_up_build(backend)
    for graph in warm_up_readers():
        Labels.build(graph, backend="cpu")


def warm_up_readers() -> list[Any]:
    """Compile (or load) the readers' kernels: read the small graph of every format; returns the graphs. The
    build kernels are not needed for this (a test run compiles both at once, on two cores)."""
    from grail_core import read_graph

    return [read_graph(text, format) for text, format in _FORMAT_SAMPLES]


def _build(job: BuildJob, progress: Callable[[str, float], None]) -> tuple[Any, ...]:
    from grail_core import GrailError, GraphFormatError, sizing
    from grail_core.labels import Labels
    from grail_core.readers import read_with
    from grail_core.storage import save_labels

    started = time.perf_counter()
    job.staging.mkdir(parents=True, exist_ok=True)
    options = job.options
    try:
        if job.rebuild is not None:
            labels = _rebuilt(job, job.rebuild, progress)
            progress("save", 1.0)
            save_labels(labels, job.staging / "index", version=labels.version)
            log.info(
                "graph %s: rebuilt at version %d in %.3f s", job.graph_id, labels.version, time.perf_counter() - started
            )
            return ("done", labels.stats.to_dict())
        assert job.upload is not None
        progress("read", 0.0)
        upload_path = job.upload
        text = _plain_text(job, upload_path)
        try:
            graph = read_with(
                text,
                options.read,
                max_bytes=job.max_graph_bytes,
                max_name_bytes=job.max_name_bytes,
                progress=lambda fraction: progress("read", fraction),
            )
        except RecursionError:
            raise GraphFormatError("the document is nested too deeply") from None
        except OverflowError:
            raise GraphFormatError("a node name is an integer outside the 64-bit range") from None
        finally:
            if text != upload_path:
                text.unlink(missing_ok=True)
        need = sizing.build_bytes(graph.format, 0, graph.num_nodes, graph.num_edge_entries)
        if need > job.memory_bytes:
            raise ServiceError(
                GRAPH_TOO_LARGE,
                f"the graph has {graph.num_nodes} nodes and {graph.num_edge_entries} edges: its index needs about "
                f"{need >> 20} MiB to build, more than the {job.memory_bytes >> 20} MiB this server builds with "
                "(--max-build-memory-mb)",
            )
        labels = Labels.build(graph, dims=options.dims, seed=options.seed, backend=options.backend, progress=progress)
        del graph
        progress("save", 1.0)
        save_labels(labels, job.staging / "index", version=labels.version)
    except ServiceError as exc:
        return ("failed", exc.kind, exc.detail, None)
    except GrailError as exc:
        log.warning("graph %s: build failed: %s", job.graph_id, exc)
        message = getattr(exc, "message", None) or str(exc)
        return ("failed", exc.kind, _without_paths(message, job), getattr(exc, "line", None))
    except OSError as exc:
        kind, message = _disk_failure(exc, job.staging)
        log.warning("graph %s: build failed: %s", job.graph_id, exc)
        return ("failed", kind, message, None)
    except MemoryError:
        raise
    except Exception as exc:  # a bug: the server records it as ours (500), with the traceback in the log
        log.exception("graph %s: build failed", job.graph_id)
        return (
            "failed",
            BUILD_CRASHED.name,
            f"the build failed on the server ({type(exc).__name__}); see its log",
            None,
        )
    stats = labels.stats.to_dict()
    phases = stats.get("phase_seconds") or {}
    log.info(
        "graph %s: built in %.3f s: %d nodes, %d edges, %d components, backend %s; phases %s",
        job.graph_id,
        time.perf_counter() - started,
        stats.get("nodes", -1),
        stats.get("edges", -1),
        stats.get("components", -1),
        stats.get("backend"),
        ", ".join(f"{k} {v:.3f}s" for k, v in phases.items()),
    )
    return ("done", stats)


def _rebuilt(job: BuildJob, source: RebuildSource, progress: Callable[[str, float], None]) -> Any:
    """New labels of a graph with its journaled updates folded in (their application reported as the
    ``journal`` phase)."""
    from grail_core.version import load_version

    from .updates import apply_journal, read_rows

    version = load_version(source.index, mmap=True, verify=False)
    version = apply_journal(
        version, read_rows(source.journal), source.updates, lambda done, total: progress("journal", done / total)
    )
    return version.rebuilt_labels(backend=job.options.backend, progress=progress)


def _without_paths(message: str, job: BuildJob) -> str:
    """A failure's message as a client may read it: the server's files named by what they hold."""
    for path, what in ((job.upload, "the upload"), (job.staging, "the build's folder")):
        if path is not None:
            message = message.replace(str(path), what).replace(str(path.resolve()), what)
    return message


def _plain_text(job: BuildJob, upload: Path) -> Path:
    """The upload itself, or for a gzip upload its text decompressed as a stream into the staging folder: the
    size cap is enforced while decompressing, so a zip bomb stops at the cap, on disk, not in memory."""
    from grail_core import GraphFormatError, InputTooLargeError

    with open(upload, "rb") as source:
        if source.read(2) != _GZIP_MAGIC:
            return upload
        source.seek(0)
        # No suffix: read_graph guesses the format from the content, as it does for the upload.
        target = job.staging / "decompressed"
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        pending, size = b"", 0
        with open(target, "wb") as out:
            while pending or (pending := source.read(_CHUNK)):
                if inflater.eof:  # a concatenated member, or padding after the last one
                    if pending.strip(b"\0") and not pending.startswith(_GZIP_MAGIC):
                        raise GraphFormatError("corrupt gzip data: bytes after the end of the stream")
                    if not pending.startswith(_GZIP_MAGIC):
                        pending = b""
                        continue
                    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
                try:
                    data = inflater.decompress(pending, _CHUNK)
                except zlib.error as exc:
                    raise GraphFormatError(f"corrupt gzip data: {exc}") from None
                pending = inflater.unused_data if inflater.eof else inflater.unconsumed_tail
                size += len(data)
                if size > job.max_graph_bytes:
                    raise InputTooLargeError(
                        f"the graph decompresses to more than {job.max_graph_bytes >> 20} MiB (--max-graph-mb)"
                    )
                out.write(data)
        if not inflater.eof:
            raise GraphFormatError("corrupt gzip data: the stream ends early")
    return target


def _disk_failure(exc: OSError, where: Path) -> tuple[str, str]:
    # numpy reports a short write as "N requested and M written", without an errno: the disk filled up.
    if exc.errno in (errno.ENOSPC, errno.EDQUOT) or (exc.errno is None and "requested and" in str(exc)):
        return DISK_FULL.name, "the server's disk is full (saving the index); free space and upload again"
    if exc.errno == errno.EROFS:
        return READ_ONLY_STORAGE.name, "the server's data directory is read-only (saving the index)"
    try:
        free = shutil.disk_usage(where).free
    except OSError:
        free = -1
    return STORAGE_ERROR.name, f"the index could not be written ({exc.strerror or exc}); free space {free >> 20} MiB"


# ---- the server's handle --------------------------------------------------------------------------------


class BuildWorker:
    """One worker process, started on demand and replaced when it dies or asks to be."""

    def __init__(self, name: str, backend: str, log_level: str, log_format: str) -> None:
        self.name = name
        self._backend = backend
        self._log_level = log_level
        self._log_format = log_format
        self._process: multiprocessing.process.BaseProcess | None = None
        self._conn: Connection | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        """Spawn the process and wait until its warm-up is done (seconds; minutes on a cold numba cache)."""
        with self._lock:
            if self._process is not None and self._process.is_alive():
                return
            context = multiprocessing.get_context("spawn")
            parent, child = context.Pipe()
            process = context.Process(
                target=_serve,
                args=(child, self._backend, self._log_level, self._log_format),
                name=self.name,
                daemon=True,
            )
            process.start()
            child.close()
            self._process, self._conn = process, parent
        while not parent.poll(_POLL_SECONDS):
            if not process.is_alive():
                raise RuntimeError(f"build worker {self.name} exited with {process.exitcode} while starting")
        message = parent.recv()
        if message[0] != "ready":
            raise RuntimeError(f"build worker {self.name} said {message!r} while starting")
        log.info("build worker %s ready (pid %d)", self.name, process.pid)

    def run(
        self,
        job: BuildJob,
        on_progress: Callable[[str, float], bool],
    ) -> BuildOutcome | None:
        """Build ``job``; None when ``on_progress`` says stop (the graph was deleted, or its record could not be
        written: the worker is killed) or when ``stop`` was called meanwhile (the server is shutting down: the
        build is dropped, not failed). A worker whose memory passes the job's limit (a backstop to its own data
        limit) is killed too."""
        self.start()
        assert self._process is not None and self._conn is not None
        process, conn = self._process, self._conn
        idle_rss = _status("VmRSS", process.pid or 0)
        try:
            conn.send(job)
            while True:
                if not conn.poll(_POLL_SECONDS):
                    if not process.is_alive():
                        return self._died(process, job)
                    if _status("RssAnon", process.pid or 0) > idle_rss + job.memory_bytes:
                        self.stop()
                        return BuildOutcome(kind=OUT_OF_MEMORY.name, message=_out_of_memory(job))
                    continue
                message = conn.recv()
                if message[0] == "progress":
                    if not on_progress(message[1], message[2]):
                        self.stop()
                        return None
                    continue
                _, result, retiring = message
                if retiring:
                    self.stop()
                if result[0] == "done":
                    return BuildOutcome(stats=result[1])
                return BuildOutcome(kind=result[1], message=result[2], line=result[3])
        except (EOFError, OSError):
            return self._died(process, job)

    def _died(self, process: multiprocessing.process.BaseProcess, job: BuildJob) -> BuildOutcome | None:
        if self._process is not process:  # stopped from outside this build: the server is shutting down
            log.info("build worker %s stopped while building graph %s", self.name, job.graph_id)
            return None
        process.join(timeout=5)
        code = process.exitcode
        self.stop()
        if code == -signal.SIGKILL:  # the kernel's OOM killer, most likely
            return BuildOutcome(kind=OUT_OF_MEMORY.name, message=_out_of_memory(job) + "; the system killed it")
        log.error("build worker %s died (exit code %s) building graph %s", self.name, code, job.graph_id)
        return BuildOutcome(kind=BUILD_CRASHED.name, message=f"the build worker died (exit code {code}); see the log")

    def stop(self) -> None:
        """Kill the process now (a build in it is lost; the next run starts a fresh one)."""
        with self._lock:
            process, conn = self._process, self._conn
            self._process = self._conn = None
        if process is None:
            return
        if process.is_alive():
            process.kill()
        process.join(timeout=10)
        if conn is not None:
            conn.close()

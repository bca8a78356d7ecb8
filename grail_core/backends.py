"""The seam between grail_core and the GPU code in ``kernels``: backends for labeling, and each index's search engines.

grail_core never imports ``kernels`` anywhere else. Both backends take and return plain numpy arrays
and give identical answers; the GPU one is used when numba finds a CUDA device (or when forced). With
several GPUs, a build labels its dimensions on different devices, and a large batch is split across all
of them (``grail_core.engines.SplitEngine``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .backend_names import BACKENDS
from .engines import CpuEngine, SplitEngine
from .errors import BackendUnavailableError, InvalidParameterError
from .labeling import label_all
from .query import HotArrays
from .scheduler import Scheduler, machine_model

__all__ = [
    "BACKENDS",
    "LabelResult",
    "compute_labels",
    "cuda_available",
    "device_name",
    "label_on_gpus",
    "resolve_backend",
    "search_scheduler",
    "start_calibration",
    "DeviceBuildUnavailable",
    "device_build",
    "keep_indexes_off_devices",
    "warm_up_device",
]

log = logging.getLogger(__name__)


@dataclass
class LabelResult:
    """Labels of every dimension, shape (dims, N+1), and the time each phase took."""

    post: np.ndarray
    minpost: np.ndarray
    tree_low: np.ndarray
    backend: str
    phase_seconds: dict[str, float] = field(default_factory=dict)


def cuda_available() -> bool:
    """True when numba-cuda is installed and finds a device; never raises."""
    try:
        from kernels.device import cuda_available as probe
    except ImportError:
        return False
    return probe()


def device_name() -> str | None:
    """The CUDA device's name, or None without one (or without numba-cuda)."""
    try:
        from kernels.device import device_name as probe
    except ImportError:
        return None
    return probe()


def resolve_backend(name: str) -> str:
    """'cpu' or 'cuda' for a requested backend name; 'auto' picks the GPU when there is one."""
    if name not in BACKENDS:
        raise InvalidParameterError(f"unknown backend {name!r}; choose one of {', '.join(BACKENDS)}")
    if name == "auto":
        return "cuda" if cuda_available() else "cpu"
    if name == "cuda" and not cuda_available():
        raise BackendUnavailableError("backend 'cuda' was requested but no CUDA device is available")
    return name


def compute_labels(
    backend: str,
    indptr: np.ndarray,
    child_orders: np.ndarray,
    root: int,
    num_levels: int | None = None,
) -> LabelResult:
    """Labels of the labeling graph (DAG + virtual root) on the resolved backend.

    ``num_levels`` (the labeling graph's levels, i.e. the DAG's plus one) lets the GPU pipeline
    decline a deep graph at once. The GPU declines graphs that the CPU labels faster (small or deep
    ones, by a cost model in ``kernels.labeling``) and graphs that do not fit; those go to the CPU.
    With several GPUs, each labels some of the dimensions.
    """
    if backend == "cuda":
        from kernels.device import devices
        from kernels.labeling import LabelingDeclined

        try:
            return label_on_gpus(indptr, child_orders, root, devices(), num_levels)
        except MemoryError as error:
            log.warning("GPU labeling did not fit (%s); labeling %d nodes on the CPU instead", error, indptr.size - 1)
        except LabelingDeclined as reason:
            log.info("GPU labeling declined (%s); labeling %d nodes on the CPU", reason, indptr.size - 1)
    post, minpost, tree_low = label_all(indptr, child_orders, root)
    return LabelResult(post, minpost, tree_low, "cpu")


class DeviceBuildUnavailable(RuntimeError):
    """The GPU build cannot run here (no CuPy, graph too large for the device): build on the CPU."""


def device_build(num_nodes: int, num_edges: int) -> Any:
    """A ``kernels.build.DeviceBuild`` for a graph of this size; ``DeviceBuildUnavailable`` when the GPU
    build cannot take it (the reason is the message)."""
    try:
        from kernels.arrays import DeviceArraysUnavailable
        from kernels.build import DeviceBuild
    except ImportError as error:
        raise DeviceBuildUnavailable(str(error)) from None
    try:
        return DeviceBuild(num_nodes, num_edges)
    except (DeviceArraysUnavailable, MemoryError) as error:
        raise DeviceBuildUnavailable(str(error)) from None


def warm_up_device() -> None:
    """Compiles (or loads from the disk cache) every GPU kernel specialization of the build and the search
    (``kernels.specializations``), then runs the GPU build's steps once on a small graph (the array
    library's own kernels: ``kernels.build.warm_up``)."""
    from kernels.build import warm_up
    from kernels.specializations import compile_all

    count, seconds = compile_all()
    log.info("%d GPU kernel specializations ready in %.2f s", count, seconds)
    warm_up()


def label_on_gpus(
    indptr: np.ndarray,
    child_orders: np.ndarray,
    root: int,
    gpus: Sequence[Any],
    level_hint: int | None = None,
    options: Any = None,
) -> LabelResult:
    """GPU labels with the dimensions dealt over ``gpus`` (``kernels.device.Device``): device k labels
    dimensions k, k + len(gpus), ... through ``kernels.labeling.build_labels`` (each dimension's labels
    depend on its own child order only), side by side where the devices allow. Phase times are the
    slowest device's. Raises what ``build_labels`` raises."""
    from kernels.labeling import build_labels

    dims = child_orders.shape[0]
    used = list(gpus)[: max(1, dims)]
    groups = [np.arange(k, dims, len(used)) for k in range(len(used))]

    def label(k: int) -> Any:
        with used[k].context():
            return build_labels(indptr, child_orders[groups[k]], root, options, level_hint)

    if len(used) > 1 and all(gpu.concurrent for gpu in used):
        with ThreadPoolExecutor(len(used)) as pool:
            built = list(pool.map(label, range(len(used))))
    else:
        built = [label(k) for k in range(len(used))]
    labels = []
    for name in ("post", "minpost", "tree_low"):
        first = getattr(built[0], name)
        out = np.empty((dims, first.shape[1]), dtype=first.dtype)
        for group, result in zip(groups, built, strict=True):
            out[group] = getattr(result, name)
        labels.append(out)
    phases: dict[str, float] = {}
    for result in built:
        for phase, seconds in result.phase_seconds.items():
            phases[phase] = max(phases.get(phase, 0.0), seconds)
    post, minpost, tree_low = labels
    return LabelResult(post, minpost, tree_low, "cuda", phases)


def search_scheduler(hot: HotArrays, backend: str) -> Scheduler:
    """An index's search: its CPU engine and, for backend 'cuda', one GPU engine per device (a batch
    split over all of them when there are several), under a scheduler that picks per batch. The GPU
    engines copy the index to their devices in the background at once (unless this process keeps
    indexes off the devices: ``keep_indexes_off_devices``), so that no batch waits for the copy."""
    cpu = CpuEngine(hot)
    if backend != "cuda":
        return Scheduler(hot, cpu, None)
    from kernels.device import devices
    from kernels.search import CudaSearchEngine

    gpus = devices()
    engines = [CudaSearchEngine(hot, gpu) for gpu in gpus]
    if _indexes_on_devices:
        for engine in engines:
            engine.prefetch()
    if len(engines) == 1:
        return Scheduler(hot, cpu, engines[0], pass_pairs=engines[0].pass_pairs)
    split = SplitEngine(engines, concurrent=all(gpu.concurrent for gpu in gpus))
    return Scheduler(hot, cpu, split, pass_pairs=engines[0].pass_pairs, parts=split.parts)


_indexes_on_devices = True


def keep_indexes_off_devices() -> None:
    """For a process that builds and saves indexes but does not search them (a build worker): the indexes
    it makes do not copy themselves to GPUs."""
    global _indexes_on_devices
    _indexes_on_devices = False


_calibration: threading.Thread | None = None
_calibration_lock = threading.Lock()


def start_calibration(wait: bool = False) -> None:
    """Fits the machine's search cost model once per process (``grail_core.calibration``): read from the
    cache folder when this machine's fit is kept there, else measured in a background thread and kept.
    Until it ends, schedulers predict from the model's defaults. ``wait`` returns only once it has."""
    global _calibration
    with _calibration_lock:
        if _calibration is None and not machine_model().fitted:
            _calibration = threading.Thread(target=_calibrate, name="grail-search-calibration", daemon=True)
            _calibration.start()
        thread = _calibration
    if wait and thread is not None:
        thread.join()


def _calibrate() -> None:
    from kernels.search import CudaSearchEngine

    from .calibration import calibrate, load_model, save_model

    key = _machine_key()
    try:
        if load_model(machine_model(), key):
            log.info("search cost model read from the cache folder")
            return
        calibrate(machine_model(), CudaSearchEngine)
        save_model(machine_model(), key)
    except Exception:  # a failed calibration leaves the defaults; searches are exact either way
        log.exception("search cost calibration failed; the scheduler keeps its default constants")


def _machine_key() -> dict[str, object]:
    """What a kept fit is valid for: the GPU, the CPU threads and the search kernels' sources."""
    import hashlib

    import numba

    from kernels.compiled import source_digest
    from kernels.device import devices

    from . import calibration, scheduler

    model = hashlib.sha256()
    for module in (calibration, scheduler):  # the model's terms and how they are fitted
        model.update(Path(str(module.__file__)).read_bytes())
    return {
        "gpu": device_name(),
        "gpus": len(devices()),
        "cpu_threads": numba.get_num_threads(),
        "kernels": source_digest(),
        "model": model.hexdigest(),
    }

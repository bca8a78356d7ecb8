"""The one door between grail_core and the GPU code in ``kernels``: the backends, GPU builds and labels, and
the GPU search engines.

grail_core never imports ``kernels`` anywhere else. Both backends take and return plain numpy arrays
and give identical answers; the GPU one is used when numba finds a CUDA device (or when forced). With
several GPUs, a build labels its dimensions on different devices, and a large batch is split across all
of them (``grail_core.search``). Whether there is a device is asked once per process.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .backend_names import BACKENDS
from .errors import BackendUnavailableError, InvalidParameterError
from .labeling import label_all
from .query import HotArrays

__all__ = [
    "BACKENDS",
    "LabelResult",
    "compute_labels",
    "cuda_available",
    "device_name",
    "device_labeling_options",
    "label_on_gpus",
    "resolve_backend",
    "cuda_search_engine",
    "cuda_search_engines",
    "device_build",
    "device_key",
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


@functools.cache
def cuda_available() -> bool:
    """True when numba-cuda is installed and finds a device (asked once per process); never raises."""
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


def device_build(num_nodes: int, num_edges: int) -> Any:
    """A ``kernels.build.DeviceBuild`` for a graph of this size; ``BackendUnavailableError`` when the GPU
    build cannot take it (no CuPy, a graph too large for the device: the reason is the message)."""
    try:
        from kernels.arrays import DeviceArraysUnavailable
        from kernels.build import DeviceBuild
    except ImportError as error:
        raise BackendUnavailableError(str(error)) from None
    try:
        return DeviceBuild(num_nodes, num_edges)
    except (DeviceArraysUnavailable, MemoryError) as error:
        raise BackendUnavailableError(str(error)) from None


def device_labeling_options(device: Any) -> Any:
    """The options of a GPU build's labels (``kernels.labeling.LabelingOptions``, for ``DeviceBuild.labels``)
    at any depth: the build's cost model has chosen where the DAG is labeled. Their ``path_count_levels``
    says how deep a DAG the GPU takes tree parents from path counts for."""
    from kernels.labeling import LabelingOptions

    return LabelingOptions(config=device.config, max_levels=1 << 30)


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


def cuda_search_engines(hot: HotArrays) -> tuple[list[Any], bool]:
    """One GPU search engine per device for an index's records (``kernels.search.CudaSearchEngine``), and
    whether the devices run side by side."""
    from kernels.device import devices
    from kernels.search import CudaSearchEngine

    gpus = devices()
    return [CudaSearchEngine(hot, gpu) for gpu in gpus], all(gpu.concurrent for gpu in gpus)


def cuda_search_engine(hot: HotArrays) -> Any:
    """A GPU search engine on the current device (the cost model's calibration runs one per index)."""
    from kernels.search import CudaSearchEngine

    return CudaSearchEngine(hot)


def device_key() -> dict[str, object]:
    """What GPU timings hold for: the devices' name and count, and the digest of the kernels' sources."""
    from kernels.compiled import source_digest
    from kernels.device import devices

    return {"gpu": device_name(), "gpus": len(devices()), "kernels": source_digest()}

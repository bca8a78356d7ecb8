"""Every kernel of ``kernels`` is made here: compiled code that persists across processes, and a registry.

``kernel(py_func, name)`` is ``cuda.jit`` for a kernel, with two additions:

* numba-cuda's disk cache (``NUMBA_CACHE_DIR``) under a key that is the same in every process. Its own key
  hashes a closure's cell contents by pickling them, and a pickled dispatcher carries an id made afresh
  in every process, so the engine's kernels (closures over their per-edge and per-node device functions)
  were never found again. Here the key is the kernel's name (which names the device functions it closes
  over), its compile options and a digest of the sources its code comes from (``kernels`` and
  ``grail_core.records``, whose constants are compiled in): a changed source is a new key, never a stale
  kernel. The cache holds the cubin, so a later process loads a kernel in milliseconds instead of
  compiling it for seconds.
* a registry by name (``registered``), which ``kernels.specializations`` compiles from its one list of
  argument types, and which counts compilations (``compilations``): after the warm-up, none should
  happen on any request path.

Under the simulator ``kernel`` is plain ``cuda.jit`` (nothing is compiled there).
"""

from __future__ import annotations

import functools
import hashlib
import logging
import threading
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

from numba import cuda

from .device import is_simulator

__all__ = ["compilations", "copy_function", "kernel", "op_name", "registered", "source_digest"]

log = logging.getLogger(__name__)

_registry: dict[str, Any] = {}
_registry_lock = threading.Lock()


def op_name(op: Callable[..., Any] | None) -> str:
    """A device function's name in a kernel name (``-`` for none): module and name, as in the sources."""
    if op is None:
        return "-"
    func = getattr(op, "py_func", op)
    return f"{func.__module__.rsplit('.', 1)[-1]}.{func.__name__}"


@functools.cache
def source_digest() -> str:
    """SHA-256 of the sources compiled into the kernels: every module of ``kernels`` and ``grail_core.records``."""
    here = Path(__file__).resolve().parent
    records = here.parent / "grail_core" / "records.py"
    digest = hashlib.sha256()
    for path in [*sorted(here.rglob("*.py")), records]:
        digest.update(str(path.relative_to(here.parent)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _describe(value: Any) -> str:
    """A process-independent description of a closure cell: device functions by name, constants by value."""
    if isinstance(value, (bool, int, float, str, type(None))):
        return repr(value)
    if isinstance(value, tuple):
        return "(" + ",".join(_describe(v) for v in value) + ")"
    func = getattr(value, "py_func", value)
    if callable(func) and hasattr(func, "__qualname__"):
        return f"{func.__module__}.{func.__qualname__}"
    raise TypeError(f"no stable description of {type(value).__name__}")


def _stable_cache(py_func: Callable[..., Any], identity: str) -> Any:
    """A numba-cuda disk cache of ``py_func`` whose index key is (signature, device, numba-cuda, identity)."""
    import numba_cuda
    from numba.cuda.dispatcher import CUDACache

    class StableCache(CUDACache):
        def _index_key(self, sig: Any, codegen: Any) -> tuple[Any, ...]:
            key = (sig, codegen.magic_tuple(), numba_cuda.__version__, identity)
            if self._launch_config_key is not None:
                key += (("launch_config", self._launch_config_key),)
            return key

    return StableCache(py_func)


def copy_function(func: Callable[..., Any]) -> Callable[..., Any]:
    """A new function object of the same code (one body compiled as several kernels, each named on its own)."""
    copy = types.FunctionType(func.__code__, func.__globals__, func.__name__, func.__defaults__, func.__closure__)
    copy.__qualname__ = func.__qualname__
    copy.__module__ = func.__module__
    return copy


def kernel(py_func: Callable[..., Any], name: str, **options: Any) -> Any:
    """``cuda.jit(**options)(py_func)`` kept on disk under a stable key, registered as ``name`` (unique)."""
    py_func.__qualname__ = name.replace(".", "_").replace(",", "__").replace("[", "_").replace("]", "")
    dispatcher = cuda.jit(**options)(py_func)
    if not is_simulator():
        try:
            cells = tuple(c.cell_contents for c in py_func.__closure__ or ())
            parts = (source_digest(), name, repr(sorted(options.items())), _describe(cells))
            dispatcher._cache = _stable_cache(py_func, hashlib.sha256(repr(parts).encode()).hexdigest())
        except (TypeError, RuntimeError, OSError) as error:  # no writable cache place, or an odd closure
            log.debug("kernel %s is compiled in every process: %s", name, error)
    with _registry_lock:
        if name in _registry:
            raise ValueError(f"two kernels named {name!r}")
        _registry[name] = dispatcher
    return dispatcher


def registered() -> dict[str, Any]:
    """Every kernel made so far (those of the modules imported), by name."""
    with _registry_lock:
        return dict(_registry)


def compilations() -> dict[str, int]:
    """Per kernel, the signatures this process compiled (not loaded from the disk cache) so far."""
    counts = {}
    for name, dispatcher in registered().items():
        misses = getattr(dispatcher, "_cache_misses", None)
        if misses:
            counts[name] = int(sum(misses.values()))
    return counts

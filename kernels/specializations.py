"""The one list of every kernel specialization the GPU build and the GPU search launch, and its compilation.

numba compiles a kernel once per argument layout (the types of its arguments, nested tuples included).
``SPECIALIZATIONS`` names each kernel (``kernels.compiled`` registers them by name) with the argument
types of every launch of it in ``kernels``; ``compile_all`` compiles them, or loads them from the disk
cache, without launching anything, so that the warm-up reaches every dispatch path whatever the graph
(sizes, depths, path-count widths and fall-backs change no argument type). Kernel arguments keep their
types fixed for this: node ids, child orders and labels are int32 on the device (``MAX_DEVICE_NODES``),
offsets and counts int64, masks and path counts uint64. A launch with types missing here would compile
on a request path: the simulator tests check every launch of the kernel tests against this list, and the
GPU tests run builds and searches with compilation switched off after the warm-up.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import numpy as np
from numba.core import types
from numba.np.numpy_support import from_dtype

from .frontier.advance import DegreeSplit, LevelArrays
from .frontier.discovery import _Seed
from .frontier.levels import _Kahn
from .scc import _Reach, _Trim
from .search.driver import Batch, ChunkArrays, EntryArrays, kernel_name
from .search.ops import IndexArrays, StatusArrays
from .search.touched import TouchedArrays, TouchedSearchArrays, TouchedStatus

__all__ = ["SPECIALIZATIONS", "compile_all", "forbid_compilation", "signature_of"]


def _array(dtype: Any, ndim: int = 1) -> types.Array:
    return types.Array(from_dtype(np.dtype(dtype)), ndim, "C")


def _tuple(*fields: types.Type) -> types.BaseTuple:
    return types.BaseTuple.from_types(fields)


def _named(cls: type, *fields: types.Type) -> types.BaseTuple:
    return types.BaseTuple.from_types(fields, cls)


I32, I64, U8, U64 = (_array(t) for t in (np.int32, np.int64, np.uint8, np.uint64))
I32_2, I32_3, I64_2, U64_2, U64_3, U32_2 = (
    _array(np.int32, 2),
    _array(np.int32, 3),
    _array(np.int64, 2),
    _array(np.uint64, 2),
    _array(np.uint64, 3),
    _array(np.uint32, 2),
)
INT, UINT, BOOL = types.int64, types.uint64, types.boolean
NONE = _tuple()


levels = _named(LevelArrays, I32_2, I64_2, I64_2)
split = _named(DegreeSplit, INT, INT, INT)
sweep = (I64, levels, INT, INT, INT)  # indptr, level queues, first, count, step (then edge and node args, narrow)
trim = _named(_Trim, I32, I32, I32, I64, I64, levels, split)
index = _named(IndexArrays, I64, I32, U32_2, U32_2, I32, I64, INT)
batch = _named(Batch, I32, I32, INT, U32_2, U64_2, I64_2, I64_2, I32, I64)
touched = _tuple(
    _named(TouchedArrays, I64, I32, I32, U8, I32, U64, U64, U64, U64, U64, U64, U64, INT, INT),
    index,
    _named(TouchedSearchArrays, I32, I32, I32, U64, U64, U64, U64, U64, U32_2, INT, U64),
    _named(TouchedStatus, U64_2, U64_3, I64_2, I64, INT),
)

# Kernel name (``kernels.compiled``) -> the argument types of each of its launches.
SPECIALIZATIONS: dict[str, list[tuple[types.Type, ...]]] = {
    # frontier engine
    "map[discovery._seed]": [(INT, _named(_Seed, I32, I64, I64, BOOL, levels, split))],
    "sweep[-,discovery._write_level]": [(*sweep, NONE, _tuple(I32), INT)],
    "discover[levels._discover,-]": [
        (I64, I64, levels, INT, INT, _named(_Kahn, I64, I32, I32, levels, split), NONE, I64, INT)
    ],
    "map[levels._count_parent]": [(INT, _tuple(I32, I32))],
    "map[memory._fill_one]": [
        (INT, _tuple(_array(dtype), from_dtype(np.dtype(dtype)))) for dtype in (np.uint64, np.int32, np.int64, np.uint8)
    ],
    "scan.blocks": [(U64, U64, U64)],
    "scan.offsets": [(U64, U64, INT)],
    # components
    "discover[scc._lose_neighbour,scc._lose_neighbour]": [(I64, I64, levels, INT, INT, trim, trim, I64, INT)],
    "discover[scc._reach,-]": [
        (I64, I64, levels, INT, INT, _named(_Reach, I64, I32, I32, INT, INT, levels, split), NONE, I64, INT)
    ],
    "map[scc._live_degrees]": [(INT, _tuple(I64, I32, I64, I32, I32, I32, I32))],
    "map[scc._smallest_member]": [(INT, _tuple(I32, I32))],
    # hubs
    "sweep[hubs._push_down,-]": [(*sweep, _tuple(I32, U64), NONE, INT)],
    "sweep[hubs._pull_up,-]": [(*sweep, _tuple(I32, U64), NONE, INT)],
    # labels
    "map[labeling._order_key]": [(INT, _tuple(UINT, I32, U64))],
    "sweep[labeling._add_child_count,labeling._finish_count]": [
        (*sweep, _tuple(I32, U64_2, U64_2, INT, UINT), _tuple(U64_2, U64_2, INT, UINT, I32), INT)
    ],
    "map[labeling._child_limb]": [(INT, _tuple(I32, U64_2, INT, UINT, U64))],
    "sweep[labeling._relax,-]": [(*sweep, _tuple(I32_2, I64, U64_3, U64_3, I32, INT, UINT), NONE, INT)],
    "advance[labeling._pick_parent]": [(I64, levels, INT, _tuple(I32_2, I64, U64_3, U64_3, I32_2, I64_2, INT, UINT))],
    "sweep[-,labeling._push_size]": [(*sweep, NONE, _tuple(I32_2, I32_2), INT)],
    "map[labeling._tree_child_size]": [(INT, _tuple(I32_2, INT, I32_2, I64_2, U64))],
    "sweep[-,labeling._place]": [(*sweep, NONE, _tuple(I64, U64_3, I32_2, I32_2, I64_2, I32_2, I32_2), INT)],
    "sweep[labeling._pull_minpost,-]": [(*sweep, _tuple(I32_2, I32_2), NONE, INT)],
    "advance[labeling._check_edge]": [(I64, levels, INT, _tuple(I32_2, I32_2, I32_2, I32))],
    "map[labeling._seed_root]": [(INT, _tuple(I32_2, I32_2, INT))],
    "map[labeling._seed_dist_root]": [(INT, _tuple(U64_3, INT))],
    "map[labeling._seed_tree_root]": [(INT, _tuple(I32_2, I32_3, INT))],
    "sweep[-,labeling._choose_parent]": [(*sweep, NONE, _tuple(I64, I64, I32_2, I32, I32_2, I64_2, I32_2, I32_3), INT)],
    # search
    kernel_name("levels"): [(index, _named(StatusArrays, U64_2, U64_2, U8), _named(ChunkArrays, U64_3, I64_2), batch)],
    kernel_name("frontier"): [(index, U64_2, _named(EntryArrays, U64_2, I64, I64), batch)],
    "map[touched._seed]": [(INT, touched)],
    "map[touched._expand]": [(INT, touched)],
}


def signature_of(args: tuple[Any, ...]) -> tuple[types.Type, ...]:
    """The argument types numba gives a launch's arguments (device arrays, CuPy arrays and numpy arrays
    alike: the simulator's stand-ins type as the device's do)."""
    from numba.cuda.typing.typeof import typeof

    def plain(value: Any) -> Any:
        inner = getattr(value, "_ary", None)  # the simulator's device arrays wrap a numpy array
        if isinstance(inner, np.ndarray):
            return inner
        if isinstance(value, tuple):
            fields = [plain(v) for v in value]
            return type(value)(*fields) if hasattr(value, "_fields") else tuple(fields)
        return value

    return tuple(typeof(plain(arg)) for arg in args)


def _kernels() -> Iterator[tuple[str, Any, tuple[types.Type, ...]]]:
    from .compiled import registered

    known = registered()
    for name, signatures in SPECIALIZATIONS.items():
        if name not in known:
            raise KeyError(f"the specialization list names {name!r}, which no module registers")
        for signature in signatures:
            yield name, known[name], signature


def compile_all() -> tuple[int, float]:
    """Compiles (or loads from the disk cache) every listed specialization; (count, seconds). Nothing to do
    under the simulator."""
    from .device import is_simulator

    started = time.perf_counter()
    count = 0
    for _name, dispatcher, signature in _kernels():
        if not is_simulator():
            dispatcher.compile(signature)
        count += 1
    return count, time.perf_counter() - started


def forbid_compilation(forbid: bool = True) -> None:
    """Makes any launch outside the list fail instead of compiling (tests), or allows it again."""
    from .compiled import registered

    for dispatcher in registered().values():
        if getattr(dispatcher, "overloads", None):
            dispatcher._can_compile = not forbid

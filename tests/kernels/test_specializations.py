"""Every kernel launch of the GPU build and search has its argument types in ``kernels.specializations``.

The warm-up compiles that one list and nothing else, so a launch with other types would compile on a
request path. Here every launch of a device build that walks every step (both edge id types, the hand-off
to the CPU, labels with multi-word path counts and without them, the hubs) and of the search in both modes
is recorded under the simulator, with the types numba gives its arguments on the device.
"""

from __future__ import annotations

from typing import Any

import pytest
from numba.cuda.simulator.kernel import FakeCUDAKernel

from grail_core.query import pack
from kernels.build import warm_up
from kernels.compiled import registered
from kernels.labeling import LabelingOptions, build_labels
from kernels.search import CudaSearchEngine
from kernels.specializations import SPECIALIZATIONS, compile_all, signature_of

from .graphs import diamond_stack, labeling_graph
from .test_search import small_case
from .test_touched import touched_case

pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")


@pytest.fixture
def launches(monkeypatch: pytest.MonkeyPatch) -> dict[str, set[tuple[Any, ...]]]:
    """Kernel name -> the signatures of its launches while the test runs."""
    names = {id(dispatcher): name for name, dispatcher in registered().items()}
    seen: dict[str, set[tuple[Any, ...]]] = {}
    launch = FakeCUDAKernel.__call__

    def recording(self: FakeCUDAKernel, *args: Any) -> Any:
        if not self._device:
            seen.setdefault(names.get(id(self), self.fn.__qualname__), set()).add(signature_of(args))
        return launch(self, *args)

    monkeypatch.setattr(FakeCUDAKernel, "__call__", recording)
    return seen


def test_every_launch_is_in_the_list(launches: dict[str, set[tuple[Any, ...]]]) -> None:
    warm_up()
    n, edges = diamond_stack(3)
    indptr, orders, root = labeling_graph(n, edges, 2, 0)
    build_labels(indptr, orders, root, LabelingOptions(word_bits=4, max_levels=1 << 10))
    build_labels(indptr, orders, root, LabelingOptions(max_levels=1 << 10, path_count_levels=0))
    arrays, sources, targets, _truth = small_case()
    engine = CudaSearchEngine(pack(arrays))
    for mode in ("levels", "frontier"):
        engine.answer(sources, targets, mode)
    version, pairs, _truth = touched_case()
    CudaSearchEngine(version.search.hot).answer_touched(version.touched_graph(), pairs[:, 0], pairs[:, 1])
    unlisted = {
        name: sorted(map(str, signatures - set(SPECIALIZATIONS.get(name, [])))) for name, signatures in launches.items()
    }
    assert not {name: missing for name, missing in unlisted.items() if missing}
    # The steps above launch every kernel of the list.
    assert set(launches) == set(SPECIALIZATIONS)


def test_the_list_names_registered_kernels_only() -> None:
    count, _seconds = compile_all()  # under the simulator: checks every name, compiles nothing
    assert count == sum(map(len, SPECIALIZATIONS.values()))
    assert set(SPECIALIZATIONS) <= set(registered())

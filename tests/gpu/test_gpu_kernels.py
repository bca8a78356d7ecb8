"""The simulator's kernel tests again, on the real device (run on the GPU machine: ``pytest -m gpu tests/gpu``)."""

from __future__ import annotations

import pytest

from . import device_present

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not device_present(), reason="needs a CUDA device")]

if device_present():
    from tests.kernels.test_labeling import (  # noqa: F401
        test_deep_chain_declines,
        test_diamond_stack_multi_word_weights,
        test_hub_with_many_roots_uses_every_degree_class,
        test_level_hint_declines_before_device_work,
        test_random_dags_match_cpu,
        test_single_node,
        test_small_graphs_go_to_the_cpu_by_default,
        test_too_wide_counts_decline,
    )
    from tests.kernels.test_scan import test_exclusive_scan  # noqa: F401
    from tests.kernels.test_search import test_all_pairs_match_bfs, test_empty_batch  # noqa: F401

"""The simulator's kernel tests again, on the real device (run on the GPU machine: ``pytest -m gpu tests/gpu``)."""

from __future__ import annotations

import pytest

from . import device_present

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not device_present(), reason="needs a CUDA device")]

if device_present():
    from tests.kernels.test_labeling import (  # noqa: F401
        test_deep_chain_declines,
        test_deep_layered_dag_matches_cpu,
        test_diamond_stack_multi_word_weights,
        test_dimensions_dealt_over_two_devices_equal_the_cpu_labels,
        test_hub_with_many_roots_uses_every_degree_class,
        test_level_hint_declines_before_device_work,
        test_random_dags_match_cpu,
        test_random_dags_match_cpu_by_comparing_tree_paths,
        test_single_node,
        test_small_graphs_go_to_the_cpu_by_default,
        test_too_wide_counts_compare_tree_paths_instead,
    )
    from tests.kernels.test_scan import test_exclusive_scan  # noqa: F401
    from tests.kernels.test_search import (  # noqa: F401
        test_all_pairs_match_bfs,
        test_concurrent_calls_take_the_device_one_at_a_time,
        test_device_cache_keeps_several_indexes_and_evicts_the_least_recently_used,
        test_empty_batch,
        test_every_engine_and_a_split_over_two_devices_match_bfs,
        test_frontier_entries_that_overflow_halve_the_words_then_sweep_levels,
        test_frontier_mode_expands_a_node_once_per_search,
        test_frontier_mode_takes_hops_not_levels,
        test_levels_that_outgrow_the_chunks_start_again_with_fewer_words,
        test_more_words_than_one_summary_word,
        test_nodes_left_with_found_searches_only_are_cleared_for_the_next_pass,
        test_random_graphs_and_batches_match_bfs,
        test_scheduled_batches_over_two_devices_match_bfs,
    )

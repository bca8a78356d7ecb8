"""The hybrid scheduler with stub engines: it sends each batch whole to the engine its cost model predicts
cheaper, never runs a batch on an engine to measure it, and learns from actual times."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from grail_core import ReachabilityIndex
from grail_core.engines import SearchResult
from grail_core.query import UNDECIDED, filter_pairs
from grail_core.scheduler import (
    DEFAULTS,
    GPU_MODES,
    PROBE_PAIRS,
    REPROBE,
    TOUCHED_MIN_PAIRS,
    BatchFeatures,
    CostModel,
    Scheduler,
)
from tests.reference import reachability_matrix


@dataclass
class StubEngine:
    """Answers from a truth table, reports ``seconds`` per call, and records every call."""

    name: str
    truth: np.ndarray
    seconds: float = 1e-3
    calls: list[tuple[int, str]] = field(default_factory=list)
    released: bool = False

    def answer(self, sources: np.ndarray, targets: np.ndarray, mode: str = "auto") -> SearchResult:
        self.calls.append((int(sources.size), mode))
        return SearchResult(
            self.truth[sources, targets], self.name, self.seconds, "dfs" if self.name == "cpu" else mode
        )

    def release(self) -> None:
        self.released = True


class FixedModel(CostModel):
    """Predicts the given seconds per kind, whatever the batch."""

    def __init__(self, costs: dict[str, float]) -> None:
        super().__init__()
        self.costs = dict(costs)

    def raw(self, kind: str, f: BatchFeatures) -> float:
        return self.costs[kind]


@pytest.fixture(scope="module")
def case() -> tuple[ReachabilityIndex, np.ndarray, np.ndarray, np.ndarray]:
    """A DAG of 300 nodes in 30 layers (cycles collapse in a condensation, not here: DAG ids are node ids),
    its index and every pair the labels leave open, as DAG node ids, with the truth table."""
    rng = np.random.default_rng(3)
    n = 300
    src = rng.integers(0, n - 10, size=900)
    dst = src + rng.integers(1, 10, size=900)
    index = ReachabilityIndex.from_edges(src, dst, num_nodes=n, backend="cpu", hubs=0)
    truth = reachability_matrix(n, list(zip(src.tolist(), dst.tolist(), strict=True)))
    comp = index.arrays.comp
    dag_truth = np.zeros((comp.max() + 1,) * 2, dtype=bool)
    dag_truth[comp[:, None], comp[None, :]] = truth
    pairs = np.stack([a.ravel() for a in np.meshgrid(np.arange(n), np.arange(n), indexing="ij")], axis=1)
    undecided = pairs[filter_pairs(index.hot, pairs) == UNDECIDED]
    assert undecided.shape[0] > 1000
    return index, comp[undecided[:, 0]], comp[undecided[:, 1]], dag_truth


def scheduler_for(
    index: ReachabilityIndex,
    truth: np.ndarray,
    costs: dict[str, float],
    gpu_seconds: float = 1e-3,
    cpu_seconds: float = 1e-3,
) -> tuple[Scheduler, StubEngine, StubEngine]:
    cpu, gpu = StubEngine("cpu", truth, cpu_seconds), StubEngine("cuda:0", truth, gpu_seconds)
    return Scheduler(index.hot, cpu, gpu, model=FixedModel(costs), min_pairs=0), cpu, gpu


@pytest.mark.parametrize(
    ("costs", "engine", "mode"),
    [
        ({"cpu": 1.0, "levels": 2.0, "frontier": 3.0}, "cpu", "dfs"),
        ({"cpu": 3.0, "levels": 1.0, "frontier": 2.0}, "cuda:0", "levels"),
        ({"cpu": 3.0, "levels": 2.0, "frontier": 1.0}, "cuda:0", "frontier"),
    ],
)
def test_picks_the_cheaper_prediction(case: tuple, costs: dict[str, float], engine: str, mode: str) -> None:
    index, sources, targets, truth = case
    scheduler, cpu, gpu = scheduler_for(index, truth, costs)
    answers, decision = scheduler.search(sources, targets)
    np.testing.assert_array_equal(answers, truth[sources, targets])
    assert (decision.engine, decision.mode) == (engine, mode)
    assert decision.predicted == costs
    chosen, other = (cpu, gpu) if engine == "cpu" else (gpu, cpu)
    assert chosen.calls == [(sources.size, "auto" if engine == "cpu" else mode)]
    assert other.calls == []


def test_never_explores_with_a_user_batch(case: tuple) -> None:
    """A fresh index, batch after batch: each batch goes whole to one engine, the one predicted cheaper,
    also the first (no batch goes to the GPU to measure it); the first probe searches 16 of its pairs on
    the calling thread, and the decision is so clear that later batches of its kind skip the probe."""
    index, sources, targets, truth = case
    scheduler, cpu, gpu = scheduler_for(index, truth, {"cpu": 1.0, "levels": 2.0, "frontier": 2.0})
    rng = np.random.default_rng(0)
    for batch in range(4):
        part = rng.permutation(500)  # the same kind of batch each time, in another order
        answers, decision = scheduler.search(sources[part], targets[part])
        np.testing.assert_array_equal(answers, truth[sources[part], targets[part]])
        assert (decision.probe_pairs > 0) == (batch == 0)
    assert gpu.calls == []
    assert cpu.calls == [(500, "auto")] * 4


def test_close_decisions_probe_every_batch_and_clear_ones_again_every_reprobe_th(case: tuple) -> None:
    """The CPU takes what was predicted; the GPU was predicted 1.1 times slower (close) or 9 times (clear)."""
    index, sources, targets, truth = case
    close, _, _ = scheduler_for(index, truth, {"cpu": 1.0, "levels": 1.1, "frontier": 3.0}, cpu_seconds=1.0)
    clear, _, _ = scheduler_for(index, truth, {"cpu": 1.0, "levels": 9.0, "frontier": 9.0}, cpu_seconds=1.0)
    for scheduler, probes in ((close, [True] * (REPROBE + 1)), (clear, [True] + [False] * (REPROBE - 1) + [True])):
        # (A first probe may stop after its first group: it compiles the probe's functions in a fresh process.)
        seen = [scheduler.search(sources, targets)[1].probe_pairs > 0 for _ in range(REPROBE + 1)]
        assert seen == probes


def test_small_batches_stay_on_the_cpu_without_a_probe(case: tuple) -> None:
    index, sources, targets, truth = case
    scheduler, cpu, gpu = scheduler_for(index, truth, {"cpu": 9.0, "levels": 1.0, "frontier": 1.0})
    scheduler.min_pairs = 1000
    answers, decision = scheduler.search(sources[:999], targets[:999])
    np.testing.assert_array_equal(answers, truth[sources[:999], targets[:999]])
    assert (decision.engine, decision.probe_pairs, decision.predicted) == ("cpu", 0, {})
    assert cpu.calls == [(999, "auto")] and gpu.calls == []


def test_an_index_whose_cpu_search_beats_a_gpu_call_skips_the_probe(case: tuple) -> None:
    """Once a batch showed the CPU search of this index cheaper than a GPU call's fixed cost, later ones
    go to the CPU without a probe."""
    index, sources, targets, truth = case
    scheduler, cpu, gpu = scheduler_for(index, truth, {"cpu": 1e-4, "levels": 1.0, "frontier": 1.0})
    first = scheduler.search(sources, targets)[1]
    assert first.probe_pairs > 0
    answers, second = scheduler.search(sources, targets)
    np.testing.assert_array_equal(answers, truth[sources, targets])
    assert (second.engine, second.probe_pairs) == ("cpu", 0)
    assert second.predicted["cpu"] < min(scheduler.model.constants[kind][0] for kind in GPU_MODES)
    assert gpu.calls == [] and cpu.calls[-1] == (sources.size, "auto")


def test_actual_times_correct_the_next_predictions(case: tuple) -> None:
    """A GPU that takes ten times its prediction: this index's own correction moves the next prediction
    of such a batch up tenfold, and that batch goes to the CPU; the machine's correction moves by at most
    a factor of two, which is what another index starts from."""
    index, sources, targets, truth = case
    scheduler, _cpu, _gpu = scheduler_for(index, truth, {"cpu": 2e-3, "levels": 1e-3, "frontier": 5e-3}, 1e-2)
    first = scheduler.search(sources, targets)[1]
    assert first.engine == "cuda:0"
    assert scheduler.model.correction("levels") == 2.0
    second = scheduler.search(sources, targets)[1]
    assert second.predicted["levels"] == pytest.approx(10 * first.predicted["levels"])
    assert second.engine == "cpu"
    other, _, _ = scheduler_for(index, truth, {"cpu": 2e-3, "levels": 1e-3, "frontier": 5e-3})
    other.model = scheduler.model
    f = other.look(sources, targets)[1]
    assert other.predict(f)["levels"] == pytest.approx(2e-3)


def test_fit_scales_each_kind_to_the_machine() -> None:
    """Runs on a machine where the CPU search is 0.7 times, the levels sweep 1.3 times and the frontier
    queue twice as slow as the defaults say (each run within 10% of that): each kind's constants scale by
    its factor, up to the noise; a kind without runs keeps its defaults."""
    factors = {"cpu": 0.7, "levels": 1.3, "frontier": 2.0}
    rng = np.random.default_rng(0)
    samples = []
    for _ in range(40):
        passes = int(rng.integers(1, 6))
        f = BatchFeatures(
            pairs=int(rng.integers(5_000, 500_000)),
            passes=passes,
            span=passes * int(rng.integers(10, 5_000)),
            scanned=passes * int(rng.integers(10_000, 20_000_000)),
            dfs_seconds=float(rng.uniform(1e-6, 3e-5)),
            edges=float(rng.uniform(5, 500)),
            hops=float(passes * rng.integers(1, 300)),
        )
        samples += [
            (kind, f, CostModel().raw(kind, f) * factors[kind] * rng.uniform(0.9, 1.1)) for kind in ("cpu", "levels")
        ]
    fitted = CostModel()
    fitted.fit(samples)
    assert fitted.fitted
    for kind in ("cpu", "levels"):
        np.testing.assert_allclose(
            np.array(fitted.constants[kind]) / np.array(DEFAULTS[kind]), factors[kind], rtol=0.03, err_msg=kind
        )
    assert fitted.constants["frontier"] == DEFAULTS["frontier"]


def test_a_gpu_mode_not_run_on_an_index_takes_the_other_modes_correction(case: tuple) -> None:
    """The levels sweep runs at ten times its prediction: the frontier queue, not run yet on this index,
    is predicted ten times dearer too, and the CPU is chosen next."""
    index, sources, targets, truth = case
    scheduler, _cpu, gpu = scheduler_for(index, truth, {"cpu": 4e-3, "levels": 1e-3, "frontier": 2e-3}, 1e-2)
    first = scheduler.search(sources, targets)[1]
    assert first.engine == "cuda:0" and gpu.calls[-1][1] == "levels"
    second = scheduler.search(sources, targets)[1]
    assert second.predicted["frontier"] == pytest.approx(10 * first.predicted["frontier"])
    assert second.engine == "cpu"


def test_query_stats_report_the_choice_and_predicted_against_actual(case: tuple) -> None:
    index, _sources, _targets, truth = case
    scheduler, _cpu, gpu = scheduler_for(index, truth, {"cpu": 3.0, "levels": 1.0, "frontier": 2.0})
    index.scheduler = scheduler
    n = index.arrays.comp.size
    pairs = np.stack([a.ravel() for a in np.meshgrid(np.arange(n), np.arange(n), indexing="ij")], axis=1)
    answers, stats = index.query_ids(pairs)
    comp = index.arrays.comp
    np.testing.assert_array_equal(answers, truth[comp[pairs[:, 0]], comp[pairs[:, 1]]])
    assert (stats.search_backend, stats.search_engine, stats.search_mode) == ("cuda", "cuda:0", "levels")
    assert stats.predicted_seconds == {"cpu": 3.0, "levels": 1.0, "frontier": 2.0}
    assert stats.search_seconds > 0 and 0 < stats.probe_pairs <= PROBE_PAIRS
    assert stats.to_dict()["predicted_seconds"]["levels"] == 1.0
    index.release()
    assert gpu.released


def test_a_gpu_still_receiving_the_index_counts_the_wait(case: tuple) -> None:
    """While the index is copied to the GPU in the background, a batch the GPU would win only after the
    copy goes to the CPU; once the copy is there, to the GPU."""
    index, sources, targets, truth = case
    scheduler, _cpu, gpu = scheduler_for(
        index, truth, {"cpu": 2.0, "levels": 1.0, "frontier": 1.5}, gpu_seconds=1.0, cpu_seconds=2.0
    )
    gpu.ready_in = lambda: 5.0  # type: ignore[attr-defined]
    assert scheduler.search(sources, targets)[1].engine == "cpu"
    gpu.ready_in = lambda: 0.0  # type: ignore[attr-defined]
    assert scheduler.search(sources, targets)[1].engine == "cuda:0"


def test_a_fitted_cost_model_is_kept_for_the_machine_it_was_measured_on(
    monkeypatch: pytest.MonkeyPatch, tmp_path: object
) -> None:
    from grail_core.calibration import load_model, model_path, save_model

    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    fitted = CostModel()
    fitted.constants = {kind: tuple(2 * value for value in values) for kind, values in fitted.constants.items()}
    key = {"gpu": "a GPU", "cpu_threads": 16}
    save_model(fitted, key)
    assert model_path().parent == tmp_path
    read = CostModel()
    assert load_model(read, key) and read.fitted and read.constants == fitted.constants
    other = CostModel()
    assert not load_model(other, {"gpu": "another GPU", "cpu_threads": 16}) and not other.fitted


def test_an_index_built_or_loaded_for_the_gpu_starts_copying_it_at_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """On 'cuda' the labels' own version, built or loaded, makes its GPU engines at once, and each starts
    copying the index to its device before any batch; on 'cpu' no engine is made."""
    from grail_core import backends
    from grail_core.version import Version, load_version

    engines: list[CopyingEngine] = []

    def cuda_search_engines(hot: object) -> tuple[list[CopyingEngine], bool]:
        made = [CopyingEngine(f"cuda:{k}", np.zeros((1, 1), dtype=bool)) for k in range(2)]
        engines.extend(made)
        return made, True

    monkeypatch.setattr(backends, "cuda_search_engines", cuda_search_engines)
    labels = ReachabilityIndex.from_edges(np.array([[0, 1], [1, 2]]), backend="cpu").current().labels
    built = Version.of(labels, "cuda")
    assert [engine.copies for engine in engines] == [1, 1]
    gpu = built.search.scheduler.gpu
    assert gpu is not None and [engine.name for engine in gpu.engines] == ["cuda:0", "cuda:1"]
    built.save(tmp_path / "index")
    load_version(tmp_path / "index", backend="cuda")
    assert [engine.copies for engine in engines] == [1, 1, 1, 1]
    for version in (Version.of(labels, "cpu"), load_version(tmp_path / "index", backend="cpu")):
        answers, _ = version.query_ids(np.array([[0, 2], [2, 0]]))
        assert answers.tolist() == [True, False] and version.search.scheduler.gpu is None
    assert len(engines) == 4


@dataclass
class CopyingEngine(StubEngine):
    """A GPU engine that counts the copies of its index it was asked to start."""

    copies: int = 0
    pass_pairs: int = 64
    concurrent: bool = True

    def prefetch(self) -> None:
        self.copies += 1


@dataclass
class TouchedStub(StubEngine):
    """A GPU engine that also searches versions' updated graphs (node pairs, answered from ``truth``)."""

    touched_calls: list[int] = field(default_factory=list)

    def answer_touched(self, graph: object, sources: np.ndarray, targets: np.ndarray) -> SearchResult:
        assert graph == "graph"
        self.touched_calls.append(int(sources.size))
        return SearchResult(self.truth[sources, targets], self.name, self.seconds, "touched", rounds=4)


@pytest.mark.parametrize(("cpu_cost", "gpu_cost", "on_gpu"), [(1.0, 2.0, False), (2.0, 1.0, True)])
def test_touched_pairs_go_to_the_cheaper_engine_after_a_cpu_probe(
    cpu_cost: float, gpu_cost: float, on_gpu: bool
) -> None:
    """The pairs searched on an updated graph: a probe on the CPU walk, then the rest to the engine predicted
    cheaper; the probe's pairs keep the CPU's answers, the graph is made only for the GPU, and the GPU's
    answers go where the CPU's would."""
    rng = np.random.default_rng(1)
    truth = rng.random((50, 50)) < 0.5
    sources, targets = rng.integers(0, 50, 500), rng.integers(0, 50, 500)
    index = ReachabilityIndex.from_edges(np.arange(49), np.arange(1, 50), backend="cpu")
    gpu = TouchedStub("cuda:0", truth)
    model = FixedModel({"cpu": cpu_cost, "levels": 9.0, "frontier": gpu_cost})
    scheduler = Scheduler(index.hot, StubEngine("cpu", truth), gpu, model=model, min_pairs=0, min_touched_pairs=0)
    walked: list[int] = []
    made: list[int] = []

    def cpu(which: np.ndarray) -> np.ndarray:
        walked.append(int(which.size))
        return truth[sources[which], targets[which]]

    def graph() -> str:
        made.append(1)
        return "graph"

    answers, decision = scheduler.search_touched(graph, 0, sources, targets, cpu)
    np.testing.assert_array_equal(answers, truth[sources, targets])
    assert walked[0] == decision.probe_pairs == PROBE_PAIRS
    assert decision.predicted == {"cpu": cpu_cost, "touched": gpu_cost}
    if on_gpu:
        assert gpu.touched_calls == [500 - PROBE_PAIRS] and walked == [PROBE_PAIRS] and made == [1]
        assert (decision.engine, decision.mode) == ("cuda:0", "touched")
    else:
        assert gpu.touched_calls == [] and walked == [PROBE_PAIRS, 500 - PROBE_PAIRS] and made == []
        assert decision.engine == "cpu"


def test_touched_pairs_stay_on_the_cpu_without_a_gpu_that_searches_them() -> None:
    rng = np.random.default_rng(2)
    truth = rng.random((20, 20)) < 0.5
    sources, targets = rng.integers(0, 20, 100), rng.integers(0, 20, 100)
    index = ReachabilityIndex.from_edges(np.arange(19), np.arange(1, 20), backend="cpu")
    cheap_gpu = FixedModel({"cpu": 9.0, "levels": 0.0, "frontier": 0.0})
    for gpu in (None, StubEngine("cuda:0", truth)):  # none, or one that searches only the labels' graph
        scheduler = Scheduler(
            index.hot, StubEngine("cpu", truth), gpu, model=cheap_gpu, min_pairs=0, min_touched_pairs=0
        )
        answers, decision = scheduler.search_touched(
            lambda: "graph", 0, sources, targets, lambda which: truth[sources[which], targets[which]]
        )
        np.testing.assert_array_equal(answers, truth[sources, targets])
        assert decision.engine == "cpu" and decision.probe_pairs == 0
    # Fewer pairs than TOUCHED_MIN_PAIRS stay on the CPU, however cheap the model prices the GPU.
    small = Scheduler(index.hot, StubEngine("cpu", truth), TouchedStub("cuda:0", truth), model=cheap_gpu, min_pairs=0)
    assert small.min_touched_pairs == TOUCHED_MIN_PAIRS > sources.size
    answers, decision = small.search_touched(
        lambda: "graph", 0, sources, targets, lambda which: truth[sources[which], targets[which]]
    )
    np.testing.assert_array_equal(answers, truth[sources, targets])
    assert decision.engine == "cpu" and decision.probe_pairs == 0
    # A batch the probe answers whole leaves nothing to a GPU: no graph made for it.
    gpu = TouchedStub("cuda:0", truth)
    scheduler = Scheduler(index.hot, StubEngine("cpu", truth), gpu, model=cheap_gpu, min_pairs=0, min_touched_pairs=0)
    few = slice(0, PROBE_PAIRS)

    def no_graph() -> str:
        raise AssertionError("a graph made for no pairs")

    answers, decision = scheduler.search_touched(
        no_graph, 0, sources[few], targets[few], lambda which: truth[sources[few][which], targets[few][which]]
    )
    np.testing.assert_array_equal(answers, truth[sources[few], targets[few]])
    assert decision.engine == "cpu" and decision.probe_pairs == PROBE_PAIRS and gpu.touched_calls == []

"""Helpers shared by the benchmark scripts: dataset location, reference tables, medians, tables."""

from __future__ import annotations

import csv
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS = REPO_ROOT / "benchmarks" / "results"

# O'Reach+pDFS and GRAIL* d=2, ns per query (random / positive), from the datasets' peers_reference.md.
PEERS_NS = {
    "agrocyc_dag_uniq": ((7, 8), (21, 91)),
    "amaze_dag_uniq": ((8, 7), (30, 82)),
    "anthra_dag_uniq": ((7, 9), (21, 86)),
    "arXiv_sub_6000-1": ((183, 469), (871, 1925)),
    "ba10k2d": ((18, 74), (85, 476)),
    "ba10k5d": ((111, 560), (574, 3050)),
    "citeseer.scc": ((19, 25), (86, 699)),
    "citeseer_sub_10720": ((36, 102), (117, 403)),
    "ecoo_dag_uniq": ((6, 9), (21, 91)),
    "go_sub_6793": ((19, 40), (54, 150)),
    "human_dag_uniq": ((6, 8), (23, 91)),
    "kegg_dag_uniq": ((9, 9), (33, 85)),
    "mtbrv_dag_uniq": ((7, 8), (19, 95)),
    "nasa_dag_uniq": ((17, 16), (27, 113)),
    "pubmed_sub_9000-1": ((35, 162), (115, 661)),
    "uniprotenc_22m.scc": ((23, 23), (52, 708)),
    "vchocyc_dag_uniq": ((7, 10), (19, 88)),
}


def datasets_dir() -> Path:
    return Path(os.environ.get("GRAIL_DATASETS", REPO_ROOT.parent / "shared" / "datasets"))


def dataset_graphs(folder: Path) -> list[str]:
    graphs = [p for p in folder.glob("*.gra") if p.with_suffix(".que").exists()]
    return [p.stem for p in sorted(graphs, key=lambda p: p.stat().st_size)]


def grail_reference(folder: Path) -> dict[tuple[str, str], tuple[float, float]]:
    """(graph, 'que'|'pos.que') -> (GRAIL* best d=2 index ms, query ms)."""
    table = {}
    path = folder / "grail_reference.csv"
    if not path.exists():
        return table
    with open(path) as handle:
        for row in csv.DictReader(handle):
            if row["config"] == "best" and row["dim"] == "2":
                graph = row["graph"].removesuffix(".gra")
                kind = row["query_file"].removeprefix(graph + ".")
                table[(graph, kind)] = (float(row["construct_ms_median"]), float(row["query_ms_median"]))
    return table


def median_seconds(function: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def alternating_seconds(functions: list[Callable[[], object]], runs: int) -> list[list[float]]:
    """Seconds of every run of each function, the functions taken in turns within each run, so that a
    machine that drifts (frequency, other load) weighs on all of them alike."""
    times: list[list[float]] = [[] for _ in functions]
    for _ in range(runs):
        for function, kept in zip(functions, times, strict=True):
            start = time.perf_counter()
            function()
            kept.append(time.perf_counter() - start)
    return times


def geometric_mean(values: list[float]) -> float:
    return float(np.exp(np.mean(np.log(values)))) if values else float("nan")


def markdown_table(header: list[str], rows: list[list[object]]) -> str:
    def cell(value: object) -> str:
        return f"{value:.3g}" if isinstance(value, float) else str(value)

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(value) for value in row) + " |" for row in rows]
    return "\n".join(lines)


def write_results(out: Path, stem: str, text: str, header: list[str], rows: list[list[object]]) -> None:
    """Save a benchmark's markdown report and its table as CSV under ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{stem}.md").write_text(text)
    with open(out / f"{stem}.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)

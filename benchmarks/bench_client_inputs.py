"""The Python client's batch inputs end to end: a list of tuples against numpy arrays (str and object), a
pandas DataFrame and an Arrow table of the same pairs, string names and integer names, through a real server.

"before" is the body the client sent for a DataFrame or an object array until they were taken as arrays: every
pair as JSON (``json.dumps(array.tolist())``), timed the same way. Each input is timed in turns, ``--rounds``
times; the table gives the median and each median against the list of tuples'.

    .venv/bin/python benchmarks/bench_client_inputs.py [--pairs 200000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.bench_service import start_server  # noqa: E402
from service.client import GrailClient  # noqa: E402

RESULTS = REPO / "benchmarks" / "results"


def graph_edges(nodes: int, edges: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A random DAG's edges: each from a node to one up to 50 ids later."""
    rng = np.random.default_rng(seed)
    src = rng.integers(0, nodes, edges)
    return src, np.minimum(src + rng.integers(1, 50, edges), nodes - 1)


def as_json(client: GrailClient, graph_id: str, array: np.ndarray) -> np.ndarray:
    """The old client's body for a DataFrame or an object array: the pairs as JSON."""
    body = json.dumps({"pairs": array.tolist()}).encode()
    headers = {"Content-Type": "application/json", "Accept": "application/octet-stream; width=1"}
    response = client.http.post(f"/graphs/{graph_id}/queries", content=body, headers=headers)
    response.raise_for_status()
    return np.unpackbits(np.frombuffer(response.content, dtype=np.uint8), count=len(array)).view(np.bool_)


def inputs_of(
    client: GrailClient, graph_id: str, kind: str, pairs: list[tuple[str, str]]
) -> dict[str, Callable[[], np.ndarray]]:
    """The same pairs as each input, each a call of the client."""
    if kind == "integer names":
        typed = np.array([[int(u), int(v)] for u, v in pairs], dtype=np.int64)
        frame = pd.DataFrame({"source": typed[:, 0], "target": typed[:, 1]})
        listed = [tuple(p) for p in typed.tolist()]
        return {
            "list of tuples": lambda: client.query_batch(graph_id, listed),
            "numpy int64 (M, 2)": lambda: client.query_batch(graph_id, typed),
            "pandas DataFrame (int64)": lambda: client.query_batch(graph_id, frame),
            "Arrow table (int64)": lambda: client.query_batch(graph_id, pa.Table.from_pandas(frame)),
            "before: object array as JSON": lambda: as_json(client, graph_id, typed.astype(object)),
        }
    objects = np.array(pairs, dtype=object)
    unicode = np.array(pairs)
    frame = pd.DataFrame(pairs, columns=["source", "target"])
    table = pa.table({"source": [u for u, _ in pairs], "target": [v for _, v in pairs]})
    return {
        "list of tuples": lambda: client.query_batch(graph_id, pairs),
        "numpy str (M, 2)": lambda: client.query_batch(graph_id, unicode),
        "numpy object (M, 2)": lambda: client.query_batch(graph_id, objects),
        "pandas DataFrame (object)": lambda: client.query_batch(graph_id, frame),
        "Arrow table (string)": lambda: client.query_batch(graph_id, table),
        "before: object array as JSON": lambda: as_json(client, graph_id, objects),
    }


def measure(
    client: GrailClient, kind: str, names: Callable[[np.ndarray], list[str]], nodes: int, count: int, rounds: int
) -> list[tuple[str, str, float, float]]:
    """(kind, input, median seconds, against the list of tuples) for one graph's names."""
    src, dst = graph_edges(nodes, 4 * nodes, seed=1)
    text = "".join(f"{u} {v}\n" for u, v in zip(names(src), names(dst), strict=True)).encode()
    graph_id = client.upload(text, content_type="text/plain", wait=True)["id"]
    present = np.unique(np.concatenate([src, dst]))
    flat = names(np.random.default_rng(2).choice(present, 2 * count))
    inputs = inputs_of(client, graph_id, kind, list(zip(flat[0::2], flat[1::2], strict=True)))
    truth = None
    times: dict[str, list[float]] = {name: [] for name in inputs}
    for _ in range(rounds):
        for name, run in inputs.items():
            started = time.perf_counter()
            answers = run()
            times[name].append(time.perf_counter() - started)
            truth = answers if truth is None else truth
            assert np.array_equal(np.asarray(answers), truth), name
    base = statistics.median(times["list of tuples"])
    rows = []
    for name, seconds in times.items():
        median = statistics.median(seconds)
        rows.append((kind, name, median, median / base))
        print(f"{kind:14} {name:30} {median:8.3f} s  {median / base:5.2f}x", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pairs", type=int, default=200_000)
    parser.add_argument("--nodes", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="grail-bench-inputs-"))
    proc, url = start_server(folder / "data", folder / "server.log")
    rows = []
    try:
        with GrailClient(url, timeout=600) as client:
            for kind, names in (
                ("string names", lambda ids: [f"pkg-{i}" for i in ids.tolist()]),
                ("integer names", lambda ids: [str(i * 7919) for i in ids.tolist()]),
            ):
                rows.extend(measure(client, kind, names, args.nodes, args.pairs, args.rounds))
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    load = os.getloadavg()[0]
    lines = [
        "# Client batch inputs end to end",
        "",
        f"`benchmarks/bench_client_inputs.py --pairs {args.pairs} --rounds {args.rounds}`: {args.pairs:,} pairs "
        f"over loopback to a local server (CPU backend), {platform.machine()}, {os.cpu_count()} cores, "
        f"load average {load:.1f} at the end (other work on the machine). Medians of {args.rounds} rounds "
        "taken in turns; the ratio is against the list of tuples of the same names.",
        "",
        "| names | input | median s | vs list |",
        "|---|---|---:|---:|",
        *(f"| {kind} | {name} | {median:.3f} | {ratio:.2f}x |" for kind, name, median, ratio in rows),
        "",
    ]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "client-inputs.md").write_text("\n".join(lines))
    print(f"wrote {RESULTS / 'client-inputs.md'}")


if __name__ == "__main__":
    main()

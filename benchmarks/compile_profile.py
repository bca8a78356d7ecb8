"""Where numba's compile time goes on an empty cache: every function compiled, its specializations and seconds.

Runs the warm-up parts the test suite and the container image run (``build``: ``grail_core.warmup.warm_up_build``;
``formats``: a build worker's warm-up; ``queries``: the server's; ``paths``: paths, listings and updates), or
``updates``: the update path alone (100 edge updates one by one on a 20,000-node graph with cycles, then the
same journal folded at once), in one process, in the order given, with a new empty numba cache (``--cache`` to
reuse one: a part then compiles only what the earlier ones did not), and prints one row per function:
specializations compiled, compile CPU seconds of its own (those of the functions it called while being
compiled left out) and with them.

    python benchmarks/compile_profile.py [--parts build,formats,queries,paths] [--cache DIR] [--top 40]
    python benchmarks/compile_profile.py --parts build,updates
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

PARTS = ("build", "formats", "queries", "paths")  # the warm-up's, the default
KNOWN = (*PARTS, "updates")


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _updates() -> None:
    """100 updates one by one (removals of base edges, inside components too, and uniform additions) on a
    layered DAG of 20,000 nodes with 200 edges back (cycles), then the journal folded at once."""
    import numpy as np

    from benchmarks.bench_updates import edge_arrays, updates
    from grail_core import ReachabilityIndex
    from grail_core.synthetic import layered_dag

    n = 20_000
    src, dst = edge_arrays(*layered_dag(n, 200, 3.0, 4))
    rng = np.random.default_rng(1)
    back = rng.integers(0, n, size=(200, 2))
    src = np.concatenate([src, back.max(axis=1)])
    dst = np.concatenate([dst, back.min(axis=1)])
    journal = updates(src, dst, n, 100, "uniform", seed=2)
    index = ReachabilityIndex.from_edges(src, dst, num_nodes=n, backend="cpu")
    for add, remove in journal:
        index.update(add=add, remove=remove)
    ReachabilityIndex.from_edges(src, dst, num_nodes=n, backend="cpu").update_many(journal)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", default=",".join(PARTS), help="comma-separated, run in this order")
    parser.add_argument("--cache", type=Path, help="numba's cache folder (default: a new empty one)")
    parser.add_argument("--top", type=int, default=0, help="rows to print (0: all)")
    parser.add_argument("--signatures", action="store_true", help="print each function's signatures too")
    args = parser.parse_args(argv)
    parts = [part for part in args.parts.split(",") if part]
    unknown = set(parts) - set(KNOWN)
    if unknown:
        parser.error(f"unknown parts {sorted(unknown)} (known: {', '.join(KNOWN)})")

    # Before numba is first imported (service.main appends the sources' digest to the folder).
    cache = args.cache or Path(tempfile.mkdtemp(prefix="grail-compile-profile-"))
    os.environ["NUMBA_CACHE_DIR"] = str(cache)
    import service.main  # noqa: F401  (sets NUMBA_CACHE_DIR to the digest's folder)

    stack: list[list[object]] = []  # [name, thread CPU at start, CPU of nested compiles]
    own: dict[str, float] = defaultdict(float)
    inclusive: dict[str, float] = defaultdict(float)
    signatures: dict[str, list[tuple[str, ...]]] = defaultdict(list)
    parameters: dict[str, tuple[str, ...]] = {}
    from numba.core import event

    class Recorder(event.Listener):
        def on_start(self, ev: event.Event) -> None:
            dispatcher = ev.data["dispatcher"]
            function = dispatcher.py_func
            name = f"{function.__module__}.{function.__qualname__}"
            signatures[name].append(tuple(str(arg) for arg in ev.data["args"]))
            parameters[name] = function.__code__.co_varnames[: function.__code__.co_argcount]
            stack.append([name, time.thread_time(), 0.0])

        def on_end(self, ev: event.Event) -> None:
            name, started, nested = stack.pop()
            spent = time.thread_time() - started  # type: ignore[operator]
            inclusive[name] += spent  # type: ignore[index]
            own[name] += spent - nested  # type: ignore[index,operator]
            if stack:
                stack[-1][2] += spent  # type: ignore[operator]

    event.register("numba:compile", Recorder())
    from grail_core.warmup import warm_up_build
    from service.warmup import warm_up, warm_up_beyond
    from service.worker import warm_up_builds

    run = {
        "build": lambda: warm_up_build("cpu"),
        "formats": lambda: warm_up_builds("cpu"),
        "queries": lambda: warm_up("cpu"),
        "paths": warm_up_beyond,
        "updates": _updates,
    }
    print(f"numba cache: {os.environ['NUMBA_CACHE_DIR']}; load average {os.getloadavg()[0]:.1f} at the start")
    print("| part | process CPU (s) | wall (s) | compile CPU (s) | functions | specializations |")
    print("|---|---:|---:|---:|---:|---:|")
    totals = [0.0, 0.0]
    for part in parts:
        before_cpu, before_wall = _cpu_seconds(), time.perf_counter()
        before_compile = sum(own.values())
        before_count = {name: len(sigs) for name, sigs in signatures.items()}
        run[part]()
        cpu, wall = _cpu_seconds() - before_cpu, time.perf_counter() - before_wall
        totals[0] += cpu
        totals[1] += wall
        new = {name: len(sigs) - before_count.get(name, 0) for name, sigs in signatures.items()}
        print(
            f"| {part} | {cpu:.1f} | {wall:.1f} | {sum(own.values()) - before_compile:.1f} | "
            f"{sum(1 for n in new.values() if n)} | {sum(new.values())} |"
        )
    print(
        f"| total | {totals[0]:.1f} | {totals[1]:.1f} | {sum(own.values()):.1f} | {len(signatures)} | "
        f"{sum(len(s) for s in signatures.values())} |"
    )
    print(f"load average {os.getloadavg()[0]:.1f} at the end\n")
    print("| function | specializations | own CPU (s) | with callees (s) |")
    print("|---|---:|---:|---:|")
    rows = sorted(own, key=own.__getitem__, reverse=True)
    for name in rows[: args.top or None]:
        print(f"| `{name}` | {len(signatures[name])} | {own[name]:.2f} | {inclusive[name]:.2f} |")
    if args.signatures:
        print()
        for name in rows[: args.top or None]:
            if len(signatures[name]) > 1:
                # Only the parameters whose types differ between the specializations.
                print(f"{name}:")
                for position, parameter in enumerate(parameters[name]):
                    seen = sorted({signature[position] for signature in signatures[name] if position < len(signature)})
                    if len(seen) > 1:
                        print(f"    {parameter}: {' | '.join(seen)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

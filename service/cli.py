"""``grail``: a small command line on the client, for scripts.

grail [--url URL] [--api-key KEY] upload FILE [--name N [--replace]] [--format F] [--source-column C]
             [--target-column C] [--[no-]header] [--dims D] [--seed S] [--backend B] [--wait]
             # progress of the upload, then of the build; --replace swaps the new graph in under N once built
grail query GRAPH [FILE|-]           # 'u v' lines in, 0/1 lines out
grail list [--status failed] | grail show GRAPH | grail delete GRAPH
GRAPH is a graph's id or its name.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

import httpx
from tqdm import tqdm

from grail_core.backend_names import BACKENDS
from grail_core.formats import FORMATS

from .client import API_KEY_VARIABLE, DEFAULT_URL, GrailClient, GrailServiceError

__all__ = ["main"]


class UploadBar:
    """Bytes sent, rate and time left while a file uploads: a tqdm bar on a terminal; one line once it is sent
    otherwise (logs, CI)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.bar: tqdm[Any] | None = None
        self.started = time.perf_counter()
        self.sent = 0

    def __call__(self, sent: int, total: int) -> None:
        self.sent = sent
        if self.stream.isatty():
            if self.bar is None:
                self.bar = tqdm(
                    total=total, unit="B", unit_scale=True, unit_divisor=1024, desc="upload", file=self.stream
                )
            self.bar.update(sent - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        elif self.sent:
            seconds = max(time.perf_counter() - self.started, 1e-6)
            self.stream.write(
                f"uploaded {self.sent} bytes in {seconds:.1f} s ({self.sent / seconds / 2**20:.1f} MiB/s)\n"
            )
            self.stream.flush()
        self.bar, self.sent = None, 0


class BuildBar:
    """The build's phase and fraction done: a tqdm bar on a terminal; a line per phase otherwise."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.bar: tqdm[Any] | None = None
        self.last: tuple[str, str] | None = None

    def __call__(self, record: dict[str, Any]) -> None:
        status, phase = record["status"], record.get("phase") or ""
        fraction = record.get("progress") or (1.0 if status == "ready" else 0.0)
        if self.stream.isatty():
            if self.bar is None:
                self.bar = tqdm(
                    total=1000, desc="build", file=self.stream, bar_format="{desc}: {percentage:3.0f}%|{bar}| {elapsed}"
                )
            self.bar.set_description(f"{status} {phase}".rstrip(), refresh=False)
            self.bar.update(max(round(fraction * 1000) - self.bar.n, 0))
            if status in ("ready", "failed"):
                self.bar.close()
        elif (status, phase) != self.last:
            self.stream.write(f"{status} {phase}".rstrip() + "\n")
            self.stream.flush()
        self.last = (status, phase)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="grail", description="Client of a grail reachability server.")
    parser.add_argument("--url", default=DEFAULT_URL, help="server address (env GRAIL_URL; default %(default)s)")
    parser.add_argument(
        "--api-key", help=f"access key of a server that requires keys (env {API_KEY_VARIABLE}; never printed)"
    )
    commands = parser.add_subparsers(dest="command", required=True)

    up = commands.add_parser("upload", help="upload a graph file; prints its record as JSON")
    up.add_argument("file", type=Path)
    up.add_argument("--name", help="a name unique on the server; every command takes it as well as the id")
    up.add_argument(
        "--replace",
        action="store_true",
        help="with --name: replace the graph holding the name once the new one is built (queries answer the old "
        "one until then; a failed build leaves it)",
    )
    up.add_argument(
        "--format", choices=FORMATS, help="default: from the file name (.csv .tsv .parquet .graphml .mtx ...)"
    )
    up.add_argument("--source-column", help="edge lists and tables: the sources' column, by name or 0-based position")
    up.add_argument("--target-column", help="edge lists and tables: the targets' column, by name or 0-based position")
    header = up.add_mutually_exclusive_group()
    header.add_argument(
        "--header", action="store_true", default=None, help="the edge list's first row names its columns"
    )
    header.add_argument("--no-header", dest="header", action="store_false", help="the edge list has no header row")
    up.add_argument("--dims", type=int, default=2)
    up.add_argument("--seed", type=int, default=0)
    up.add_argument("--backend", choices=BACKENDS)
    up.add_argument("--wait", action="store_true", help="show progress until the index is ready")

    query = commands.add_parser("query", help="answer 'u v' lines (file or stdin) with 0/1 lines")
    query.add_argument("graph_id", metavar="GRAPH", help="the graph's id or name")
    query.add_argument("file", nargs="?", default="-", help="pairs file, '-' for stdin (default)")

    listing = commands.add_parser("list", help="all graphs, as JSON")
    listing.add_argument(
        "--status", action="append", choices=("queued", "building", "ready", "failed"), help="only these (repeatable)"
    )
    show = commands.add_parser("show", help="one graph's record, as JSON")
    show.add_argument("graph_id", metavar="GRAPH", help="the graph's id or name")
    delete = commands.add_parser("delete", help="delete a graph")
    delete.add_argument("graph_id", metavar="GRAPH", help="the graph's id or name")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "upload" and args.replace and not args.name:
        parser.error("--replace needs --name (the name of the graph to replace)")
    try:
        with GrailClient(args.url, timeout=600.0, api_key=args.api_key) as client:
            return _run(client, args)
    except GrailServiceError as exc:
        print(f"grail: {exc}", file=sys.stderr)
        return 1
    except (httpx.HTTPError, OSError) as exc:
        print(f"grail: {exc}", file=sys.stderr)
        return 1


def _run(client: GrailClient, args: argparse.Namespace) -> int:
    if args.command == "upload":
        upload_bar = UploadBar(sys.stderr)
        try:
            record = client.upload(
                args.file,
                name=args.name,
                replace=args.replace,
                format=args.format,
                dims=args.dims,
                seed=args.seed,
                backend=args.backend,
                source_column=args.source_column,
                target_column=args.target_column,
                header=args.header,
                on_upload=upload_bar,
            )
        finally:
            upload_bar.close()
        if args.wait:
            record = client.wait_until_ready(record["id"], poll=0.2, on_progress=BuildBar(sys.stderr))
        _print_json(record)
    elif args.command == "query":
        # The pairs go as they are (text lines) and the answers come back as lines: no parsing here.
        source = sys.stdin.buffer.read() if args.file == "-" else Path(args.file).read_bytes()
        sys.stdout.buffer.write(client.query_lines(args.graph_id, source))
    elif args.command == "list":
        _print_json(client.list(status=args.status))
    elif args.command == "show":
        _print_json(client.get(args.graph_id))
    elif args.command == "delete":
        client.delete(args.graph_id)
    return 0


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2))


if __name__ == "__main__":
    sys.exit(main())

"""``grail``: a small command line on the client, for scripts.

grail [--url URL] [--api-key KEY] upload FILE [--name N] [--format F] [--dims D] [--seed S] [--backend B] [--wait]
grail query GRAPH_ID [FILE|-]        # 'u v' lines in, 0/1 lines out
grail list [--status failed] | grail show GRAPH_ID | grail delete GRAPH_ID
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

import httpx

from grail_core.backend_names import BACKENDS

from .client import API_KEY_VARIABLE, DEFAULT_URL, GrailClient, GrailServiceError

__all__ = ["main"]


class ProgressBar:
    """One self-rewriting line on a terminal; plain lines on phase changes otherwise (logs, CI)."""

    def __init__(self, stream: TextIO, width: int = 30) -> None:
        self.stream = stream
        self.width = width
        self.tty = stream.isatty()
        self.last: tuple[str, str] | None = None

    def __call__(self, record: dict[str, Any]) -> None:
        status, phase = record["status"], record.get("phase") or ""
        fraction = record.get("progress") or (1.0 if status == "ready" else 0.0)
        if self.tty:
            filled = round(fraction * self.width)
            bar = "#" * filled + "-" * (self.width - filled)
            self.stream.write(f"\r[{bar}] {fraction:6.1%} {status} {phase:<16}")
            if status in ("ready", "failed"):
                self.stream.write("\n")
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
    up.add_argument("--name")
    up.add_argument("--format", choices=("gra", "edgelist", "json"), help="default: from the file name")
    up.add_argument("--dims", type=int, default=2)
    up.add_argument("--seed", type=int, default=0)
    up.add_argument("--backend", choices=BACKENDS)
    up.add_argument("--wait", action="store_true", help="show progress until the index is ready")

    query = commands.add_parser("query", help="answer 'u v' lines (file or stdin) with 0/1 lines")
    query.add_argument("graph_id")
    query.add_argument("file", nargs="?", default="-", help="pairs file, '-' for stdin (default)")

    listing = commands.add_parser("list", help="all graphs, as JSON")
    listing.add_argument(
        "--status", action="append", choices=("queued", "building", "ready", "failed"), help="only these (repeatable)"
    )
    show = commands.add_parser("show", help="one graph's record, as JSON")
    show.add_argument("graph_id")
    delete = commands.add_parser("delete", help="delete a graph")
    delete.add_argument("graph_id")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
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
        record = client.upload(
            args.file, name=args.name, format=args.format, dims=args.dims, seed=args.seed, backend=args.backend
        )
        if args.wait:
            record = client.wait_until_ready(record["id"], poll=0.2, on_progress=ProgressBar(sys.stderr))
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

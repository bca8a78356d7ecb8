"""``grail``: the command line of the HTTP API, on Click (docs/cli.md).

Every operation of the API is a command; each answers in words by default and as JSON with ``--json``. Files
and pairs may come from stdin (``-``, or a path such as /dev/stdin). Exit codes (``EXIT_CODES``): 0 done, 1 the
answer is no (``reachable``, ``path``, ``ready``: as ``grep`` and ``test`` say no, so that ``if grail reachable
...`` reads as it should), 2 a usage error, 3 not found (graph or node), 4 a request the server refused, 5 the
server failed, 6 the server could not be reached.

GRAPH, in every command that takes one, is a graph's id or its name.

Shell completion: ``grail completion bash`` (or zsh, fish) prints the script to source.
"""

from __future__ import annotations

import csv
import importlib.metadata
import io
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

import click
import numpy as np
from tqdm import tqdm

from grail_core.backend_names import BACKENDS
from grail_core.formats import FORMATS

from .client import API_KEY_VARIABLE, DEFAULT_URL, GrailClient, Retry
from .exceptions import GrailClientError, GrailConnectionError, GrailServiceError

__all__ = ["main", "cli", "EXIT_CODES", "UploadBar", "BuildBar"]

EXIT_CODES = {
    "ok": 0,
    "no": 1,
    "usage": 2,
    "not_found": 3,
    "refused": 4,
    "server": 5,
    "connection": 6,
}
_UNKNOWN = ("error", "false", "null")
_DELIMITERS = {"tab": "\t", "comma": ",", "space": " "}


class Answer(Exception):
    """The command's answer is no (exit code 1): not reachable, no path, not ready."""


def _version() -> str:
    try:
        return importlib.metadata.version("grail-reachability")
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"


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


# ---- output ------------------------------------------------------------------------------------------------


def _emit(as_json: bool, value: Any, words: str | Callable[[], str]) -> None:
    """JSON of ``value`` with --json, else the words."""
    if as_json:
        click.echo(json.dumps(value, indent=2))
    else:
        click.echo(words() if callable(words) else words)


def _graph_line(record: dict[str, Any]) -> str:
    stats = record.get("stats") or {}
    size = f", {stats['nodes']:,} nodes, {stats['edges']:,} edges" if "nodes" in stats else ""
    version = f", version {record['version']}" if record.get("version") is not None else ""
    phase = f" ({record['phase']})" if record["status"] in ("queued", "building") and record.get("phase") else ""
    error = f": {(record.get('error') or {}).get('message', '')}" if record["status"] == "failed" else ""
    return f"{record['id']}  {record['name']}  {record['status']}{phase}{size}{version}{error}"


def _show(record: dict[str, Any]) -> str:
    lines = [
        f"{key}: {json.dumps(value) if isinstance(value, dict | list) else value}" for key, value in record.items()
    ]
    return "\n".join(line for line in lines if not line.endswith(": None"))


def _count_of(number: int, noun: str) -> str:
    return f"{number:,} {noun}{'' if number == 1 else 's'}"


def _answer_word(answer: Any) -> str:
    return "unknown" if answer is None else ("true" if answer else "false")


# ---- input -------------------------------------------------------------------------------------------------


@contextmanager
def _regular_file(name: str) -> Iterator[Path]:
    """A path to upload: the file itself when it is a regular file, else (``-``, /dev/stdin, a pipe) what it
    holds, copied to a temporary file first (an upload declares its length before it is sent)."""
    path = Path(name)
    if name != "-" and path.is_file():
        yield path
        return
    source = sys.stdin.buffer if name == "-" else open(path, "rb")
    suffix = "".join(path.suffixes) if name != "-" else ""
    try:
        with tempfile.NamedTemporaryFile(suffix=suffix) as copy:
            shutil.copyfileobj(source, copy, 1 << 20)
            copy.flush()
            yield Path(copy.name)
    finally:
        if source is not sys.stdin.buffer:
            source.close()


def _read_text(name: str) -> str:
    data = sys.stdin.buffer.read() if name == "-" else Path(name).read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise click.UsageError(f"{name}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def read_pairs(text: str, name: str, delimiter: str, header: bool) -> list[tuple[str, str]]:
    """The pairs of a query or edge file: two columns of names, separated by tabs (.tsv), commas (.csv) or
    spaces (told from the name, else from the first line), with CSV quoting for names that hold the separator
    ("void f(int, char)"). A row of another width is a usage error with a hint."""
    sep = _DELIMITERS.get(delimiter) or _sniff(text, name)
    rows = csv.reader(io.StringIO(text), delimiter=sep, skipinitialspace=sep == " ")
    pairs: list[tuple[str, str]] = []
    for number, row in enumerate(rows, start=1):
        if sep == " ":
            row = [cell for cell in row if cell != ""]
        if not row or (number == 1 and header) or row[0].startswith("#"):
            continue
        if len(row) != 2:
            hint = (
                " (a third column, such as expected answers, is not read: cut it with `cut -f1,2`)"
                if len(row) > 2
                else ""
            )
            shown = {"\t": "tab", ",": "comma", " ": "space"}[sep]
            raise click.UsageError(
                f"{name}, line {number}: {len(row)} columns ({shown}-separated), not 2: source and target{hint}; "
                "quote a name that holds the separator, or pick another with --delimiter"
            )
        pairs.append((row[0], row[1]))
    return pairs


def _sniff(text: str, name: str) -> str:
    lowered = name.lower().removesuffix(".gz")
    if lowered.endswith(".tsv"):
        return "\t"
    if lowered.endswith(".csv"):
        return ","
    first = next((line for line in text.splitlines() if line.strip() and not line.startswith("#")), "")
    return "\t" if "\t" in first else "," if "," in first else " "


# ---- the commands ------------------------------------------------------------------------------------------

_json_option = click.option("--json", "as_json", is_flag=True, help="Answer as JSON.")
_graph_argument = click.argument("graph")
_min_version_option = click.option(
    "--min-version",
    type=click.IntRange(1),
    help="Answer from this version of the graph or a newer one (the version 'grail update' printed): "
    "read-your-writes through any replica.",
)


def _client(ctx: click.Context) -> GrailClient:
    client: GrailClient = ctx.ensure_object(dict)["client"]
    return client


@click.group(
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110},
    epilog="Exit codes: 0 done, 1 the answer is no (reachable, path, ready), 2 usage error, 3 not found (graph "
    "or node), 4 refused by the server, 5 server error, 6 server unreachable. See docs/cli.md.",
)
@click.option("--url", envvar="GRAIL_URL", default=DEFAULT_URL, show_default=True, help="Server address (GRAIL_URL).")
@click.option("--api-key", envvar=API_KEY_VARIABLE, help=f"Access key ({API_KEY_VARIABLE}); never printed.")
@click.option("--timeout", type=float, default=600.0, show_default=True, help="Seconds to wait for an answer.")
@click.option("--retries", type=click.IntRange(0), default=3, show_default=True, help="Retries of a busy server's 503.")
@click.version_option(_version(), "--version", "-V", prog_name="grail")
@click.pass_context
def cli(ctx: click.Context, url: str, api_key: str | None, timeout: float, retries: int) -> None:
    """The command line of a grail reachability server: upload graphs, ask what reaches what."""
    client = GrailClient(url, timeout=timeout, api_key=api_key, retry=Retry(attempts=retries + 1))
    ctx.ensure_object(dict)["client"] = ctx.with_resource(client)


@cli.command()
@click.argument("file")
@click.option("--name", help="A name unique on the server; every command takes it as well as the id.")
@click.option(
    "--replace",
    is_flag=True,
    help="With --name: replace the graph holding the name once the new one is built (queries answer the old one "
    "until then; a failed build leaves it).",
)
@click.option("--format", type=click.Choice(FORMATS), help="Default: from the file's name, else its content.")
@click.option("--source-column", help="Edge lists and tables: the sources' column, by name or 0-based position.")
@click.option("--target-column", help="Edge lists and tables: the targets' column, by name or 0-based position.")
@click.option("--header/--no-header", default=None, help="Whether an edge list's first row names its columns.")
@click.option("--dims", type=click.IntRange(1), default=2, show_default=True, help="GRAIL label dimensions.")
@click.option("--seed", type=click.IntRange(0), default=0, show_default=True, help="Seed of the child orders.")
@click.option("--backend", type=click.Choice(BACKENDS), help="Build backend (default: the server's).")
@click.option("--wait/--no-wait", default=True, show_default=True, help="Show the build's progress until ready.")
@_json_option
@click.pass_context
def upload(
    ctx: click.Context,
    file: str,
    name: str | None,
    replace: bool,
    format: str | None,
    source_column: str | None,
    target_column: str | None,
    header: bool | None,
    dims: int,
    seed: int,
    backend: str | None,
    wait: bool,
    as_json: bool,
) -> None:
    """Upload a graph FILE ('-' for stdin) and build its index.

    The format comes from --format, else from the file's name (.csv .tsv .json .gra .parquet .arrow .graphml
    .mtx .adjlist, .gz too), else from its content."""
    if replace and not name:
        raise click.UsageError("--replace needs --name (the name of the graph to replace)")
    client = _client(ctx)
    bar = UploadBar(sys.stderr)
    with _regular_file(file) as path:
        try:
            record = client.upload(
                path,
                name=name,
                replace=replace,
                format=format,
                dims=dims,
                seed=seed,
                backend=backend,
                source_column=source_column,
                target_column=target_column,
                header=header,
                on_upload=bar,
            )
        finally:
            bar.close()
    if wait:
        record = client.wait_until_ready(record["id"], poll=0.2, on_progress=BuildBar(sys.stderr))
    _emit(as_json, record, lambda: f"graph {_graph_line(record)}")


@cli.command("list")
@click.option(
    "--status",
    "statuses",
    multiple=True,
    type=click.Choice(["queued", "building", "ready", "failed"]),
    help="Only graphs in this status (repeatable).",
)
@_json_option
@click.pass_context
def list_graphs(ctx: click.Context, statuses: tuple[str, ...], as_json: bool) -> None:
    """All graphs, oldest first: id, name, status, size, version."""
    records = _client(ctx).list(status=list(statuses) or None)
    _emit(as_json, records, lambda: "\n".join(map(_graph_line, records)) or "no graphs")


@cli.command()
@_graph_argument
@_min_version_option
@_json_option
@click.pass_context
def show(ctx: click.Context, graph: str, min_version: int | None, as_json: bool) -> None:
    """A graph's record: status, build progress, stats, version."""
    record = _client(ctx).get(graph, min_version=min_version)
    _emit(as_json, record, lambda: _show(record))


@cli.command()
@_graph_argument
@_json_option
@click.pass_context
def delete(ctx: click.Context, graph: str, as_json: bool) -> None:
    """Forget a graph and remove its files."""
    _client(ctx).delete(graph)
    _emit(as_json, {"deleted": graph}, f"deleted graph {graph}")


def _unknown_option() -> Callable[[Any], Any]:
    return click.option(
        "--unknown",
        type=click.Choice(_UNKNOWN),
        default="error",
        show_default=True,
        help="A name the graph lacks: an error, a false answer, or an unknown one.",
    )


@cli.command()
@_graph_argument
@click.argument("source")
@click.argument("target")
@_unknown_option()
@_min_version_option
@_json_option
@click.pass_context
def reachable(
    ctx: click.Context, graph: str, source: str, target: str, unknown: str, min_version: int | None, as_json: bool
) -> None:
    """Does SOURCE reach TARGET? Exit code 0: yes, 1: no."""
    answer = _client(ctx).reachable(graph, source, target, unknown=unknown, min_version=min_version)
    verdict = "reaches" if answer else "does not reach" if answer is not None else "is unknown: cannot say it reaches"
    _emit(as_json, {"source": source, "target": target, "reachable": answer}, f"{source} {verdict} {target}")
    if not answer:
        raise Answer


@cli.command()
@_graph_argument
@click.argument("pairs", default="-")
@click.option(
    "--delimiter",
    type=click.Choice(["auto", *_DELIMITERS]),
    default="auto",
    show_default=True,
    help="Between source and target: auto is tab for .tsv, comma for .csv, else what the first line has.",
)
@click.option("--header", is_flag=True, help="The first line names the columns: skip it.")
@_unknown_option()
@_min_version_option
@_json_option
@click.pass_context
def query(
    ctx: click.Context,
    graph: str,
    pairs: str,
    delimiter: str,
    header: bool,
    unknown: str,
    min_version: int | None,
    as_json: bool,
) -> None:
    """Answer a batch: PAIRS is a file of 'source target' rows ('-', the default, for stdin).

    Rows are tab-, comma- or space-separated, with CSV quoting for names that hold the separator. The answer is
    a row per pair: source, target and true, false (or unknown, with --unknown null), tab-separated."""
    rows = read_pairs(_read_text(pairs), pairs, delimiter, header)
    client = _client(ctx)
    answers = (
        client.query_batch(graph, rows, unknown=unknown, min_version=min_version) if rows else np.zeros(0, dtype=bool)
    )
    missing = np.ma.getmaskarray(answers).tolist()
    values = [None if unknown_pair else answer for answer, unknown_pair in zip(answers.tolist(), missing, strict=True)]
    if as_json:
        listed = [{"source": u, "target": v, "reachable": a} for (u, v), a in zip(rows, values, strict=True)]
        click.echo(json.dumps(listed))
        return
    out = io.StringIO()
    writer = csv.writer(out, delimiter="\t", lineterminator="\n")
    writer.writerow(("source", "target", "reachable"))
    writer.writerows((u, v, _answer_word(a)) for (u, v), a in zip(rows, values, strict=True))
    click.echo(out.getvalue(), nl=False)


@cli.command()
@_graph_argument
@click.argument("source")
@click.argument("target")
@_min_version_option
@_json_option
@click.pass_context
def path(ctx: click.Context, graph: str, source: str, target: str, min_version: int | None, as_json: bool) -> None:
    """A shortest path from SOURCE to TARGET. Exit code 1 when there is none."""
    found = _client(ctx).path(graph, source, target, min_version=min_version)
    words = (
        f"{source} does not reach {target}: no path"
        if found is None
        else " -> ".join(map(str, found)) + f"  ({len(found) - 1} edges)"
    )
    _emit(as_json, {"source": source, "target": target, "path": found}, words)
    if found is None:
        raise Answer


def _listing_command(kind: str) -> None:
    forward = kind == "descendants"

    @_graph_argument
    @click.argument("node")
    @click.option("--offset", type=click.IntRange(0), default=0, help="Skip this many nodes of the listing.")
    @click.option("--limit", type=click.IntRange(0), help="At most this many nodes.")
    @_min_version_option
    @_json_option
    @click.pass_context
    def listing(
        ctx: click.Context,
        graph: str,
        node: str,
        offset: int,
        limit: int | None,
        min_version: int | None,
        as_json: bool,
    ) -> None:
        page = _client(ctx).descendants(
            graph, node, ancestors=not forward, offset=offset, limit=limit, min_version=min_version
        )
        if as_json:
            _emit(True, page, "")
            return
        for name in page["nodes"]:
            click.echo(name)
        shown = len(page["nodes"])
        summary = _count_of(page["count"], "node")
        told = f"{node} reaches {summary}" if forward else f"{summary} reach {node}"
        part = f" (shown: {offset + 1 if shown else offset}-{offset + shown})" if shown < page["count"] else ""
        click.echo(told + part, err=True)

    listing.__doc__ = f"The nodes {'NODE reaches' if forward else 'that reach NODE'}, one a line, in upload order."
    cli.command(kind)(listing)


_listing_command("descendants")
_listing_command("ancestors")


@cli.command()
@_graph_argument
@click.argument("node")
@click.option("--ancestors", is_flag=True, help="Count the nodes that reach NODE instead.")
@_min_version_option
@_json_option
@click.pass_context
def count(ctx: click.Context, graph: str, node: str, ancestors: bool, min_version: int | None, as_json: bool) -> None:
    """How many nodes NODE reaches (or, with --ancestors, reach it), without listing them."""
    answer = _client(ctx).count(graph, node, ancestors=ancestors, min_version=min_version)
    total = _count_of(answer["count"], "node")
    words = (
        f"{total} {'reaches' if answer['count'] == 1 else 'reach'} {node}" if ancestors else f"{node} reaches {total}"
    )
    _emit(as_json, answer, words)


@cli.command()
@_graph_argument
@click.option("--add", nargs=2, multiple=True, metavar="SOURCE TARGET", help="An edge to add (repeatable).")
@click.option("--remove", nargs=2, multiple=True, metavar="SOURCE TARGET", help="An edge to remove (repeatable).")
@click.option("--add-file", help="A file of edges to add ('-' for stdin), rows as for query.")
@click.option("--remove-file", help="A file of edges to remove, rows as for query.")
@_json_option
@click.pass_context
def update(
    ctx: click.Context,
    graph: str,
    add: tuple[tuple[str, str], ...],
    remove: tuple[tuple[str, str], ...],
    add_file: str | None,
    remove_file: str | None,
    as_json: bool,
) -> None:
    """Add and remove edges (new nodes allowed in --add): exact for every query from the answer on."""
    added = [*add, *(read_pairs(_read_text(add_file), add_file, "auto", False) if add_file else [])]
    removed = [*remove, *(read_pairs(_read_text(remove_file), remove_file, "auto", False) if remove_file else [])]
    if not added and not removed:
        raise click.UsageError("give edges with --add, --remove, --add-file or --remove-file")
    result = _client(ctx).update_edges(graph, add=added, remove=removed)
    _emit(
        as_json,
        result,
        lambda: (
            f"version {result['version']}: {_count_of(result['added'], 'edge')} added, "
            f"{_count_of(result['removed'], 'edge')} removed, {_count_of(result['new_nodes'], 'new node')} "
            f"({_count_of(result['pending_updates'], 'update')} not yet in the index's labels)"
        ),
    )


@cli.command()
@_json_option
@click.pass_context
def health(ctx: click.Context, as_json: bool) -> None:
    """Whether the server answers, and what it is."""
    answer = _client(ctx).health()
    graphs = ", ".join(f"{n} {status}" for status, n in answer.get("graphs", {}).items()) or "no graphs"
    gpu = answer.get("gpu") or "no GPU"
    _emit(
        as_json,
        answer,
        lambda: f"ok: grail {answer.get('version', '?')}, backend {answer.get('backend')} ({gpu}), {graphs}",
    )


@cli.command()
@_json_option
@click.pass_context
def ready(ctx: click.Context, as_json: bool) -> None:
    """Whether the server is ready to answer queries. Exit code 0: ready, 1: not yet."""
    answer = _client(ctx).ready()
    words = "ready" if answer["ready"] else f"not ready: kernels {answer.get('kernels')}"
    _emit(as_json, answer, words + (f" ({answer['error']})" if answer.get("error") else ""))
    if not answer["ready"]:
        raise Answer


@cli.command()
@_json_option
@click.pass_context
def version(ctx: click.Context, as_json: bool) -> None:
    """The versions of this client and of the server."""
    server = _client(ctx).health().get("version")
    answer = {"client": _version(), "server": server}
    _emit(as_json, answer, f"client {answer['client']}, server {server}")


@cli.command()
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell: str) -> None:
    """Print the completion script of SHELL: eval "$(grail completion bash)" in ~/.bashrc."""
    from click.shell_completion import get_completion_class

    completer = get_completion_class(shell)
    assert completer is not None
    click.echo(completer(cli, {}, "grail", "_GRAIL_COMPLETE").source())


def _exit_code(exc: GrailClientError) -> int:
    """A failed build (--wait) counts by its error's status: 422 for a malformed file is a refusal."""
    if isinstance(exc, GrailConnectionError):
        return EXIT_CODES["connection"]
    status = exc.status if isinstance(exc, GrailServiceError) else 500
    if status == 404:
        return EXIT_CODES["not_found"]
    return EXIT_CODES["server"] if status >= 500 or status == 424 else EXIT_CODES["refused"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``grail``; returns the exit code (see ``EXIT_CODES``)."""
    try:
        cli.main(args=list(argv) if argv is not None else None, prog_name="grail", standalone_mode=False)
    except Answer:
        return EXIT_CODES["no"]
    except click.exceptions.Exit as done:
        return done.exit_code
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.Abort:
        click.echo("grail: interrupted", err=True)
        return 130
    except GrailClientError as exc:
        click.echo(f"grail: {exc}", err=True)
        return _exit_code(exc)
    except OSError as exc:  # a local file that cannot be read
        click.echo(f"grail: {exc}", err=True)
        return EXIT_CODES["usage"]
    return EXIT_CODES["ok"]


if __name__ == "__main__":
    sys.exit(main())

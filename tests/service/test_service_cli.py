"""The ``grail`` command, run as users run it: the installed entry point in a subprocess against a real server.
Names with commas, blanks and quotes (C++ and Java signatures), stdin as ``-`` and as /dev/stdin, every
command's words and --json, and the documented exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from service.cli import EXIT_CODES

from .conftest import REPO, Server

pytestmark = pytest.mark.timeout(300)

# Java and C++ signatures: commas, blanks, quotes, a tab-free name with a double quote inside.
SIGNATURES = [
    ("main(String[] args)", "void run(int, char)"),
    ("void run(int, char)", 'print("hi, there")'),
    ('print("hi, there")', "std::map<int, std::string> load()"),
    ("std::map<int, std::string> load()", "exit"),
    ("lonely node", "lonely node"),
]


def grail() -> list[str]:
    """The ``grail`` entry point the install puts beside this Python."""
    installed = Path(sys.executable).with_name("grail")
    assert installed.is_file(), "the package is installed (make test): its grail command is tested"
    return [str(installed)]


def run(
    server: Server, *args: str, stdin: bytes | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*grail(), "--url", server.url, *args],
        cwd=REPO,
        input=stdin.decode() if stdin is not None else None,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


@pytest.fixture(scope="module")
def calls(server: Server, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The call graph of SIGNATURES, uploaded from stdin as CSV with quoted names."""
    text = "".join(f'"{u.replace(chr(34), chr(34) * 2)}","{v.replace(chr(34), chr(34) * 2)}"\n' for u, v in SIGNATURES)
    done = run(
        server, "upload", "-", "--format", "edgelist", "--no-header", "--name", "calls", "--json", stdin=text.encode()
    )
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    assert record["status"] == "ready" and record["stats"]["nodes"] == 6
    return str(record["id"])


def test_reachable_says_what_it_means_with_grep_like_exit_codes(server: Server, calls: str) -> None:
    yes = run(server, "reachable", calls, "main(String[] args)", "exit")
    assert yes.returncode == 0 and yes.stdout == "main(String[] args) reaches exit\n"
    no = run(server, "reachable", calls, "exit", "main(String[] args)")
    assert no.returncode == EXIT_CODES["no"] == 1 and "does not reach" in no.stdout
    as_json = json.loads(run(server, "reachable", calls, 'print("hi, there")', "exit", "--json").stdout)
    assert as_json == {"source": 'print("hi, there")', "target": "exit", "reachable": True}
    unknown = run(server, "reachable", calls, "nowhere", "exit")
    assert unknown.returncode == EXIT_CODES["not_found"] == 3 and "UnknownNodeError" in unknown.stderr


def test_query_reads_quoted_pairs_from_files_and_stdin(server: Server, calls: str, tmp_path: Path) -> None:
    csv_file = tmp_path / "pairs.csv"
    csv_file.write_text('"main(String[] args)","std::map<int, std::string> load()"\nexit,"void run(int, char)"\n')
    tsv_file = tmp_path / "pairs.tsv"
    tsv_file.write_text("main(String[] args)\tstd::map<int, std::string> load()\nexit\tvoid run(int, char)\n")
    expected = (
        "source\ttarget\treachable\n"
        "main(String[] args)\tstd::map<int, std::string> load()\ttrue\n"
        "exit\tvoid run(int, char)\tfalse\n"
    )
    for source in (str(csv_file), str(tsv_file)):
        done = run(server, "query", calls, source)
        assert done.returncode == 0 and done.stdout == expected, done.stderr
    piped = run(server, "query", calls, "-", stdin=tsv_file.read_bytes())
    assert piped.stdout == expected
    via_dev = run(server, "query", calls, "/dev/stdin", "--json", stdin=csv_file.read_bytes())
    assert [row["reachable"] for row in json.loads(via_dev.stdout)] == [True, False]
    # A name the graph lacks: an error listing it, or an answer.
    with_unknown = tsv_file.read_text() + "nowhere\texit\n"
    refused = run(server, "query", calls, "-", stdin=with_unknown.encode())
    assert refused.returncode == 3 and "nowhere" in refused.stderr
    answered = run(server, "query", calls, "-", "--unknown", "null", stdin=with_unknown.encode())
    assert answered.stdout.splitlines()[-1] == "nowhere\texit\tunknown"


def test_a_query_file_with_more_than_two_columns_gets_a_hint(server: Server, calls: str) -> None:
    done = run(server, "query", calls, "-", stdin=b"exit\tmain(String[] args)\t0\n")
    assert done.returncode == EXIT_CODES["usage"] == 2
    assert "line 1: 3 columns" in done.stderr and "cut -f1,2" in done.stderr and "Traceback" not in done.stderr


def test_paths_listings_counts_and_updates(server: Server, calls: str) -> None:
    path = run(server, "path", calls, "main(String[] args)", "exit")
    assert path.returncode == 0
    assert path.stdout.strip().endswith("-> exit  (4 edges)") and path.stdout.startswith("main(String[] args) ->")
    assert run(server, "path", calls, "exit", "main(String[] args)").returncode == 1
    listed = run(server, "descendants", calls, 'print("hi, there")')
    assert listed.stdout.splitlines() == ["std::map<int, std::string> load()", "exit"]
    assert 'print("hi, there") reaches 2 nodes' in listed.stderr
    above = run(server, "ancestors", calls, "exit", "--limit", "1", "--json")
    assert json.loads(above.stdout)["count"] == 4 and len(json.loads(above.stdout)["nodes"]) == 1
    assert run(server, "count", calls, "exit", "--ancestors").stdout == "4 nodes reach exit\n"
    updated = run(
        server, "update", calls, "--add", "exit", "lonely node", "--remove", "void run(int, char)", 'print("hi, there")'
    )
    assert updated.returncode == 0 and "1 edge added, 1 edge removed" in updated.stdout, updated.stderr
    version = updated.stdout.split(":")[0].removeprefix("version ")
    after = run(server, "reachable", calls, "main(String[] args)", "lonely node", "--min-version", version)
    assert after.returncode == 1 and version.isdigit(), after.stderr
    assert run(server, "reachable", calls, "std::map<int, std::string> load()", "lonely node").returncode == 0
    assert run(server, "update", calls).returncode == 2  # no edges given
    assert run(server, "count", calls, "exit", "--min-version", "0").returncode == 2  # versions start at 1


def test_graph_commands_and_server_commands(server: Server, calls: str, tmp_path: Path) -> None:
    shown = run(server, "show", calls)
    assert "status: ready" in shown.stdout and f"id: {calls}" in shown.stdout
    assert calls in run(server, "list").stdout
    assert calls in {r["id"] for r in json.loads(run(server, "list", "--status", "ready", "--json").stdout)}
    health = run(server, "health")
    assert health.returncode == 0 and health.stdout.startswith("ok: grail ")
    assert run(server, "ready").stdout == "ready\n"
    versions = json.loads(run(server, "version", "--json").stdout)
    assert versions["client"] == versions["server"]
    assert run(server, "--version").stdout.startswith("grail, version ")
    script = run(server, "completion", "bash")
    assert script.returncode == 0 and "_GRAIL_COMPLETE" in script.stdout
    env = {**os.environ, "_GRAIL_COMPLETE": "bash_complete", "COMP_WORDS": "grail que", "COMP_CWORD": "1"}
    assert "query" in subprocess.run(grail(), env=env, capture_output=True, text=True, timeout=60).stdout
    # A graph file from /dev/stdin (not a regular file: copied before its length is declared).
    piped = run(server, "upload", "/dev/stdin", "--no-wait", "--json", stdin=b"a b\nb c\n")
    assert piped.returncode == 0 and json.loads(piped.stdout)["status"] in ("queued", "building", "ready")
    assert run(server, "delete", json.loads(piped.stdout)["id"]).stdout.startswith("deleted graph")


def test_exit_codes(server: Server, calls: str, tmp_path: Path) -> None:
    assert run(server, "show", "nope").returncode == EXIT_CODES["not_found"]
    assert run(server, "list", "--status", "bad").returncode == EXIT_CODES["usage"]
    assert run(server, "nonsense").returncode == EXIT_CODES["usage"]
    assert run(server, "query", calls, str(tmp_path / "missing.tsv")).returncode == EXIT_CODES["usage"]
    dims = run(server, "upload", "-", "--format", "gra", "--source-column", "a", stdin=b"x")
    assert dims.returncode == EXIT_CODES["refused"] == 4 and "InvalidParameter" in dims.stderr
    down = subprocess.run([*grail(), "--url", "http://127.0.0.1:9", "list"], capture_output=True, text=True, timeout=60)
    assert down.returncode == EXIT_CODES["connection"] == 6 and "Traceback" not in down.stderr

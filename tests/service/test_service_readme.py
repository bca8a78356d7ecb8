"""The README's quick start, run as written against a real server: the curl, Python client and command-line
blocks, each command's output checked against the comment the README gives it. (The server is the tests' own on a
free port, standing in for `make serve`; the README's address is replaced by its.)"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.readme import Block, blocks, commands, section, shows

from .conftest import REPO, Server
from .test_service_api import grail_cli

pytestmark = pytest.mark.timeout(300)

README_URL = "http://127.0.0.1:8000"
MARK = "=== next command ==="


@pytest.fixture(scope="module")
def quick_start(server: Server) -> dict[str, Block]:
    server.wait_until_ready()
    found = blocks(section("Quick start"))
    by_kind = {
        "curl": [b for b in found if b.language == "sh" and "curl" in b.text],
        "python": [b for b in found if b.language == "python"],
        "cli": [b for b in found if b.language == "sh" and ".venv/bin/grail" in b.text],
    }
    assert all(len(kind) == 1 for kind in by_kind.values()), by_kind
    return {kind: kind_blocks[0] for kind, kind_blocks in by_kind.items()}


def run_shell(block: Block, server: Server) -> None:
    """Each command of the block in one bash, in order; each output must show what its comment says."""
    script = ["set -euo pipefail"]
    for command in commands(block):
        script += [command.line.replace(README_URL, server.url), f"printf '\\n%s\\n' '{MARK}'"]
    text = "\n".join(script).replace(".venv/bin/grail", " ".join(grail_cli()))
    env = {**os.environ, "GRAIL_URL": server.url}
    done = subprocess.run(["bash", "-c", text], cwd=REPO, capture_output=True, text=True, env=env, timeout=240)
    assert done.returncode == 0, done.stderr
    outputs = done.stdout.split(MARK)[:-1]  # what follows the last mark is its newline
    for command, output in zip(commands(block), outputs, strict=True):
        if command.expected:
            assert shows(output, command.expected), (command.line, output)


def test_the_curl_commands(quick_start: dict[str, Block], server: Server) -> None:
    run_shell(quick_start["curl"], server)


def test_the_command_line(quick_start: dict[str, Block], server: Server) -> None:
    run_shell(quick_start["cli"], server)


def test_the_python_client(quick_start: dict[str, Block], server: Server) -> None:
    code = quick_start["python"].text
    expected = [line.partition("# ")[2].strip() for line in code.splitlines() if line.strip().startswith("print(")]
    done = subprocess.run(
        [sys.executable, "-c", code.replace(README_URL, server.url)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == expected

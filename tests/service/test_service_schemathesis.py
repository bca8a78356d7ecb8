"""schemathesis, every check, against a real server: examples, coverage (negative data, unexpected methods),
fuzzing and stateful phases, bounded in examples and time. Zero failures."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import Server

pytestmark = pytest.mark.timeout(300)

CONFIG = Path(__file__).with_name("schemathesis.toml")


def test_schemathesis_finds_nothing(tmp_path: Path) -> None:
    command = shutil.which("schemathesis", path=str(Path(sys.executable).parent))
    if command is None:
        pytest.skip("schemathesis is not installed (make test installs it)")
    server = Server(tmp_path / "data", tmp_path / "server.log").start()
    try:
        server.client().upload(b"0 1\n1 2\n2 0\n2 3\n", content_type="text/plain", wait=True)
        done = subprocess.run(
            [
                command,
                "--config-file",
                str(CONFIG),
                "run",
                f"{server.url}/openapi.json",
                "--checks",
                "all",
                "--max-examples",
                "12",
                "--seed",
                "15",
                "--continue-on-failure",
                "--workers",
                "2",
                "--max-time",
                "60",
                "--no-color",
            ],
            cwd=tmp_path,  # its cache folder goes there, not into the repository
            capture_output=True,
            text=True,
            timeout=240,
        )
    finally:
        server.stop()
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert "passed" in done.stdout and "failure" not in done.stdout.rsplit("SUMMARY", 1)[-1], done.stdout[-3000:]
    assert "Traceback" not in server.log(), server.log()[-3000:]

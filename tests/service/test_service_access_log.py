"""The access log (off by default, --access-log on) and the build-phase metrics, which count no second twice."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from service.metrics import Metrics

from .conftest import Server

pytestmark = pytest.mark.timeout(180)


def test_access_log_is_off_by_default_and_on_when_asked(tmp_path: Path) -> None:
    quiet = Server(tmp_path / "quiet", tmp_path / "quiet.log").start()
    loud = Server(tmp_path / "loud", tmp_path / "loud.log", "--access-log").start()
    try:
        for server in (quiet, loud):
            probe = httpx.get(f"{server.url}/graphs/nope", headers={"X-Request-ID": "probe-1"}, timeout=60)
            assert probe.status_code == 404
    finally:
        quiet.stop()
        loud.stop()
    line = '"GET /graphs/nope HTTP/1.1" 404'
    assert line not in quiet.log()
    logged = [entry for entry in loud.log().splitlines() if line in entry]
    assert len(logged) == 1 and "[probe-1]" in logged[0], loud.log()[-2000:]


def test_build_phase_metrics_keep_phases_and_their_parts_apart() -> None:
    metrics = Metrics()
    phases = {"condense": 1.0, "labels": 2.0, "labels.orders": 0.5, "labels.intervals": 1.25, "hubs": 0.25}
    metrics.build_finished("ready", 3.5, phases)
    text = metrics.render().decode()
    by_phase = {
        line.split('"')[1]: float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("grail_build_phase_seconds_total{")
    }
    assert by_phase == {"condense": 1.0, "labels": 2.0, "hubs": 0.25}
    assert sum(by_phase.values()) <= 3.5  # the phases add up to no more than the build
    assert 'grail_build_phase_part_seconds_total{part="orders",phase="labels"} 0.5' in text
    assert 'grail_build_phase_part_seconds_total{part="intervals",phase="labels"} 1.25' in text

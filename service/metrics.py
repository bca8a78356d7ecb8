"""Prometheus metrics in the text exposition format (version 0.0.4), kept in plain dicts under one lock.

Hand-written because the handful of counters and histograms needed here do not justify a dependency.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["Metrics", "MetricsMiddleware", "CONTENT_TYPE"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_BUILD_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0)


class _Histogram:
    __slots__ = ("bounds", "counts", "total", "count")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.total = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.total += value
        self.count += 1

    def lines(self, name: str, labels: str) -> Iterable[str]:
        sep = "," if labels else ""
        cumulative = 0
        for bound, count in zip(self.bounds, self.counts[:-1], strict=True):
            cumulative += count
            yield f'{name}_bucket{{{labels}{sep}le="{bound}"}} {cumulative}'
        yield f'{name}_bucket{{{labels}{sep}le="+Inf"}} {self.count}'
        yield f"{name}_sum{{{labels}}} {self.total}"
        yield f"{name}_count{{{labels}}} {self.count}"


class Metrics:
    """Counters the routers, the middleware and the build runner update; rendered on GET /metrics."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests: dict[tuple[str, str, int], int] = defaultdict(int)
        self._latency: dict[str, _Histogram] = {}
        self._builds: dict[str, _Histogram] = {}
        self._phase_seconds: dict[str, float] = defaultdict(float)
        self._pairs: dict[str, int] = defaultdict(int)
        self._upload_bytes = 0
        self._started = time.time()

    def request(self, method: str, route: str, status: int, seconds: float) -> None:
        with self._lock:
            self._requests[(method, route, status)] += 1
            hist = self._latency.get(route)
            if hist is None:
                hist = self._latency[route] = _Histogram(_LATENCY_BUCKETS)
            hist.observe(seconds)

    def build_finished(self, result: str, seconds: float, phase_seconds: Mapping[str, float]) -> None:
        with self._lock:
            hist = self._builds.get(result)
            if hist is None:
                hist = self._builds[result] = _Histogram(_BUILD_BUCKETS)
            hist.observe(seconds)
            for phase, value in phase_seconds.items():
                self._phase_seconds[phase] += float(value)

    def queries(self, by_filter: int, by_search: int) -> None:
        with self._lock:
            self._pairs["filter"] += by_filter
            self._pairs["search"] += by_search

    def uploaded(self, nbytes: int) -> None:
        with self._lock:
            self._upload_bytes += nbytes

    def render(self, graphs_by_status: Mapping[str, int]) -> str:
        out: list[str] = []

        def family(name: str, kind: str, help_text: str) -> None:
            out.append(f"# HELP {name} {help_text}")
            out.append(f"# TYPE {name} {kind}")

        with self._lock:
            family("grail_http_requests_total", "counter", "HTTP requests by method, route template and status.")
            for (method, route, status), value in sorted(self._requests.items()):
                out.append(
                    f'grail_http_requests_total{{method="{method}",route="{_esc(route)}",status="{status}"}} {value}'
                )
            family("grail_http_request_duration_seconds", "histogram", "HTTP request latency by route template.")
            for route, hist in sorted(self._latency.items()):
                out.extend(hist.lines("grail_http_request_duration_seconds", f'route="{_esc(route)}"'))
            family("grail_build_duration_seconds", "histogram", "Index builds (read, build, save) by result.")
            for result, hist in sorted(self._builds.items()):
                out.extend(hist.lines("grail_build_duration_seconds", f'result="{result}"'))
            family("grail_build_phase_seconds_total", "counter", "Time spent in each build phase, all builds together.")
            for phase, value in sorted(self._phase_seconds.items()):
                out.append(f'grail_build_phase_seconds_total{{phase="{_esc(phase)}"}} {value}')
            family(
                "grail_query_pairs_total",
                "counter",
                "Query pairs answered, by what decided them: the label filter or a search.",
            )
            for decided_by in ("filter", "search"):
                out.append(f'grail_query_pairs_total{{decided_by="{decided_by}"}} {self._pairs[decided_by]}')
            family("grail_upload_bytes_total", "counter", "Bytes of graph uploads accepted.")
            out.append(f"grail_upload_bytes_total {self._upload_bytes}")
        family("grail_graphs", "gauge", "Graphs by status.")
        for status, value in sorted(graphs_by_status.items()):
            out.append(f'grail_graphs{{status="{status}"}} {value}')
        family("grail_process_start_time_seconds", "gauge", "Start time of the server, seconds since the epoch.")
        out.append(f"grail_process_start_time_seconds {self._started}")
        return "\n".join(out) + "\n"


def _esc(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class MetricsMiddleware:
    """Pure ASGI (no BaseHTTPMiddleware: it would cost more than a single-pair query itself).

    Labels requests by route template (``/graphs/{graph_id}/queries``), not by raw path, so that graph
    ids do not explode the label set; unmatched paths count as ``<unmatched>``. FastAPI names the route
    of its own endpoints in the scope; ``templates`` gives those of plain Starlette routes (by endpoint).
    """

    def __init__(self, app: ASGIApp, metrics: Metrics, templates: Mapping[Callable[..., Any], str]) -> None:
        self.app = app
        self.metrics = metrics
        self.templates = dict(templates)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            template = getattr(scope.get("route"), "path", None) or self.templates.get(scope.get("endpoint"))
            self.metrics.request(scope["method"], template or "<unmatched>", status, time.perf_counter() - started)

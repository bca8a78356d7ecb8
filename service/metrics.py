"""Prometheus metrics on prometheus-client: the service's counters and histograms, graphs by status, and the
library's process, platform and garbage-collector metrics, in one registry per app."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector
from starlette.routing import Router
from starlette.types import Scope

from .cache import CacheStats

__all__ = ["Metrics", "RequestMetrics", "CONTENT_TYPE", "UNMATCHED_ROUTE"]

CONTENT_TYPE = CONTENT_TYPE_LATEST
UNMATCHED_ROUTE = "<unmatched>"

_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_BUILD_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0)

# A `_created` timestamp beside every counter and histogram doubles the series for no use here.
disable_created_metrics()


class _GraphsByStatus(Collector):
    """grail_graphs{status}, read from the registry of graphs at each scrape (none before it is open)."""

    def __init__(self) -> None:
        self.source: Callable[[], Mapping[str, int]] | None = None

    def collect(self) -> Iterable[GaugeMetricFamily]:
        family = GaugeMetricFamily("grail_graphs", "Graphs by status.", labels=["status"])
        counts = self.source() if self.source is not None else {}
        for status, count in sorted(counts.items()):
            family.add_metric([status], count)
        yield family


class _VersionCache(Collector):
    """grail_cache_*: an API replica's version cache (service.cache), read at each scrape; nothing elsewhere."""

    def __init__(self) -> None:
        self.source: Callable[[], CacheStats] | None = None

    def collect(self) -> Iterable[GaugeMetricFamily | CounterMetricFamily]:
        if self.source is None:
            return
        stats = self.source()
        yield GaugeMetricFamily("grail_cache_bytes", "Memory of the loaded versions.", value=stats.held_bytes)
        yield GaugeMetricFamily("grail_cache_limit_bytes", "The bound of the version cache.", value=stats.limit_bytes)
        yield GaugeMetricFamily("grail_cache_graphs", "Graphs whose version is loaded.", value=stats.graphs)
        yield CounterMetricFamily("grail_cache_loads", "Versions loaded on use.", value=stats.loads)
        yield CounterMetricFamily(
            "grail_cache_evictions", "Versions dropped, least recently used.", value=stats.evictions
        )


class Metrics:
    """What the routers, the middleware and the build runner count; rendered on GET /metrics."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        self._graphs = _GraphsByStatus()
        self.registry.register(self._graphs)
        self._cache = _VersionCache()
        self.registry.register(self._cache)
        self._requests = Counter(
            "grail_http_requests",
            "HTTP requests by method, route template and status.",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self._latency = Histogram(
            "grail_http_request_duration_seconds",
            "HTTP request latency by route template.",
            ["route"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self._builds = Histogram(
            "grail_build_duration_seconds",
            "Index builds (read, build, save) by result.",
            ["result"],
            buckets=_BUILD_BUCKETS,
            registry=self.registry,
        )
        # Phases and their parts apart: the phases of a build add up to its time, and summing over the label of
        # either metric counts nothing twice.
        self._phase_seconds = Counter(
            "grail_build_phase_seconds",
            "Time spent in each build phase (read, condense, labels, hubs, save ...), all builds together.",
            ["phase"],
            registry=self.registry,
        )
        self._part_seconds = Counter(
            "grail_build_phase_part_seconds",
            "Time spent in the named parts of a build phase (labels: orders, and the labeling's own steps), "
            "all builds together; each part's time is also in its phase's.",
            ["phase", "part"],
            registry=self.registry,
        )
        pairs = Counter(
            "grail_query_pairs",
            "Query pairs answered, by what decided them: the label filter or a search.",
            ["decided_by"],
            registry=self.registry,
        )
        self._by_filter, self._by_search = pairs.labels("filter"), pairs.labels("search")
        self._upload_bytes = Counter("grail_upload_bytes", "Bytes of graph uploads accepted.", registry=self.registry)
        # The labelled children of each request kind, looked up once: labels() costs more than the increment.
        self._request_children: dict[tuple[str, str, int], tuple[Any, Any]] = {}

    def request(self, method: str, route: str, status: int, seconds: float) -> None:
        key = (method, route, status)
        children = self._request_children.get(key)
        if children is None:
            children = self._requests.labels(method, route, str(status)), self._latency.labels(route)
            self._request_children[key] = children
        children[0].inc()
        children[1].observe(seconds)

    def count_graphs(self, graphs_by_status: Callable[[], Mapping[str, int]]) -> None:
        """Where grail_graphs{status} is read from, once the registry of graphs is open."""
        self._graphs.source = graphs_by_status

    def count_cache(self, stats: Callable[[], CacheStats]) -> None:
        """Where grail_cache_* are read from, on an API replica."""
        self._cache.source = stats

    def build_finished(self, result: str, seconds: float, phase_seconds: Mapping[str, float]) -> None:
        """``phase_seconds``: a build's phases by name, and their parts as ``phase.part``."""
        self._builds.labels(result).observe(seconds)
        for name, value in phase_seconds.items():
            phase, _, part = name.partition(".")
            if part:
                self._part_seconds.labels(phase, part).inc(float(value))
            else:
                self._phase_seconds.labels(phase).inc(float(value))

    def queries(self, by_filter: int, by_search: int) -> None:
        self._by_filter.inc(by_filter)
        self._by_search.inc(by_search)

    def uploaded(self, nbytes: int) -> None:
        self._upload_bytes.inc(nbytes)

    def render(self) -> bytes:
        return generate_latest(self.registry)


class RequestMetrics:
    """What service.logs.RequestIdMiddleware tells of each answered request, counted (a middleware of its own
    would cost more than a single-pair query itself).

    Labels requests by route template (``/graphs/{graph_id}/queries``, ``/docs``), not by raw path, so that
    graph ids do not explode the label set; paths no route matches count as ``<unmatched>``. FastAPI's routes
    name themselves in the scope; the others (``/openapi.json``, the docs' static files, the plain routes of
    single-pair GETs and edge updates) are found by the endpoint the router put there.
    """

    def __init__(self, metrics: Metrics, router: Router) -> None:
        self.metrics = metrics
        self._router = router
        self._templates: dict[Any, str] | None = None  # endpoint -> path, made at the first request

    def __call__(self, scope: Scope, status: int, seconds: float) -> None:
        self.metrics.request(scope["method"], self._template(scope), status, seconds)

    def _template(self, scope: Scope) -> str:
        template = getattr(scope.get("route"), "path", None)
        if template:
            return str(template)
        if self._templates is None:
            self._templates = {
                getattr(route, "endpoint", None) or getattr(route, "app", None): str(getattr(route, "path", ""))
                for route in self._router.routes
            }
        return self._templates.get(scope.get("endpoint")) or UNMATCHED_ROUTE

"""The app factory: wires settings, stores, registry, build runner, metrics and routers together."""

from __future__ import annotations

import asyncio
import functools
import importlib.metadata
import inspect
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi_offline import FastAPIOffline
from starlette.middleware.cors import CORSMiddleware
from starlette.routing import Route

from grail_core.backend_names import BACKENDS
from grail_core.backends import cuda_available, device_name, resolve_backend
from grail_core.formats import FORMAT_TABLE, READING_OPTIONS

from .access import OPEN_PATHS, AccessMiddleware, load_keys
from .cache import LoadOnUseMiddleware
from .conventions import MethodsMiddleware
from .deps import ServiceState
from .errors import PROBLEM_JSON, install_error_handlers
from .freshness import MinVersionMiddleware, document_min_version
from .guards import Admission, BodyGuard
from .housekeeping import Follower, Housekeeping
from .jobs import BuildRunner
from .loader import GraphLoader
from .logs import RequestIdMiddleware
from .metrics import Metrics, RequestMetrics
from .plain_routes import PlainRoutes
from .registry import GraphRegistry
from .routers import graphs, health, problems, queries, reach, updates
from .settings import Settings
from .stores import Stores, open_stores
from .update_queue import UpdateQueue
from .warmup import CoreGate, Readiness, start_warm_up, warm_up, warm_up_beyond
from .wire import MIN_VERSION_HEADER

__all__ = ["create_app"]

log = logging.getLogger("grail.service")


# FastAPI's native OpenTelemetry support looks for configured providers on every request (a good part of a
# single-pair GET); this service exports Prometheus metrics instead. Older FastAPI has none.
_WITHOUT_TELEMETRY: dict[str, Any] = (
    {"telemetry": {"tracing": False, "metrics": False, "logs": False}}
    if "telemetry" in inspect.signature(FastAPI.__init__).parameters
    else {}
)


def _queue_rebuilds(registry: GraphRegistry, runner: BuildRunner, graph_ids: list[str]) -> None:
    """After updates: a rebuild queued for each graph that has journaled updates to fold in and none queued."""
    queued = [graph_id for graph_id in graph_ids if registry.rebuild_if_pending(graph_id)]
    if queued:
        runner.wake()


def _version() -> str:
    try:
        return importlib.metadata.version("grail-reachability")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "0+unknown"


def _backends() -> list[str]:
    """The backends an upload may ask for here: cuda only where a GPU is."""
    return [name for name in BACKENDS if name != "cuda" or cuda_available()]


def create_app(settings: Settings | None = None, stores: Stores | None = None) -> FastAPI:
    """A ready-to-serve app over ``stores`` (opened from ``settings`` at start-up when not given; grail-serve
    opens them first, to refuse a data directory another server holds in one line). At start-up every graph is
    listed at once and /health answers; each ready graph loads its version and journal in the background."""
    settings = settings or Settings.from_env()
    role = settings.role_spec
    metrics = Metrics()
    keys = load_keys(settings.api_keys_file)  # AccessKeysError (a bad keys file) stops the start here

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Fails the start-up, with the core's message, when --backend cuda finds no GPU.
        default_backend = resolve_backend(settings.backend)
        opened = stores if stores is not None else await asyncio.to_thread(open_stores, settings)
        gate = CoreGate()
        cache_bytes = settings.replica_cache_bytes if role.loads_on_use else None
        registry = GraphRegistry(opened.metadata, opened.artifacts, gate, serving=role.serves, cache_bytes=cache_bytes)
        metrics.count_graphs(registry.count_by_status)
        if registry.cache is not None:
            metrics.count_cache(registry.cache.stats)
        to_load = await asyncio.to_thread(registry.start)
        readiness = Readiness(graphs_loaded=not to_load)
        # In the background: /health answers at once; requests that need a kernel meanwhile wait at the gate
        # (seconds on a cold numba cache, well under one on a warm one); /ready says when it is done.
        start_warm_up(lambda: warm_up(settings.backend), gate, readiness, then=warm_up_beyond)
        # An API replica keeps the runner for its admission checks and wakes, and starts no lane: builders claim.
        runner = BuildRunner(registry, opened.metadata, opened.artifacts, metrics, settings, opened.server_id)
        if role.builds:
            runner.start()
        loader = GraphLoader(registry, runner, readiness)
        loader.start(to_load)
        housekeeping = Housekeeping(opened, settings.version_grace_s)
        housekeeping.start()
        follower = Follower(opened, registry, runner) if opened.metadata.shared else None
        if follower is not None:
            follower.start()
        admission = Admission(settings.max_concurrent_uploads, settings.max_batch_memory_bytes)
        updates = UpdateQueue(registry, functools.partial(_queue_rebuilds, registry, runner))
        updates.start()
        gpu = device_name() if settings.backend != "cpu" else None
        app.state.grail = ServiceState(
            settings, registry, runner, metrics, default_backend, gpu, gate, readiness, admission, updates
        )
        log.info(
            "grail service up (role %s): data dir %s, default backend %s (%s), gpu %s; %d graphs to load; "
            "compiling the query kernels",
            role.name,
            settings.data_dir,
            settings.backend,
            default_backend,
            gpu or "none",
            len(to_load),
        )
        try:
            yield
        finally:
            if follower is not None:
                follower.stop()
            loader.stop()
            updates.stop()
            runner.shutdown()
            housekeeping.stop()
            opened.close()

    # Swagger UI (/docs) and ReDoc (/redoc) with their scripts and styles served from the package, not a CDN.
    app = FastAPIOffline(
        **_WITHOUT_TELEMETRY,
        title="grail",
        summary="GRAIL reachability indexes over HTTP: upload a directed graph, ask whether u reaches v.",
        version=_version(),
        lifespan=lifespan,
    )
    install_error_handlers(app)
    if role.serves:  # a builder answers /health, /ready and /metrics only
        app.include_router(graphs.router)
        app.include_router(queries.router)
        app.include_router(reach.router)
        # Answered by PlainRoutes, innermost; in the router too, first (each FastAPI router it passes costs time),
        # for the methods they do not serve (405 with Allow) and the OpenAPI description.
        plain_routes = [
            Route(queries.REACHABLE_PATH, queries.reachable, methods=["GET"], include_in_schema=False),
            Route(updates.EDGES_PATH, updates.update_edges, methods=["POST"], include_in_schema=False),
        ]
        app.router.routes[:0] = plain_routes
    app.include_router(health.router)
    app.include_router(problems.router)
    # Innermost first: each add_middleware wraps the ones before it.
    if role.serves:
        app.add_middleware(PlainRoutes, routes=plain_routes, handlers=app.exception_handlers)
    if role.loads_on_use:
        app.add_middleware(LoadOnUseMiddleware)
    if role.serves:
        app.add_middleware(MinVersionMiddleware, timeout_s=settings.min_version_timeout_s)
    app.add_middleware(MethodsMiddleware, router=app.router)
    app.add_middleware(BodyGuard, large_body_bytes=settings.max_upload_bytes, body_timeout=settings.body_timeout)
    app.add_middleware(AccessMiddleware, keys=keys, origins=settings.cors_origin_list)
    if settings.cors_origin_list:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origin_list,
            allow_methods=["GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS"],
            allow_headers=[
                "Authorization",
                "Content-Type",
                "Content-Encoding",
                "Accept",
                "X-Request-ID",
                MIN_VERSION_HEADER,
            ],
            expose_headers=["X-Request-ID", "Location", "Retry-After", queries.VERSION_HEADER],
        )
    # Added last: outermost, so that every response and log line has the id, and every request is counted.
    app.add_middleware(RequestIdMiddleware, observe=RequestMetrics(metrics, app.router))

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            # The plain routes are described by hand (reachable) or by a FastAPI route that is not mounted (edges).
            documented = [*app.routes, *updates.router.routes] if role.serves else app.routes
            schema = get_openapi(title=app.title, version=app.version, summary=app.summary, routes=documented)
            if role.serves:
                schema["paths"][queries.REACHABLE_PATH] = queries.REACHABLE_OPENAPI
            _document(schema, bool(keys), _backends())
            document_min_version(schema)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app


# What any operation may answer beside its own statuses: the guards' and the access rules' refusals.
_COMMON_ERRORS = {
    "406": "nothing Accept allows can be answered",
    "408": "the headers or the body took too long to arrive",
    "413": "the body is over this route's limit",
    "503": "too busy (Retry-After says when to try again), or the data directory is read-only",
}
_ACCESS_ERRORS = {"401": "no access key, or an unknown one", "403": "the key's scope (or the page's origin) forbids it"}
_PROBLEM = {PROBLEM_JSON: {"schema": {"$ref": "#/components/schemas/ErrorOut"}}}


def _document(schema: dict[str, Any], keys: bool, backends: list[str]) -> None:
    """What FastAPI cannot derive: every error the guards and access rules may answer, on every operation, as
    problem details (the service's own shape, not FastAPI's HTTPValidationError); the upload's reading options
    by kind of format; the backends this server can build with."""
    errors = {**_COMMON_ERRORS, **(_ACCESS_ERRORS if keys else {"403": "a write from a web page of another origin"})}
    for path, operations in schema["paths"].items():
        for operation in operations.values():
            responses = operation["responses"]
            for status, description in errors.items():
                if path in OPEN_PATHS and status in ("401", "403"):
                    continue
                responses.setdefault(status, {"description": description})
            for status, response in responses.items():
                if status.startswith(("4", "5")) and not (path == "/ready" and status == "503"):
                    response["content"] = _PROBLEM
    for unused in ("HTTPValidationError", "ValidationError"):
        schema.get("components", {}).get("schemas", {}).pop(unused, None)
    if "/graphs" not in schema["paths"]:  # a builder's
        return
    upload = schema["paths"]["/graphs"]["post"]
    given = {p["name"]: p for p in upload["parameters"] if p["name"] in graphs.READ_PARAMETERS}
    upload["parameters"] = [p for p in upload["parameters"] if p["name"] not in given]
    upload["parameters"].append(_reading_options(given))
    for parameter in upload["parameters"]:
        if parameter["name"] == "backend":
            parameter["schema"] = {"anyOf": [{"type": "string", "enum": backends}, {"type": "null"}]}
            parameter["description"] += f" ({', '.join(backends)} on this server)"


def _reading_options(given: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The reading options as one object exploded into the query string: one shape per set of options a format
    takes (from the format table), and one without ``format`` (told from the Content-Type or the content),
    where they apply if the format found takes them."""
    properties = {
        name: {**parameter["schema"], "description": parameter.get("description", "")}
        for name, parameter in given.items()
    }
    for schema in properties.values():
        # "string or null" as FastAPI writes an optional parameter: in a query string only the string exists.
        options = [choice for choice in schema.pop("anyOf", []) if choice.get("type") != "null"]
        if options:
            schema.update(options[0])
    by_options: dict[frozenset[str], list[str]] = {}
    for row in FORMAT_TABLE.values():
        if row.readable:
            by_options.setdefault(row.options, []).append(row.name)
    shapes = [
        {
            "type": "object",
            "title": f"format={'|'.join(names)}",
            "properties": {
                "format": {"type": "string", "enum": names},
                **{name: properties[name] for name in READING_OPTIONS if name in taken},
            },
            "required": ["format"],
            "additionalProperties": False,
        }
        for taken, names in by_options.items()
    ]
    shapes.append(
        {
            "type": "object",
            "title": "format told from the Content-Type or the content",
            "properties": {name: properties[name] for name in READING_OPTIONS},
            "additionalProperties": False,
        }
    )
    return {
        "name": "read",
        "in": "query",
        "style": "form",
        "explode": True,
        "description": "how to read the file: format (overrides the Content-Type) and the options it takes; "
        "without format, the options apply where the format found takes them",
        "schema": {"oneOf": shapes},
    }

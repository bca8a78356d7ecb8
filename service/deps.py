"""FastAPI dependencies: the shared state that create_app puts on ``app.state``."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import Request

from .guards import Admission
from .jobs import BuildRunner
from .metrics import Metrics
from .registry import GraphRegistry
from .settings import Settings
from .update_queue import UpdateQueue
from .warmup import CoreGate, Readiness

__all__ = ["ServiceState", "get_state"]


@dataclass(frozen=True)
class ServiceState:
    settings: Settings
    registry: GraphRegistry
    runner: BuildRunner
    metrics: Metrics
    default_backend: str  # what the configured backend resolves to here ("auto" -> "cpu" or "cuda")
    gpu_name: str | None
    # Held around every call into grail_core; a real lock only where numba cannot run threads concurrently.
    core_gate: CoreGate
    readiness: Readiness
    admission: Admission
    updates: UpdateQueue


async def get_state(request: Request) -> ServiceState:
    # async on purpose: FastAPI runs a plain-def dependency in a worker thread, a costly hop per request.
    state: ServiceState = request.app.state.grail
    return state

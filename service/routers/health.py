"""Liveness (/health) for the container HEALTHCHECK, readiness (/ready) for load balancers, Prometheus metrics."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse

from ..conventions import known_query
from ..deps import ServiceState, get_state
from ..metrics import CONTENT_TYPE
from ..models import HealthOut, ReadyOut

__all__ = ["router"]

router = APIRouter(tags=["health"], dependencies=[Depends(known_query)])


@router.get("/health", response_model=HealthOut, summary="Liveness: the server answers; default backend, GPU")
async def health(request: Request, state: Annotated[ServiceState, Depends(get_state)]) -> HealthOut:
    return HealthOut(
        status="ok",
        version=request.app.version,
        ready=state.readiness.ready,
        backend=state.default_backend,
        gpu=state.gpu_name,
        graphs=state.registry.count_by_status(),
    )


@router.get(
    "/ready",
    response_model=ReadyOut,
    summary="Readiness: 200 once the query kernels are compiled and every graph loaded, 503 before (saying what "
    "is still loading)",
    responses={503: {"model": ReadyOut, "description": "still compiling (or the warm-up failed: see error)"}},
)
async def ready(state: Annotated[ServiceState, Depends(get_state)]) -> JSONResponse:
    readiness = state.readiness
    body = ReadyOut(
        ready=readiness.ready,
        kernels=readiness.kernels,
        kernels_seconds=readiness.kernels_seconds,
        threading_layer=readiness.threading_layer,
        graphs_loaded=readiness.graphs_loaded,
        loading=state.registry.loading(),
        error=readiness.error,
    )
    return JSONResponse(body.model_dump(mode="json"), status_code=200 if readiness.ready else 503)


@router.get(
    "/metrics", summary="Prometheus metrics (text exposition format)", responses={200: {"content": {CONTENT_TYPE: {}}}}
)
async def metrics(state: Annotated[ServiceState, Depends(get_state)]) -> Response:
    return Response(state.metrics.render(), media_type=CONTENT_TYPE)

"""Liveness for load balancers and the container HEALTHCHECK, and Prometheus metrics."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Response

from ..deps import ServiceState, get_state
from ..metrics import CONTENT_TYPE
from ..models import HealthOut

__all__ = ["router"]

router = APIRouter(tags=["health"])


@router.get("/health", response_model=HealthOut, summary="Service status, default backend, GPU")
async def health(state: Annotated[ServiceState, Depends(get_state)]) -> HealthOut:
    return HealthOut(
        status="ok", backend=state.default_backend, gpu=state.gpu_name, graphs=state.registry.count_by_status()
    )


@router.get(
    "/metrics", summary="Prometheus metrics (text format 0.0.4)", responses={200: {"content": {CONTENT_TYPE: {}}}}
)
async def metrics(state: Annotated[ServiceState, Depends(get_state)]) -> Response:
    return Response(state.metrics.render(state.registry.count_by_status()), media_type=CONTENT_TYPE)

"""The problem types of the error answers (RFC 9457): every error's ``type`` is ``/problems/KIND``, answered here
with the kind's title and status, so that a client can look a kind up on the server that answered it."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from ..conventions import known_query
from ..errors import ERRORS, KINDS, PROBLEM_NOT_FOUND, PROBLEMS_PATH, ErrorKind, ServiceError, problem_type, truncate
from ..models import ProblemList, ProblemType

__all__ = ["router"]

router = APIRouter(prefix=PROBLEMS_PATH, tags=["problems"], dependencies=[Depends(known_query)])


def _described(kind: ErrorKind) -> ProblemType:
    return ProblemType(type=problem_type(kind.name), error=kind.name, title=kind.title, status=kind.status)


@router.get("", response_model=ProblemList, summary="Every kind of error answer: its type, title and status")
async def list_problems() -> ProblemList:
    return ProblemList(problems=[_described(kind) for kind in ERRORS])


@router.get(
    "/{kind}",
    response_model=ProblemType,
    summary="One kind of error answer (an error's type URI)",
    responses={404: {"description": "no such kind"}},
)
async def get_problem(kind: str) -> ProblemType:
    found = KINDS.get(kind)
    if found is None:
        raise ServiceError(
            PROBLEM_NOT_FOUND, f"no kind of error is called {truncate(kind, 80)!r}; GET /problems lists them"
        )
    return _described(found)

"""Helpers the page and API routes share: the caller, errors as HTTP statuses, threads."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from agac.api.identity import Principal
from agac.errors import AgacError, DecisionRefused, NotAllowed, NotAnApprover, NotFound, UsageError
from agac.service.context import ServiceContext
from agac.service.guard import PRINCIPAL, SESSION_ID

__all__ = ["blocking", "caller", "context", "error_status", "session_id"]

T = TypeVar("T")


def context(request: Request) -> ServiceContext:
    ctx: ServiceContext = request.app.state.agac
    return ctx


def caller(request: Request) -> Principal:
    """The signed-in caller (the guard put it there; every route but /login has one)."""
    principal: Principal = request.scope[PRINCIPAL]
    return principal


def session_id(request: Request) -> str:
    return str(request.scope.get(SESSION_ID) or "")


async def blocking(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run a library call (it reads or writes the store) off the event loop."""
    return await run_in_threadpool(fn, *args, **kwargs)


def error_status(exc: AgacError) -> tuple[int, str]:
    """(HTTP status, code) of a refusal (T5)."""
    if isinstance(exc, NotFound):
        return 404, "not_found"
    if isinstance(exc, NotAnApprover):
        return 403, exc.code
    if isinstance(exc, NotAllowed):
        return 403, "not_allowed"
    if isinstance(exc, DecisionRefused):
        return 409, exc.code
    if isinstance(exc, UsageError):
        return 422, "invalid"
    return 500, "error"

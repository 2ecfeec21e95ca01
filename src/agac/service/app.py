"""``agac serve``'s ASGI app (docs/guarantees.md, Teams): one Starlette app, every route behind the guard.

``create_app`` takes a :class:`ServiceContext` (the project, one long-lived store, the
clock); tests build it directly and drive it over HTTP on loopback.
"""

from __future__ import annotations

from pathlib import Path

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp

from agac.service import apiv1, live, pages, review
from agac.service.context import ServiceContext
from agac.service.guard import PRINCIPAL, Guard
from agac.service.views import render

__all__ = ["STATIC", "create_app", "routes"]

STATIC = Path(__file__).parent / "static"


def routes() -> list[BaseRoute]:
    return [
        Route("/login", pages.login_form, methods=["GET"]),
        Route("/login", pages.login_submit, methods=["POST"]),
        Route("/logout", pages.logout, methods=["POST"]),
        Route("/", pages.home, methods=["GET"]),
        Route("/runs", pages.runs, methods=["GET"]),
        Route("/runs/live", live.runs_live, methods=["GET"]),
        Route("/runs/{run_id}", pages.run, methods=["GET"]),
        Route("/runs/{run_id}/live", live.run_live, methods=["GET"]),
        Route("/runs/{run_id}/answers", review.answers, methods=["GET"]),
        Route("/runs/{run_id}/answers.{format}", review.download, methods=["GET"]),
        Route("/runs/{run_id}/pilot", review.pilot, methods=["GET"]),
        Route("/compare", review.compare, methods=["GET"]),
        Route("/compare.csv", review.compare_download, methods=["GET"]),
        Route("/compare", review.compare_judge, methods=["POST"]),
        Route("/records/{run_id}/{key:path}", pages.record, methods=["GET"]),
        Route("/approvals", pages.approvals, methods=["GET"]),
        Route("/approvals/{proposal_id}/{verb}", pages.decide, methods=["POST"]),
        Route("/cost", pages.cost, methods=["GET"]),
        Route("/workers", pages.workers, methods=["GET"]),
        Route("/api/v1/runs", apiv1.runs, methods=["GET"]),
        Route("/api/v1/runs/{run_id}", apiv1.run, methods=["GET"]),
        Route("/api/v1/runs/{run_id}/events", live.api_events, methods=["GET"]),
        Route("/api/v1/approvals", apiv1.approvals, methods=["GET"]),
        Route("/api/v1/approvals/{proposal_id}/{verb}", apiv1.decide, methods=["POST"]),
        Mount("/static", app=StaticFiles(directory=STATIC), name="static"),
    ]


async def _not_found(request: Request, exc: Exception) -> Response:
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    message = exc.detail if isinstance(exc, HTTPException) else "the service failed"
    if request.url.path.startswith("/api/"):
        code = "not_found" if status == 404 else "invalid" if status < 500 else "error"
        return JSONResponse({"error": {"code": code, "message": str(message)}}, status_code=status)
    principal = request.scope.get(PRINCIPAL)
    html = (
        render(
            "error.html",
            principal=principal,
            csrf="",
            nav="",
            code=str(status),
            message=str(message),
        )
        if principal is not None
        else f"{status} {message}\n"
    )
    return (
        HTMLResponse(html, status_code=status)
        if principal is not None
        else Response(html, status_code=status, media_type="text/plain")
    )


def create_app(ctx: ServiceContext) -> ASGIApp:
    app = Starlette(routes=routes(), exception_handlers={HTTPException: _not_found})
    app.state.agac = ctx
    guarded: ASGIApp = Guard(app, ctx)
    return guarded

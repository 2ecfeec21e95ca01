"""The JSON API (T5), ``Authorization: Bearer TOKEN`` only (the guard checks it).

- ``GET /api/v1/runs`` — a page of runs (50; ``?page=``, ``?workflow=``, ``?state=``)
- ``GET /api/v1/runs/{id}`` — the §7.1 summary plus tenant
- ``GET /api/v1/runs/{id}/events`` — SSE, resumable with ``Last-Event-ID`` (service/live.py)
- ``GET /api/v1/approvals`` — pending proposals the caller may see (``?all=1``: every state)
- ``POST /api/v1/approvals/{id}/approve|reject|revise`` — bodies ``{}``, ``{"reason": …}``,
  ``{"set": {field: value}}`` → 200 with the proposal (201 with the new one for revise)

Errors are ``{"error": {"code", "message"}}``: 401 ``unauthenticated``, 403
``not_an_approver``, 404 ``not_found`` (unknown, or another tenant's), 409 with the
refusal's code (``approval_replayed``, ``approval_stale``, ``approval_expired``,
``approval_altered``, ``approval_changed``), 413 ``too_large`` (a body over
``MAX_BODY``), 422 ``invalid`` (a bad body or query, a page past ``team.MAX_PAGE``).
"""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from agac.api import team
from agac.engine.report.jsondoc import document
from agac.errors import AgacError, UsageError
from agac.service.common import blocking, caller, context, error_status

__all__ = ["approvals", "decide", "run", "runs"]

_BODY_KEYS = {"approve": set(), "reject": {"reason"}, "revise": {"set"}}
MAX_BODY = 256 * 1024
"""The largest decision body read (bytes); a larger one is 413 before it is all read."""


class _TooLarge(Exception):
    """The request's body is larger than MAX_BODY."""


def _too_large() -> JSONResponse:
    return JSONResponse(
        {"error": {"code": "too_large", "message": f"the body is larger than {MAX_BODY:,} bytes"}},
        status_code=413,
    )


async def _read_body(request: Request) -> bytes:
    """The body, read as it comes and refused once past MAX_BODY (also when the
    ``Content-Length`` says so first)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY:
        raise _TooLarge
    parts, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY:
            raise _TooLarge
        parts.append(chunk)
    return b"".join(parts)


def _refused(exc: AgacError) -> JSONResponse:
    status, code = error_status(exc)
    return JSONResponse({"error": {"code": code, "message": exc.message}}, status_code=status)


async def runs(request: Request) -> Response:
    ctx, principal = context(request), caller(request)
    q = request.query_params
    try:
        number = int(q.get("page") or 1)
        if number < 1:
            raise ValueError
    except ValueError:
        return _refused(UsageError("page must be a whole number, 1 or more"))
    try:
        listing = await blocking(
            team.runs_page,
            ctx.store,
            principal,
            page=number,
            workflow=q.get("workflow") or None,
            state=q.get("state") or None,
        )
    except AgacError as exc:
        return _refused(exc)
    return JSONResponse(listing)


async def run(request: Request) -> Response:
    ctx, principal = context(request), caller(request)
    try:
        page = await blocking(
            team.run_summary, ctx.store, ctx.project, principal, request.path_params["run_id"]
        )
    except AgacError as exc:
        return _refused(exc)
    return JSONResponse(document(page))  # the run's JSON, made at this edge


async def approvals(request: Request) -> Response:
    ctx, principal = context(request), caller(request)
    rows = await blocking(
        team.approvals_for,
        ctx.store,
        ctx.project,
        principal,
        every=request.query_params.get("all") == "1",
    )
    return JSONResponse({"approvals": rows})


async def decide(request: Request) -> Response:
    ctx, principal = context(request), caller(request)
    verb = request.path_params["verb"]
    if verb not in _BODY_KEYS:
        return _refused(UsageError(f"unknown decision {verb!r}: approve, reject or revise"))
    try:
        body = _body(await _read_body(request), verb)
    except _TooLarge:
        return _too_large()
    except UsageError as exc:
        return _refused(exc)
    try:
        doc = await blocking(
            team.decide,
            ctx.store,
            ctx.project,
            principal,
            request.path_params["proposal_id"],
            verb,
            reason=body.get("reason"),
            changes=body.get("set"),
        )
    except AgacError as exc:
        return _refused(exc)
    return JSONResponse(doc, status_code=201 if verb == "revise" else 200)


def _body(raw: bytes, verb: str) -> dict[str, Any]:
    """The decision's JSON body, checked: 422 for anything but the documented shape."""
    try:
        body = json.loads(raw.decode("utf-8")) if raw.strip() else {}
    except (UnicodeDecodeError, ValueError) as exc:
        raise UsageError(f"the body is not JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise UsageError("the body must be a JSON object")
    unknown = set(body) - _BODY_KEYS[verb]
    if unknown:
        raise UsageError(f"unknown field(s) for {verb}: {', '.join(sorted(unknown))}")
    if verb == "reject" and not (isinstance(body.get("reason"), str) and body["reason"].strip()):
        raise UsageError('reject needs {"reason": "why"} (a non-empty string)')
    if verb == "revise" and not (isinstance(body.get("set"), dict) and body["set"]):
        raise UsageError('revise needs {"set": {"field": value, ...}} (at least one field)')
    return body

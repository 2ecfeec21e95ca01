"""The web pages (T6): sign-in, runs, a run, a record's session, the approval
queue, cost over time, workers. Each page makes library calls (agac.api.team) with
the signed-in caller and renders a template; forms post back and redirect (303)."""

from __future__ import annotations

import hmac
import secrets
import urllib.parse
from typing import Any, Literal

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from agac.api import identity, team
from agac.errors import AgacError, UsageError
from agac.service.common import blocking, caller, context, error_status, session_id
from agac.service.context import ServiceContext
from agac.service.guard import cookie_value
from agac.service.views import render

__all__ = [
    "approvals",
    "cost",
    "decide",
    "home",
    "login_form",
    "login_submit",
    "logout",
    "record",
    "run",
    "runs",
    "workers",
]

SESSION_MAX_AGE = int(identity.SESSION_ABSOLUTE)
DECISIONS = {"approve": "approved", "reject": "rejected", "revise": "revised"}


def page(request: Request, name: str, status: int = 200, **values: Any) -> HTMLResponse:
    principal = caller(request)
    html = render(
        name, principal=principal, csrf=identity.csrf_token(session_id(request)), **values
    )
    return HTMLResponse(html, status_code=status)


def _local(target: str | None) -> str:
    """Where to go after signing in: a path of this service only (no open redirect)."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/runs"
    return target


# -- signing in and out --------------------------------------------------------------------------


async def login_form(
    request: Request, error: str | None = None, status: int = 200, next_path: str | None = None
) -> Response:
    ctx = context(request)
    if ctx.owner is not None:
        return _owner_login(ctx, request.query_params.get("token") or "")
    token = cookie_value(request.headers, ctx.exposure.login_cookie) or secrets.token_urlsafe(32)
    html = render(
        "login.html",
        principal=None,
        csrf=token,
        error=error,
        next=_local(next_path or request.query_params.get("next")),
    )
    response = HTMLResponse(html, status_code=status)
    response.set_cookie(
        ctx.exposure.login_cookie,
        token,
        httponly=True,
        samesite="strict",
        secure=ctx.exposure.secure,
        path="/",
    )
    return response


async def login_submit(request: Request) -> Response:
    """``/login`` form: ``username``, ``password``, ``csrf_token`` (A3, T1, T4)."""
    ctx = context(request)
    if ctx.owner is not None:
        return _owner_login(ctx, "")
    form = await request.form()
    expected = cookie_value(request.headers, ctx.exposure.login_cookie)
    sent = str(form.get("csrf_token") or "")
    next_path = str(form.get("next") or "")
    if not expected or not hmac.compare_digest(sent, expected):
        return await login_form(
            request, "The sign-in form expired; please try again.", 403, next_path
        )
    name = str(form.get("username") or "").strip()
    password = str(form.get("password") or "")
    address = request.client.host if request.client else "?"
    signed = await _throttled_sign_in(ctx, name, password, address)
    if signed == "busy":
        return await login_form(
            request,
            "Too many sign-in attempts at once; wait a moment and try again.",
            429,
            next_path,
        )
    if signed is None:
        return await login_form(
            request, "Wrong name or password, or the user is disabled.", 401, next_path
        )
    new_session, _ = signed
    response = RedirectResponse(_local(next_path), status_code=303)
    response.set_cookie(
        ctx.exposure.cookie,
        new_session,
        max_age=SESSION_MAX_AGE,
        httponly=True,
        samesite="strict",
        secure=ctx.exposure.secure,
        path="/",
    )
    response.delete_cookie(
        ctx.exposure.login_cookie,
        path="/",
        secure=ctx.exposure.secure,
        httponly=True,
        samesite="strict",
    )
    return response


ONCE_REFUSED = (
    "403 This service is for one person and opens only through the one-time link "
    "`agac serve` printed; that link works once. Restart `agac serve` for a new one, "
    "or set `identity: login` in agac.yml to let people sign in with a password.\n"
)


def _owner_login(ctx: ServiceContext, token: str) -> Response:
    """One person's sign-in: the link's token, once, becomes a session cookie."""
    assert ctx.owner is not None
    new_session = ctx.owner.redeem(token) if token else None
    if new_session is None:
        return Response(ONCE_REFUSED, status_code=403, media_type="text/plain")
    response = RedirectResponse("/runs", status_code=303)
    response.set_cookie(
        ctx.exposure.cookie,
        new_session,
        max_age=SESSION_MAX_AGE,
        httponly=True,
        samesite="strict",
        secure=ctx.exposure.secure,
        path="/",
    )
    return response


async def _throttled_sign_in(
    ctx: ServiceContext, name: str, password: str, address: str
) -> tuple[str, identity.Principal] | Literal["busy"] | None:
    """Sign in through the throttle (T1): the attempt is counted before its check, waits
    the name's delay first and, when wrong, the address's before it is answered; "busy"
    when too many attempts on the name or from the address are in flight already."""
    attempt = ctx.throttle.begin(name, address)
    if attempt is None:
        return "busy"
    signed = None
    try:
        if attempt.before:
            await ctx.sleep(attempt.before)
        signed = await blocking(
            identity.sign_in, ctx.store, name, password, clock=ctx.clock, passwords=ctx.passwords
        )
        if signed is None and attempt.after_failure:
            await ctx.sleep(attempt.after_failure)
    finally:
        ctx.throttle.end(attempt, ok=signed is not None)
    return signed


async def logout(request: Request) -> Response:
    ctx = context(request)
    if ctx.owner is not None:
        ctx.owner.end(session_id(request))
    else:
        await blocking(identity.sign_out, ctx.store, session_id(request), clock=ctx.clock)
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(
        ctx.exposure.cookie, path="/", secure=ctx.exposure.secure, httponly=True, samesite="strict"
    )
    return response


async def home(request: Request) -> Response:
    return RedirectResponse("/runs", status_code=303)


# -- runs -------------------------------------------------------------------------------------------


async def runs(request: Request) -> Response:
    ctx, principal = context(request), caller(request)
    q = request.query_params
    try:
        number = int(q.get("page") or 1)
    except ValueError:
        number = 1
    try:
        listing = await blocking(
            team.runs_page,
            ctx.store,
            principal,
            page=number,
            workflow=q.get("workflow") or None,
            state=q.get("state") or None,
        )
    except UsageError as exc:
        return _error(request, exc)
    names = await blocking(ctx.store.workflow_names, principal.tenants)
    after = await blocking(ctx.store.last_event_id)
    query = {
        k: v
        for k, v in (
            ("page", listing["page"]),
            ("workflow", listing["workflow"]),
            ("state", listing["state"]),
            ("after", after),
        )
        if v
    }
    return page(
        request,
        "runs.html",
        nav="runs",
        listing=listing,
        workflows=names,
        states=team.RUN_STATES,
        live_url="/runs/live?" + urllib.parse.urlencode(query),
        query=_pager_query(listing),
    )


def _pager_query(listing: dict[str, Any]) -> dict[str, str]:
    out = {}
    for n in (listing["page"] - 1, listing["page"] + 1):
        if 1 <= n <= listing["pages"]:
            params = {
                k: v
                for k, v in (
                    ("workflow", listing["workflow"]),
                    ("state", listing["state"]),
                    ("page", n),
                )
                if v
            }
            out["prev" if n < listing["page"] else "next"] = "/runs?" + urllib.parse.urlencode(
                params
            )
    return out


async def run(request: Request) -> Response:
    ctx, principal = context(request), caller(request)
    try:
        detail = await blocking(
            team.run_detail, ctx.store, ctx.project, principal, request.path_params["run_id"]
        )
    except AgacError as exc:
        return _error(request, exc)
    return page(
        request,
        "run.html",
        nav="runs",
        detail=detail,
        run=detail.summary.status.summary,
        page=detail.summary,
        live_url=f"/runs/{detail.summary.status.summary.run_id}/live?after={detail.last_event}",
    )


async def record(request: Request) -> Response:
    ctx, principal = context(request), caller(request)
    try:
        doc = await blocking(
            team.record_view,
            ctx.store,
            ctx.project,
            principal,
            request.path_params["run_id"],
            request.path_params["key"],
        )
    except AgacError as exc:
        return _error(request, exc)
    return page(request, "record.html", nav="runs", doc=doc)


# -- approvals ----------------------------------------------------------------------------------------


async def approvals(request: Request, error: AgacError | None = None) -> Response:
    ctx, principal = context(request), caller(request)
    every = request.query_params.get("all") == "1"
    rows = await blocking(team.approvals_for, ctx.store, ctx.project, principal, every=every)
    status = error_status(error)[0] if error is not None else 200
    done = request.query_params.get("done") if error is None else None
    return page(
        request,
        "approvals.html",
        status=status,
        nav="approvals",
        proposals=rows,
        every=every,
        error=error.message if error is not None else None,
        done=done,
    )


async def decide(request: Request) -> Response:
    """``POST /approvals/{id}/approve|reject|revise``: the signed-in user decides (T3 is
    checked by the library, now); back to the queue, or the queue with the refusal."""
    ctx, principal = context(request), caller(request)
    verb = request.path_params["verb"]
    if verb not in DECISIONS:
        return _error(request, UsageError(f"unknown decision {verb!r}"))
    form = await request.form()
    try:
        changes = None
        if verb == "revise":
            from agac.engine.approvals.decisions import parse_changes

            lines = [ln.strip() for ln in str(form.get("changes") or "").splitlines() if ln.strip()]
            changes = parse_changes(lines)
        doc = await blocking(
            team.decide,
            ctx.store,
            ctx.project,
            principal,
            request.path_params["proposal_id"],
            verb,
            reason=str(form.get("reason") or ""),
            changes=changes,
        )
    except AgacError as exc:
        return await approvals(request, exc)
    return RedirectResponse(
        "/approvals?" + urllib.parse.urlencode({"done": f"{DECISIONS[verb]} {doc['id']}"}),
        status_code=303,
    )


# -- cost and workers ---------------------------------------------------------------------------------


async def cost(request: Request) -> Response:
    ctx, principal = context(request), caller(request)
    try:
        days = min(max(int(request.query_params.get("days") or 30), 7), 365)
    except ValueError:
        days = 30
    data = await blocking(team.cost_over_time, ctx.store, principal, days=days, clock=ctx.clock)
    return page(request, "cost.html", nav="cost", data=data, days=days)


async def workers(request: Request) -> Response:
    ctx, principal = context(request), caller(request)
    rows = await blocking(team.workers_for, ctx.store, principal)
    return page(
        request,
        "workers.html",
        nav="workers",
        workers=rows,
        sql=ctx.store.dialect == "postgresql",
        now=ctx.clock(),
    )


def _error(request: Request, exc: AgacError) -> HTMLResponse:
    status, code = error_status(exc)
    return page(request, "error.html", status=status, code=code, message=exc.message, nav="")

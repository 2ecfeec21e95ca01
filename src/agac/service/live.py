"""Live views (T6) as Server-Sent Events.

The store is the only channel: the engine writes a ``progress`` event at most once a
second inside a group commit, and every other event as it happens; these streams read
the run's events after the last one they sent, a few times a second.

- Page streams (``/runs/live``, ``/runs/{id}/live``) send ``swap`` events whose data is a
  server-rendered, autoescaped HTML fragment; static/live.js replaces the element with the
  same id. A ``progress`` event redraws the bars from its counts alone; any other event,
  or a change of the run's state, re-reads the run from the store (at most once a
  second). When the run is final the stream says ``end``.
- The API stream (``/api/v1/runs/{id}/events``) sends every event as JSON with its id, so
  a client that reconnects with ``Last-Event-ID`` resumes exactly after it.

Each stream checks its caller again on every round: a session that ended, a token
revoked, a user disabled, stops the stream at once.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from agac.api import identity, team
from agac.errors import AgacError
from agac.service.common import blocking, caller, context, error_status, session_id
from agac.service.views import render, render_block
from agac.store.repository import FINAL_STATES

if TYPE_CHECKING:
    from agac.engine.report.counts import ActionSummary

__all__ = ["api_events", "run_live", "runs_live"]

REFRESH_EVERY = 1.0
"""A run's full view is re-read from the store at most this often."""
QUIET_REFRESH = 3.0
"""An open run with no progress events (worker mode) is re-read this often anyway."""
RUN_FRAGMENTS = ("headline", "bars", "failures", "batches", "cost")


def sse(event: str, data: str, event_id: int | None = None) -> str:
    lines = [f"id: {event_id}"] if event_id is not None else []
    lines.append(f"event: {event}")
    lines += [f"data: {line}" for line in data.splitlines() or [""]]
    return "\n".join(lines) + "\n\n"


def _stream(chunks: AsyncIterator[str]) -> StreamingResponse:
    return StreamingResponse(
        chunks, media_type="text/event-stream", headers={"x-accel-buffering": "no"}
    )


def _int(value: str | None) -> int:
    try:
        return max(int(value or 0), 0)
    except ValueError:
        return 0


def _session_check(request: Request) -> Callable[[], Any]:
    ctx, sid = context(request), session_id(request)
    return lambda: identity.session_principal(ctx.store, sid, clock=ctx.clock)


# -- a run's page ------------------------------------------------------------------------------


async def run_live(request: Request) -> Response:
    ctx, principal = context(request), caller(request)
    try:
        row = await blocking(team.visible_run, ctx.store, principal, request.path_params["run_id"])
    except AgacError as exc:
        return Response(exc.message, status_code=error_status(exc)[0])
    return _stream(_run_stream(request, row.id, _int(request.query_params.get("after"))))


async def _run_stream(request: Request, run_id: str, after: int) -> AsyncIterator[str]:
    ctx = context(request)
    check = _session_check(request)
    loop = asyncio.get_running_loop()
    last, refreshed, state = after, float("-inf"), None
    floor: dict[str, dict[str, Any]] = {}
    """Per action, the counts last shown: a progress event made just before a commit the
    page already read from the store never moves the bars back."""
    yield "retry: 2000\n\n"
    while True:
        principal = await blocking(check)
        if principal is None:
            yield sse("end", "signed out")
            return
        try:
            row, events = await blocking(
                team.events_after, ctx.store, principal, run_id, last, 2000
            )
        except AgacError:
            yield sse("end", "gone")
            return
        if events:
            last = events[-1]["id"]
        now = loop.time()
        final = row.state in FINAL_STATES
        moved = any(e["kind"] != "progress" for e in events) or row.state != state
        quiet = now - refreshed >= QUIET_REFRESH and not final
        if (moved and now - refreshed >= REFRESH_EVERY) or quiet or (final and moved):
            detail = await blocking(team.run_detail, ctx.store, ctx.project, principal, run_id)
            refreshed, state = now, row.state
            summary = detail.summary.status.summary
            floor = {n: _counts_of(a) for n, a in summary.actions.items()}
            html = "\n".join(
                render_block("run.html", b, detail=detail, run=summary, page=detail.summary)
                for b in RUN_FRAGMENTS
            )
            yield sse("swap", html)
        else:
            progress = [
                e for e in events if e["kind"] == "progress" and e["data"].get("scope") == "run"
            ]
            if progress:
                bars = _bars_from(progress[-1]["data"], floor)
                floor = bars
                yield sse("swap", render("run_bars.html", actions=bars, run={"run_id": run_id}))
        if final and not events and state == row.state:
            yield sse("end", row.state)
            return
        await asyncio.sleep(ctx.poll_seconds)


def _counts_of(a: ActionSummary) -> dict[str, Any]:
    """An action's counts last shown, as a progress event's counts are read."""
    return {
        "records": a.records,
        "answered": a.answered,
        "failed": a.failed,
        "skipped": a.skipped,
        "cost_usd": a.cost_usd,
    }


def _bars_from(
    data: dict[str, Any], floor: dict[str, dict[str, Any]] | None = None
) -> dict[str, dict[str, Any]]:
    """Bars from a progress event's counts, none below ``floor`` (the counts last shown)."""
    out = {}
    for name, a in (data.get("actions") or {}).items():
        low = (floor or {}).get(str(name), {})
        n = {
            k: max(int(a.get(k, 0)), int(low.get(k, 0) or 0))
            for k in ("answered", "failed", "skipped")
        }
        done = sum(n.values())
        records = max(int(a.get("records", 0)), done)
        out[str(name)] = {
            "records": records,
            **n,
            "pending": records - done,
            "cost_usd": max(float(a.get("cost_usd") or 0.0), float(low.get("cost_usd") or 0.0)),
        }
    return out


# -- the runs list ------------------------------------------------------------------------------------


async def runs_live(request: Request) -> Response:
    return _stream(_runs_stream(request))


async def _runs_stream(request: Request) -> AsyncIterator[str]:
    """The rows of the runs on the page the viewer opened, sent again when they move."""
    ctx = context(request)
    check = _session_check(request)
    q = request.query_params
    last = _int(q.get("after"))
    principal = caller(request)
    listing = await blocking(
        team.runs_page,
        ctx.store,
        principal,
        page=_int(q.get("page")) or 1,
        workflow=q.get("workflow") or None,
        state=q.get("state") or None,
    )
    ids = [r["id"] for r in listing["runs"]]
    yield "retry: 2000\n\n"
    while True:
        principal = await blocking(check)
        if principal is None:
            yield sse("end", "signed out")
            return
        changed = await blocking(ctx.store.runs_with_events_after, ids, last)
        if changed:
            last = max(changed.values())
            rows = await blocking(team.visible_runs, ctx.store, principal, sorted(changed))
            yield sse("swap", "\n".join(render("run_row.html", run=r) for r in rows))
        await asyncio.sleep(max(ctx.poll_seconds, 1.0))


# -- the API's event stream -----------------------------------------------------------------------------


async def api_events(request: Request) -> Response:
    """``GET /api/v1/runs/{id}/events``: every event of the run as SSE (``id`` = the event's
    id, ``event`` = its kind, ``data`` = the event as JSON); ``Last-Event-ID`` (or
    ``?after=``) resumes after that event. The stream ends when the run is final and
    every event was sent."""
    ctx, principal = context(request), caller(request)
    try:
        row = await blocking(team.visible_run, ctx.store, principal, request.path_params["run_id"])
    except AgacError as exc:
        status, code = error_status(exc)
        return Response(
            json.dumps({"error": {"code": code, "message": exc.message}}),
            status_code=status,
            media_type="application/json",
        )
    after = _int(request.headers.get("last-event-id") or request.query_params.get("after"))
    token = request.headers.get("authorization", "").partition(" ")[2].strip()
    return _stream(_api_stream(request, row.id, after, token))


async def _api_stream(request: Request, run_id: str, after: int, token: str) -> AsyncIterator[str]:
    ctx = context(request)
    last = after
    yield "retry: 2000\n\n"
    while True:
        principal = await blocking(identity.token_principal, ctx.store, token, clock=ctx.clock)
        if principal is None:
            return
        try:
            row, events = await blocking(
                team.events_after, ctx.store, principal, run_id, last, 1000
            )
        except AgacError:
            return
        for e in events:
            last = e["id"]
            yield sse(str(e["kind"]), json.dumps(e, default=str, ensure_ascii=False), e["id"])
        if row.state in FINAL_STATES and len(events) < 1000:
            more = await blocking(team.events_after, ctx.store, principal, run_id, last, 1)
            if not more[1]:
                return
        if len(events) < 1000:
            await asyncio.sleep(ctx.poll_seconds)

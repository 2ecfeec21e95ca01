"""The review pages (docs/tutorials/quality.md, Review in a browser): a run's answers as a table
— filtered, searched, paged on the server, downloaded as CSV or parquet — a pilot's report
and two runs compared. Each page makes one library call (:mod:`agac.api.review`) with the
signed-in caller and renders a template; the guard has checked the session (and, for the
one form that posts, its CSRF token) before any of them runs."""

from __future__ import annotations

import functools
import urllib.parse
from typing import Any, Literal

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response, StreamingResponse

from agac.api import review, team
from agac.errors import AgacError
from agac.service.common import blocking, caller, context, error_status
from agac.service.pages import page

__all__ = ["answers", "compare", "compare_download", "compare_judge", "download", "pilot"]

FILTERS = ("action", "status", "reason", "check", "q")
MEDIA = {"csv": "text/csv; charset=utf-8", "parquet": "application/vnd.apache.parquet"}


def _refused(request: Request, exc: AgacError) -> HTMLResponse:
    status, code = error_status(exc)
    return page(request, "error.html", status=status, code=code, message=exc.message, nav="")


def _number(value: str | None, default: int) -> int:
    try:
        return int(value) if value else default
    except ValueError:
        return default


def _filters(request: Request) -> dict[str, str]:
    """The table's filters as the query string has them (empty ones left out)."""
    q = request.query_params
    return {k: q[k].strip() for k in FILTERS if q.get(k, "").strip()}


async def answers(request: Request) -> Response:
    """``GET /runs/{id}/answers``: one page of an action's units, filtered."""
    ctx, principal = context(request), caller(request)
    chosen = _filters(request)
    q = request.query_params
    try:
        where = review.answer_filter(
            chosen.get("status"), chosen.get("reason"), chosen.get("check"), chosen.get("q")
        )
        table = await blocking(
            review.answer_table,
            ctx.store,
            principal,
            request.path_params["run_id"],
            action=chosen.get("action"),
            where=where,
            page=_number(q.get("page"), 1),
            per_page=_number(q.get("per_page"), review.PER_PAGE),
        )
    except AgacError as exc:
        return _refused(request, exc)
    return page(
        request,
        "answers.html",
        nav="runs",
        table=table,
        filters=chosen,
        links=_links(table, chosen),
    )


def _links(table: review.AnswerTable, chosen: dict[str, str]) -> dict[str, str]:
    """The pager's and the downloads' addresses, keeping the filters."""
    base = f"/runs/{table.run.id}/answers"
    keep = dict(chosen, action=table.action)
    if table.per_page != review.PER_PAGE:
        keep["per_page"] = str(table.per_page)
    out = {
        fmt: f"{base}.{fmt}?" + urllib.parse.urlencode(dict(chosen, action=table.action))
        for fmt in review.DOWNLOADS
    }
    for name, n in (("prev", table.page - 1), ("next", table.page + 1)):
        if 1 <= n <= table.pages:
            out[name] = base + "?" + urllib.parse.urlencode(dict(keep, page=str(n)))
    return out


async def download(request: Request) -> Response:
    """``GET /runs/{id}/answers.csv|parquet``: every unit the filters pass, as a file."""
    ctx, principal = context(request), caller(request)
    fmt = request.path_params["format"]
    chosen = _filters(request)
    try:
        where = review.answer_filter(
            chosen.get("status"), chosen.get("reason"), chosen.get("check"), chosen.get("q")
        )
        name, body = await blocking(
            review.answer_download,
            ctx.store,
            principal,
            request.path_params["run_id"],
            _format(fmt),
            action=chosen.get("action"),
            where=where,
        )
    except AgacError as exc:
        return _refused(request, exc)
    disposition = f"attachment; filename*=UTF-8''{urllib.parse.quote(name)}"
    return StreamingResponse(
        body, media_type=MEDIA[fmt], headers={"Content-Disposition": disposition}
    )


def _format(fmt: str) -> Literal["csv", "parquet"]:
    from agac.errors import NotFound

    if fmt == "csv":
        return "csv"
    if fmt == "parquet":
        return "parquet"
    raise NotFound(f"no download as {fmt!r}: answers.csv or answers.parquet")


async def pilot(request: Request) -> Response:
    """``GET /runs/{id}/pilot[?labels=FILE&min_agreement=R]``: a pilot's report — sample,
    checks, measured, projected — and, with a labels file of the project, each check's
    agreement with it (as ``agac pilot --labels``)."""
    ctx, principal = context(request), caller(request)
    q = request.query_params
    try:
        report = await blocking(
            functools.partial(
                review.pilot_view,
                labels=q.get("labels", "").strip() or None,
                min_agreement=_ratio(q.get("min_agreement")),
            ),
            ctx.store,
            ctx.project,
            principal,
            request.path_params["run_id"],
        )
    except AgacError as exc:
        return _refused(request, exc)
    return page(request, "pilot.html", nav="runs", report=report)


def _ratio(text: str | None) -> float:
    """``min_agreement`` as given (0 to 1; 0.8 when absent)."""
    from agac.errors import UsageError

    if not text:
        return 0.8
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"min_agreement must be a number from 0 to 1, got {text!r}") from None
    if not 0 <= value <= 1:
        raise UsageError(f"min_agreement must be from 0 to 1, got {text}")
    return value


async def compare(request: Request) -> Response:
    """``GET /compare?a=RUN&b=RUN[&action=A]``: two runs side by side (a form to pick them
    while one is missing); ``GET /compare?a=RUN&variants=[A,B][&action=A]``: two variants
    of an action of one run."""
    q = request.query_params
    return await _compare(request, q.get("a", "").strip(), q.get("b", "").strip(), q, None)


async def compare_judge(request: Request) -> Response:
    """``POST /compare``: the same page with a pairwise judge's verdicts (``judge``:
    provider/model, ``criteria``); verdicts are stored, so asking again costs nothing."""
    form = await request.form()
    keys = ("a", "b", "action", "judge", "criteria", "variants")
    values = {k: str(form.get(k) or "").strip() for k in keys}
    judge = (values["judge"], values["criteria"] or None) if values["judge"] else None
    return await _compare(request, values["a"], values["b"], values, judge)


async def _compare(
    request: Request, a: str, b: str, values: Any, judge: tuple[str, str | None] | None
) -> Response:
    ctx, principal = context(request), caller(request)
    doc = None
    variants = (values.get("variants") or "").strip() or None  # "*": the primary and the next
    try:
        if a and (b or variants is not None):
            doc = await blocking(
                review.compare_view,
                ctx.store,
                ctx.project,
                principal,
                a,
                b,
                action=values.get("action") or None,
                judge=judge,
                variants=variants,
            )
        recent = await blocking(team.runs_page, ctx.store, principal)
    except AgacError as exc:
        return _refused(request, exc)
    return page(
        request,
        "compare.html",
        nav="runs",
        doc=doc,
        a=a,
        b=b,
        action=values.get("action") or "",
        variants=variants,
        judge=values.get("judge") or "",
        criteria=values.get("criteria") or "",
        recent=recent["runs"],
    )


async def compare_download(request: Request) -> Response:
    """``GET /compare.csv?a=RUN&b=RUN[&action=A]``: every row that differs, as CSV."""
    ctx, principal = context(request), caller(request)
    q = request.query_params
    try:
        name, body = await blocking(
            review.compare_download,
            ctx.store,
            principal,
            q.get("a", "").strip(),
            q.get("b", "").strip(),
            action=q.get("action") or None,
            variants=(q.get("variants") or "").strip() or None,
        )
    except AgacError as exc:
        return _refused(request, exc)
    disposition = f"attachment; filename*=UTF-8''{urllib.parse.quote(name)}"
    return StreamingResponse(
        body, media_type=MEDIA["csv"], headers={"Content-Disposition": disposition}
    )

"""xAI's wire protocol, served under ``/xai/v1`` (point ``XAI_BASE_URL`` there): Chat
Completions at ``/chat/completions`` and the REST Batch API at ``/batches``.

A batch is a named container created empty (``POST /batches {name}``: the answer carries
its ``batch_id``) that stays open while requests are added to it
(``POST /batches/{id}/requests {batch_requests: [{batch_request_id, batch_request:
{chat_get_completion: <chat body>}}]}``, refused once the batch has ended). It reports no
status, only counters under ``state`` (``num_requests``, ``num_pending``, ``num_success``,
``num_error``, ``num_cancelled``), its ``create_time`` and ``expire_time`` (RFC 3339, the
expiry in wall-clock time so a client compares it with its own clock), and
``cancel_time`` once cancelled (``POST /batches/{id}:cancel``). A ``batch_end: expired``
fault leaves its unanswered requests pending past an ``expire_time`` that has gone by; a
batch whose requests were invalid is cancelled by xAI, ``cancel_by_xai_message`` saying
why. Results (``GET /batches/{id}/results``) come a page at a time (``limit``, at most
100, and ``pagination_token``): ``batch_result.response.chat_get_completion`` or
``batch_result.error`` with a gRPC status code; listing (``GET /batches``) pages the same
way, newest first.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import time
import uuid
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .faults import Target
from .handling import Rejected, created, gate, new_batch, note_cache, observe, read_json, state_of
from .openai import clone, completion, counting, error_renderer, parse_input
from .openai import routes as openai_routes
from .state import Batch, EmulatorState, ItemError

__all__ = ["XAI", "routes"]

XAI = clone("xai", "/xai/v1", line_url=False)
_error = error_renderer(XAI)
#: HTTP statuses of an item's error as the gRPC codes xAI reports.
_GRPC = {400: 3, 401: 16, 403: 7, 404: 5, 429: 8, 500: 13, 503: 14, 504: 4}
PAGE_MAX = 100
WINDOW = 86400.0


def routes() -> list[Route]:
    """xAI's chat and batch routes."""
    p = XAI.prefix
    return [
        *openai_routes(XAI),
        Route(f"{p}/batches", _create, methods=["POST"]),
        Route(f"{p}/batches", _list, methods=["GET"]),
        Route(f"{p}/batches/{{id}}:cancel", _cancel, methods=["POST"]),
        Route(f"{p}/batches/{{id}}/requests", _add, methods=["POST"]),
        Route(f"{p}/batches/{{id}}/results", _results, methods=["GET"]),
        Route(f"{p}/batches/{{id}}", _get, methods=["GET"]),
    ]


async def _create(request: Request) -> Response:
    state = state_of(request)
    body = await read_json(request, counting(state, XAI, "batch.create", _error))
    name = str(body.get("name") or "")
    fired = await gate(request, "xai", "batch.create", _error, Target(metadata={"name": name}))
    if not name:
        return _error(400, None, None, "A batch needs a 'name'.")
    batch = new_batch(
        state,
        fired,
        batch_id="batch_" + str(uuid.uuid4()),
        provider="xai",
        model="",
        items=[],
        info={"name": name, "answer": fired.answer, "reply": fired.reply},
    )
    # Batch faults apply to the requests added later (new_batch saw none yet).
    batch.answer_limit = fired.answered if fired.batch_end is not None else 0
    batch.drop = fired.drop_records
    return created(fired, JSONResponse(batch_json(state, batch)))


async def _add(request: Request) -> Response:
    state = state_of(request)
    body = await read_json(request, counting(state, XAI, "batch.add", _error))
    batch, _ = await _batch(request, "batch.add")
    if state.phase(batch) == "ended" or batch.cancel_elapsed is not None:
        return _error(400, None, None, "The batch is no longer open for requests.")
    rows = body.get("batch_requests")
    if not isinstance(rows, list) or not rows:
        return _error(400, None, None, "'batch_requests' must be a non-empty list.")
    lines = []
    for row in rows:
        row = row if isinstance(row, dict) else {}
        inner = row.get("batch_request") or {}
        line = {"custom_id": row.get("batch_request_id"), "body": inner.get("chat_get_completion")}
        lines.append(json.dumps(line))
    items, invalid, marked = parse_input(("\n".join(lines) + "\n").encode(), XAI)
    if invalid:
        return _error(400, None, None, "; ".join(str(e.get("message")) for e in invalid))
    have = {i.custom_id for i in batch.items}
    if any(i.custom_id in have for i in items):
        return _error(400, None, None, "A batch_request_id is already in the batch.")
    note_cache(request, marked)
    now = state.clock.now()
    for item in items:
        target = Target(model=item.model, metadata={}, custom_id=item.custom_id)
        own = state.faults.fire("xai", "batch.create", target, now, item_level=True)
        if own.http is not None:
            status = int(own.http["http"])
            message = own.http.get("message") or f"injected error {status}"
            item.error = ItemError(status, own.http.get("code"), message)
        item.answer_fault = own.answer or batch.info.get("answer")
        item.reply = own.reply or batch.info.get("reply")
    batch.items += items
    batch.model = batch.model or (items[0].model if items else "")
    return JSONResponse({})


async def _get(request: Request) -> Response:
    state = state_of(request)
    batch, fired = await _batch(request, "batch.get")
    observe(state, batch, fired)
    return JSONResponse(batch_json(state, batch))


async def _cancel(request: Request) -> Response:
    state = state_of(request)
    batch, fired = await _batch(request, "batch.cancel")
    if observe(state, batch, fired)[0] != "ended":
        batch.cancel(state.clock.now())
    return JSONResponse(batch_json(state, batch))


async def _list(request: Request) -> Response:
    state = state_of(request)
    await gate(request, "xai", "batch.list", _error)
    mine = [b for b in reversed(state.batches.values()) if b.provider == "xai"]
    page, token = _page(request, mine)
    return JSONResponse(
        {"batches": [batch_json(state, b) for b in page], "pagination_token": token}
    )


async def _results(request: Request) -> Response:
    state = state_of(request)
    batch, _ = await _batch(request, "batch.results")
    done = (batch.results or []) if state.phase(batch) == "ended" else []
    shown = [r for r in done if r.kind != "unanswered" or batch.final == "cancelled"]
    page, token = _page(request, shown)
    entries = []
    for result in page:
        entry: dict[str, Any] = {"batch_request_id": result.item.custom_id}
        if result.kind == "answered" and result.answer is not None:
            reply = completion(XAI, result.item.model, result.answer, state.clock.now(), "batch")
            entry["batch_result"] = {"response": {"chat_get_completion": reply}}
        elif result.error is not None:
            code = _GRPC.get(result.error.status, 2)
            entry["batch_result"] = {"error": {"code": code, "message": result.error.message}}
        else:  # cut by a cancel
            entry["batch_result"] = {"error": {"code": 1, "message": "The request was cancelled."}}
        entries.append(entry)
    return JSONResponse({"results": entries, "pagination_token": token})


def _page(request: Request, rows: list[Any]) -> tuple[list[Any], str | None]:
    """One page of ``rows`` by the request's ``limit`` and ``pagination_token`` (an
    offset here), and the token of the next page (None after the last)."""
    query = request.query_params
    size = max(1, min(PAGE_MAX, int(query.get("limit") or PAGE_MAX)))
    start = int(query.get("pagination_token") or 0)
    end = start + size
    return rows[start:end], (str(end) if end < len(rows) else None)


async def _batch(request: Request, op: str) -> tuple[Batch, Any]:
    state = state_of(request)
    batch = state.batches.get(request.path_params["id"])
    target = Target(model=batch.model if batch else None, metadata={})
    fired = await gate(request, "xai", op, _error, target)
    if batch is None or batch.provider != "xai":
        raise Rejected(_error(404, None, None, "Batch not found."))
    return batch, fired


def batch_json(state: EmulatorState, batch: Batch) -> dict[str, Any]:
    """The batch as xAI's REST API reports it: counters, not a status."""
    phase = state.phase(batch)
    total = len(batch.items)
    success = error = cancelled = 0
    pending = total - math.floor(total * batch.progress(batch.elapsed(state.clock.now())))
    # Expiry in wall-clock time (the client's clock): 24 hours from creation.
    expire = batch.created_at - state.clock.offset + WINDOW
    if phase == "ended":
        results = batch.results or []
        success = sum(r.kind == "answered" for r in results)
        error = sum(r.kind == "errored" for r in results)
        unanswered = sum(r.kind == "unanswered" for r in results)
        pending = unanswered if batch.final == "expired" else 0
        cancelled = unanswered if batch.final == "cancelled" else 0
        if batch.final == "expired":
            expire = min(expire, time.time() - 1)
    answer: dict[str, Any] = {
        "batch_id": batch.id,
        "name": batch.info["name"],
        "create_time": _iso(batch.created_at - state.clock.offset),
        "expire_time": _iso(expire),
        "create_api_key_id": "emulator",
        "state": {
            "num_requests": total,
            "num_pending": pending,
            "num_success": success,
            "num_error": error,
            "num_cancelled": cancelled,
        },
    }
    if batch.cancel_requested_at is not None:
        answer["cancel_time"] = _iso(batch.cancel_requested_at - state.clock.offset)
    if phase == "ended" and batch.final == "failed":
        answer["cancel_by_xai_message"] = "The batch's requests could not be run."
        answer["cancel_time"] = _iso(time.time())
    return answer


def _iso(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.UTC).isoformat().replace("+00:00", "Z")

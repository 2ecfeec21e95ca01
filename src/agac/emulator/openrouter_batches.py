"""OpenRouter's Batch API under ``/openrouter/api/v1/batches``: one JSON body holding the
``endpoint``, one ``model`` and an inline ``requests`` array of ``{custom_id, body}``
(``endpoint`` and ``model`` must come before ``requests``: OpenRouter stream-parses the
body), at most 5,000 requests; ``202`` with status ``validating``. The batch object goes
``validating → in_progress → finalizing → completed`` (or ``failed``, ``expired``,
``cancelling → cancelled``) with ``request_counts`` and, once ended, its ``results``
inline: OpenAI's result lines, each answer's body carrying ``usage.cost`` and the
``provider`` that served it. ``GET /batches`` lists them newest first; ``POST
/batches/{id}/cancel`` cancels. The faults of every batch API apply (a refused create,
records left out, a batch ended ``expired`` or ``failed``)."""

from __future__ import annotations

import dataclasses
import json
import uuid
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .faults import Target
from .handling import Rejected, created, gate, new_batch, note_cache, observe, read_json, state_of
from .openai import counting, error_renderer, parse_input, write_results
from .openrouter import OPENROUTER
from .state import Batch, EmulatorState

__all__ = ["MAX_REQUESTS", "routes"]

#: Batch lines are ``{custom_id, body}``: the endpoint is the batch's.
FLAVOR = dataclasses.replace(OPENROUTER, line_url=False, batch=True)
MAX_REQUESTS = 5000
_error = error_renderer(OPENROUTER)
_STATUS = {
    "queued": "validating",
    "running": "in_progress",
    "finalizing": "finalizing",
    "cancelling": "cancelling",
}


def routes() -> list[Route]:
    p = OPENROUTER.prefix
    return [
        Route(f"{p}/batches", _create, methods=["POST"]),
        Route(f"{p}/batches", _list, methods=["GET"]),
        Route(f"{p}/batches/{{id}}", _get, methods=["GET"]),
        Route(f"{p}/batches/{{id}}/cancel", _cancel, methods=["POST"]),
    ]


async def _create(request: Request) -> Response:
    state = state_of(request)
    body = await read_json(request, counting(state, FLAVOR, "batch.create", _error))
    fired = await gate(request, "openrouter", "batch.create", _error, Target())
    keys = list(json.loads(await request.body(), object_pairs_hook=lambda pairs: pairs))
    order = [k for k, _ in keys]
    if "requests" in order and any(
        k in order and order.index(k) > order.index("requests") for k in ("endpoint", "model")
    ):
        return _error(400, None, None, "`endpoint` and `model` must come before `requests`.")
    requests, model = body.get("requests"), str(body.get("model") or "")
    if (
        body.get("endpoint") != "/v1/chat/completions"
        or not model
        or not isinstance(requests, list)
    ):
        return _error(400, None, None, "`endpoint`, `model` and `requests` are required.")
    if len(requests) > MAX_REQUESTS:
        return _error(400, None, None, f"A batch holds at most {MAX_REQUESTS} requests.")
    if any(str((r.get("body") or {}).get("model") or model) != model for r in requests):
        return _error(400, None, None, "Every request must use the batch's model.")
    content = "".join(json.dumps(r) + "\n" for r in requests).encode()
    items, invalid, marked = parse_input(content, FLAVOR)
    note_cache(request, marked)
    for item in items:
        item.model = item.model or model
    batch = new_batch(
        state,
        fired,
        batch_id=f"batch-{uuid.uuid4().hex[:20]}",
        provider="openrouter",
        model=model,
        items=items,
        info={
            "endpoint": body["endpoint"],
            "served": {
                str(r.get("custom_id")): _served(r.get("body") or {}, model) for r in requests
            },
        },
    )
    batch.invalid = invalid
    return created(fired, JSONResponse(_json(state, batch, "queued", None), status_code=202))


async def _get(request: Request) -> Response:
    state = state_of(request)
    batch, fired = await _batch(request, "batch.get")
    phase, raw = observe(state, batch, fired)
    return JSONResponse(_json(state, batch, phase, raw))


async def _cancel(request: Request) -> Response:
    state = state_of(request)
    batch, fired = await _batch(request, "batch.cancel")
    phase, raw = observe(state, batch, fired)
    if phase != "ended":
        batch.cancel(state.clock.now())
    return JSONResponse(_json(state, batch, state.phase(batch), raw))


async def _list(request: Request) -> Response:
    state = state_of(request)
    await gate(request, "openrouter", "batch.list", _error)
    mine = [b for b in reversed(state.batches.values()) if b.provider == "openrouter"]
    data = [_json(state, b, state.phase(b), None, results=False) for b in mine]
    return JSONResponse({"object": "list", "data": data, "has_more": False})


async def _batch(request: Request, op: str) -> tuple[Batch, Any]:
    state = state_of(request)
    batch = state.batches.get(request.path_params["id"])
    fired = await gate(
        request, "openrouter", op, _error, Target(model=batch.model if batch else None)
    )
    if batch is None or batch.provider != "openrouter":
        raise Rejected(_error(404, None, None, "Batch not found."))
    return batch, fired


def _json(
    state: EmulatorState, batch: Batch, phase: str, raw: str | None, *, results: bool = True
) -> dict[str, Any]:
    """The batch object; an ended batch's results inline."""
    ended = phase == "ended"
    lines: list[dict[str, Any]] = []
    if ended:
        write_results(state, FLAVOR, batch)
        for key in ("output_file_id", "error_file_id"):
            stored = state.files.get(str(batch.info.get(key)))
            if stored is not None:
                lines += [json.loads(x) for x in stored.content.splitlines() if x.strip()]
    served = batch.info.get("served") or {}
    for line in lines:
        body = (line.get("response") or {}).get("body")
        if isinstance(body, dict) and "choices" in body:
            body["provider"] = served.get(str(line.get("custom_id")), "")
    answered = sum(1 for x in lines if (x.get("response") or {}).get("status_code") == 200)
    status = (batch.final or "completed") if ended else _STATUS.get(phase, "in_progress")
    return {
        "id": batch.id,
        "object": "batch",
        "endpoint": batch.info["endpoint"],
        "model": batch.model,
        "completion_window": "24h",
        "status": raw or status,
        "created_at": int(batch.created_at),
        "finalized_at": int(batch.ended_at) if batch.ended_at else None,
        "request_counts": {
            "total": len(batch.items),
            "completed": answered,
            "failed": len(lines) - answered,
        },
        "results": lines if results and ended and status == "completed" else [],
        "error": None,
        "usage": None,
    }


def _served(body: dict[str, Any], model: str) -> str:
    """Who serves a request: the first of its ``provider.order``, else the model's vendor."""
    order = (body.get("provider") or {}).get("order") or []
    return str(order[0]) if order else model.split("/")[0].title()

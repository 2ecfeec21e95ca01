"""Claude on Vertex AI, as the emulator plays it beside Gemini (:mod:`.vertex` routes here):

- ``POST /v1/projects/{p}/locations/{l}/publishers/anthropic/models/{model}:rawPredict``
  answers an Anthropic Messages body (:mod:`.anthropic`'s answer, usage and prompt cache)
  whose model is in the path: a body naming a ``model`` or whose ``anthropic_version`` is
  not ``vertex-2023-10-16`` is refused 400, as an Anthropic ``invalid_request_error``.
  Counted, faulted and billed as provider ``vertex``, op ``chat``.
- A batch prediction job whose model is ``publishers/anthropic/models/{model}`` reads
  ``{"custom_id", "request"}`` lines (the request a Vertex Claude body, checked as above;
  a line without ``custom_id`` refuses the job); its items are known by their
  ``custom_id``, which fault rules match. Its output lines are ``{"custom_id",
  "request", "status": "", "processed_time", "response": message}``, an errored one with
  ``status`` the error text ending in the Anthropic error's JSON.

States, faults (``batch_end``, ``batch_drop_records``, a ``batch.create`` 429 for the
project's quota of concurrent jobs) and the output folder are :mod:`.vertex`'s.
"""

from __future__ import annotations

import copy
import json
import uuid
from datetime import datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from . import anthropic
from .answers import answer
from .caching import anthropic_plan
from .faults import Target
from .handling import Rejected, attachments, gate, live_latency, note_cache, read_json, state_of
from .media import take_attachments
from .state import BatchItem, ItemResult

__all__ = ["VERSION", "claude_item", "claude_output_line", "is_claude_model", "raw_predict"]

VERSION = "vertex-2023-10-16"
PUBLISHER = "publishers/anthropic/models/"
PROVIDER = "vertex"


def is_claude_model(model: str) -> bool:
    """Whether a job's ``model`` (a publisher path) is one of Anthropic's."""
    return "/anthropic/models/" in f"/{model}"


def _problem(body: Any) -> str | None:
    """Why a Vertex Claude body is refused (None: it is not)."""
    if not isinstance(body, dict):
        return "request: must be an object"
    if "model" in body:
        return "model: Extra inputs are not permitted (Vertex takes the model from the path)"
    if body.get("anthropic_version") != VERSION:
        return f"anthropic_version: must be {VERSION!r}"
    if not isinstance(body.get("max_tokens"), int) or body["max_tokens"] < 1:
        return "max_tokens: Field required (an integer >= 1)"
    if not isinstance(body.get("messages"), list):
        return "messages: Field required"
    return None


def _canonical(body: dict[str, Any]) -> dict[str, Any]:
    """The body as the answer depends on it: without the version string."""
    return {k: v for k, v in body.items() if k != "anthropic_version"}


async def raw_predict(request: Request, model: str) -> Response:
    """rawPredict of Claude ``model`` (the caller checked the bearer token)."""
    state = state_of(request)
    body = await read_json(request, anthropic.error)
    fired = await gate(request, PROVIDER, "chat", anthropic.error, Target(model=model))
    problem = _problem(body)
    if problem:
        return anthropic.error(400, None, None, problem)
    await attachments(request, "anthropic", body, anthropic.error, model)
    await live_latency(request)
    canonical, prompt, schema = anthropic.decode_request(_canonical(body))
    tools, results, turns = anthropic.tool_turns(body)
    ans = answer(
        provider=PROVIDER,
        model=model,
        body=canonical,
        prompt=prompt,
        schema=schema,
        max_tokens=body["max_tokens"],
        seed=state.config.seed,
        fault=fired.answer,
        reply=fired.reply,
        tools=tools,
        results=results,
        turns=turns,
    )
    plan, markers = anthropic_plan(model, body)
    note_cache(request, markers)
    ans = state.cached(ans, plan)
    state.stats.bill(PROVIDER, model, canonical)
    return JSONResponse(anthropic.message(model, ans, "standard"))


def claude_item(model: str, line: dict[str, Any], where: str) -> BatchItem:
    """One ``{"custom_id", "request"}`` line of a Claude job as its batch item; a line the
    job cannot take is Rejected naming ``where`` (the object and line)."""
    custom_id = line.get("custom_id")
    echo = line.get("request")
    problem = "custom_id: Field required" if not custom_id else _problem(echo)
    if problem:
        raise Rejected(anthropic.error(400, None, None, f"{where}: {problem}"))
    assert isinstance(echo, dict)
    body = copy.deepcopy(echo)
    take_attachments("anthropic", body)  # the batch keeps descriptors, not the bytes
    canonical, prompt, schema = anthropic.decode_request(_canonical(body))
    plan, _ = anthropic_plan(model, body)
    tools, results, turns = anthropic.tool_turns(body)
    return BatchItem(
        custom_id=str(custom_id),
        model=model,
        canonical=canonical,
        prompt=prompt,
        schema=schema,
        max_tokens=body["max_tokens"],
        cache=plan,
        tools=tools,
        results=results,
        turns=turns,
        extra={"request": echo, "claude": True},
    )


def claude_output_line(result: ItemResult, when: datetime) -> dict[str, Any]:
    """An output line of a Claude job: the message, or the error as ``status`` text."""
    item = result.item
    line: dict[str, Any] = {
        "custom_id": item.custom_id,
        "request": item.extra["request"],
        "status": "",
        "processed_time": when.isoformat().replace("+00:00", "Z"),
    }
    if result.answer is not None:
        line["response"] = anthropic.message(item.model, result.answer, "batch")
        return line
    e = result.error
    status = e.status if e is not None else 500
    kind = {400: "invalid_request_error", 429: "rate_limit_error"}.get(status, "api_error")
    body = {
        "type": "error",
        "error": {"type": kind, "message": e.message if e is not None else "the request failed"},
        "request_id": "req_" + uuid.uuid4().hex[:24],
    }
    line["status"] = f"Bad Request: {json.dumps(body)}"
    return line

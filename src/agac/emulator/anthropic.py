"""Anthropic's wire protocol: Messages, Message Batches and one model's ``ModelInfo``.

Shapes follow the ``anthropic`` SDK's types. Structured output is read from
``output_config.format`` (``{"type": "json_schema", "schema": …}``; the older beta
``output_format`` works too). A batch is ``in_progress`` until it ``ended`` — its only
terminal status — with ``request_counts.processing`` equal to the total until then;
cancelling shows ``canceling`` (one L, as Anthropic spells it, also ``canceled`` items).
``results_url`` is an absolute URL on the emulator itself: the SDK follows it as given.
``usage.input_tokens`` excludes cache reads and writes, as Anthropic reports it; they
come from the prompt cache (:mod:`.caching`): only blocks marked ``cache_control`` cache.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from datetime import UTC, datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .answers import Answer, answer
from .caching import anthropic_plan
from .faults import Target
from .handling import (
    attachments,
    created,
    gate,
    live_latency,
    new_batch,
    note_cache,
    observe,
    read_json,
    retry_headers,
    state_of,
)
from .media import take_attachments
from .search import Source, anthropic_asked
from .state import Batch, BatchItem, EmulatorState, ItemResult

__all__ = ["decode_request", "error", "message", "routes", "status_name", "tool_turns"]

PROVIDER = "anthropic"
_CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    409: "conflict_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}
_DROP = ("model", "stream", "metadata")


def error(
    status: int, code: str | None, retry_after: float | None, message: str | None
) -> Response:
    """``{"type": "error", "error": {"type", "message"}, "request_id"}`` with the status's
    error type; ``retry-after`` and ``retry-after-ms`` when given.

    A ``code`` naming an Anthropic type (``…_error``) replaces the type; any other code
    is a cause under the type, sent as ``error.details.error_code`` the way Anthropic
    marks a spend cap (``enforced_spend_limit_reached`` on a ``rate_limit_error``).
    """
    request_id = "req_" + uuid.uuid4().hex[:24]
    text = message or {529: "Overloaded"}.get(
        status, f"Emulated error {status}" + (f" ({code})" if code else "")
    )
    body = {"type": "error", "error": _error_object(status, code, text), "request_id": request_id}
    headers = {"request-id": request_id, **retry_headers(retry_after, with_ms=True)}
    return JSONResponse(body, status_code=status, headers=headers)


def _error_object(status: int, code: str | None, message: str | None) -> dict[str, Any]:
    """The inner ``error`` object: ``type`` from the status or from a ``…_error`` code,
    any other code as ``details.error_code``."""
    if code and code.endswith("_error"):
        return {"type": code, "message": message}
    out: dict[str, Any] = {"type": _TYPES.get(status, "api_error"), "message": message}
    if code:
        out["details"] = {"error_code": code}
    return out


def decode_request(body: dict[str, Any]) -> tuple[Any, Any, dict[str, Any] | None]:
    """(canonical request, prompt, schema) of a Messages body. Cache markers change no
    answer: the canonical request is the body without them (:func:`_unmarked`)."""
    fmt = (body.get("output_config") or {}).get("format") or body.get("output_format") or {}
    schema = fmt.get("schema") if fmt.get("type") == "json_schema" else None
    canonical = {k: v for k, v in body.items() if k not in _DROP}
    if "cache_control" in json.dumps(canonical):
        canonical = _unmarked(canonical)
    return canonical, [body.get("system") or "", body.get("messages") or []], schema


def _unmarked(body: dict[str, Any]) -> dict[str, Any]:
    """A Messages body as if sent without ``cache_control``: no marker anywhere, and a
    system prompt or message content of text blocks only as their joined text (the form
    of an unmarked request)."""

    def text(value: Any) -> Any:
        if (
            isinstance(value, list)
            and value
            and all(isinstance(b, dict) and b.get("type") == "text" for b in value)
        ):
            return "".join(str(b.get("text", "")) for b in value)
        if isinstance(value, list):
            return [
                {k: v for k, v in b.items() if k != "cache_control"} if isinstance(b, dict) else b
                for b in value
            ]
        return value

    out = {k: v for k, v in body.items() if k != "cache_control"}
    if "system" in out:
        out["system"] = text(out["system"])
    out["messages"] = [
        {**m, "content": text(m.get("content"))} if isinstance(m, dict) else m
        for m in out.get("messages") or []
    ]
    return out


def message(model: str, ans: Answer, tier: str) -> dict[str, Any]:
    """A ``message`` object for ``ans``, bent by its ``reply`` fault: ``stop`` (any
    ``stop_reason``), ``stop_details``, ``blocks`` (the content blocks in order:
    ``text``, ``preamble``, ``thinking``, ``redacted_thinking``, ``server_tool_use``,
    ``web_search_tool_result``, ``tool_use``), ``content`` (the text, null for none),
    ``usage`` (``cache_read_tokens``, ``cache_write_tokens``, ``reasoning_tokens``,
    ``web_search_requests``, ``web_fetch_requests``) or ``body`` (the whole message)."""
    reply = ans.reply or {}
    if "body" in reply:
        return dict(reply["body"])
    stop = (
        reply.get("stop")
        or {
            "stop": "end_turn",
            "length": "max_tokens",
            "refusal": "refusal",
            "tool_calls": "tool_use",
        }[ans.finish]
    )
    text = reply.get("content", ans.text)
    extra = reply.get("usage") or {}
    reads = int(extra.get("cache_read_tokens", ans.cached_tokens))
    written = ans.cache_write_5m + ans.cache_write_1h
    by_ttl = (ans.cache_write_5m, ans.cache_write_1h)
    if "cache_write_tokens" in extra:  # a reply fault's writes: all five-minute ones
        by_ttl = (int(extra["cache_write_tokens"]), 0)
    usage: dict[str, Any] = {
        # input_tokens excludes cache reads and writes, as Anthropic reports it.
        "input_tokens": max(0, ans.input_tokens - reads - written),
        "output_tokens": ans.output_tokens,
        "cache_creation_input_tokens": sum(by_ttl),
        "cache_read_input_tokens": reads,
        "cache_creation": {
            "ephemeral_5m_input_tokens": by_ttl[0],
            "ephemeral_1h_input_tokens": by_ttl[1],
        },
        "server_tool_use": None,
        "service_tier": tier,
    }
    if ans.sources and not ans.tool_calls:
        usage["server_tool_use"] = {
            "web_search_requests": len(ans.sources),
            "web_fetch_requests": 0,
        }
    if "web_search_requests" in extra or "web_fetch_requests" in extra:
        usage["server_tool_use"] = {
            "web_search_requests": int(extra.get("web_search_requests", 0)),
            "web_fetch_requests": int(extra.get("web_fetch_requests", 0)),
        }
    if "reasoning_tokens" in extra:
        usage["output_tokens_details"] = {"thinking_tokens": int(extra["reasoning_tokens"])}
    body: dict[str, Any] = {
        "id": "msg_" + uuid.uuid4().hex[:24],
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": _calls(ans)
        if ans.tool_calls
        else _searched(ans.sources, text)
        if ans.sources and "blocks" not in reply
        else _blocks(reply.get("blocks") or ["text"], text),
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": usage,
    }
    if "stop_details" in reply:
        body["stop_details"] = reply["stop_details"]
    return body


def tool_turns(body: dict[str, Any]) -> tuple[frozenset[str], tuple[str, ...], int]:
    """A Messages body's tool loop so far: the functions it offers (tools with an
    ``input_schema``), the results its ``tool_result`` blocks send back, and how many
    assistant turns called tools."""
    offered = frozenset(
        str(t.get("name"))
        for t in body.get("tools") or ()
        if isinstance(t, dict) and "input_schema" in t
    )
    results: list[str] = []
    turns = 0
    for m in body.get("messages") or ():
        blocks = m.get("content") if isinstance(m, dict) else None
        if not isinstance(blocks, list):
            continue
        kinds = [b.get("type") for b in blocks if isinstance(b, dict)]
        turns += m.get("role") == "assistant" and "tool_use" in kinds
        results += [
            _result_text(b.get("content"))
            for b in blocks
            if isinstance(b, dict) and b.get("type") == "tool_result"
        ]
    return offered, tuple(results), turns


def _result_text(content: Any) -> str:
    """A ``tool_result``'s content: a string, or text blocks joined."""
    if isinstance(content, list):
        return "".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return str(content if content is not None else "")


def _calls(ans: Answer) -> list[dict[str, Any]]:
    """An answer's tool calls as ``tool_use`` blocks (ids derived from the calls, so the
    same turn asks with the same ids)."""
    out = []
    for n, (name, arguments) in enumerate(ans.tool_calls):
        digest = hashlib.sha256(f"{n}:{name}:{arguments}".encode()).hexdigest()[:24]
        out.append(
            {
                "type": "tool_use",
                "id": "toolu_" + digest,
                "name": name,
                "input": json.loads(arguments),
            }
        )
    return out


def _searched(sources: tuple[Source, ...], text: str | None) -> list[dict[str, Any]]:
    """An answer after web searches, as Anthropic gives it: each search a
    ``server_tool_use`` block and its ``web_search_tool_result``, then the text citing
    every source (``web_search_result_location`` citations)."""
    out: list[dict[str, Any]] = []
    for n, s in enumerate(sources):
        use_id = f"srvtoolu_{hashlib.sha256(s.url.encode()).hexdigest()[:20]}{n}"
        out.append(
            {
                "type": "server_tool_use",
                "id": use_id,
                "name": "web_search",
                "input": {"query": s.query},
            }
        )
        result = {
            "type": "web_search_result",
            "title": s.title,
            "url": s.url,
            "encrypted_content": "emulated",
            "page_age": None,
        }
        out.append({"type": "web_search_tool_result", "tool_use_id": use_id, "content": [result]})
    if text is not None:
        citations = [
            {
                "type": "web_search_result_location",
                "url": s.url,
                "title": s.title,
                "cited_text": s.passage,
                "encrypted_index": "emulated",
            }
            for s in sources
        ]
        out.append({"type": "text", "text": text, "citations": citations})
    return out


def _blocks(kinds: list[str], text: str | None) -> list[dict[str, Any]]:
    """Content blocks of the kinds named, in order (``text`` is the answer's text)."""
    out: list[dict[str, Any]] = []
    for kind in kinds:
        if kind == "text":
            if text is not None:
                out.append({"type": "text", "text": text, "citations": None})
        elif kind == "preamble":
            out.append({"type": "text", "text": "I'll search for that.", "citations": None})
        elif kind == "thinking":
            out.append(
                {
                    "type": "thinking",
                    "thinking": "Let me think about the question.",
                    "signature": "EmulatedSignature" + uuid.uuid4().hex[:8],
                }
            )
        elif kind == "redacted_thinking":
            out.append({"type": "redacted_thinking", "data": "EmulatedRedacted"})
        elif kind == "server_tool_use":
            out.append(
                {
                    "type": "server_tool_use",
                    "id": "srvtoolu_" + uuid.uuid4().hex[:20],
                    "name": "web_search",
                    "input": {"query": "emulated query"},
                }
            )
        elif kind == "web_search_tool_result":
            out.append(
                {
                    "type": "web_search_tool_result",
                    "tool_use_id": "srvtoolu_" + uuid.uuid4().hex[:20],
                    "content": [
                        {
                            "type": "web_search_result",
                            "title": "Emulated",
                            "url": "https://example.com/",
                            "encrypted_content": "x",
                            "page_age": None,
                        }
                    ],
                }
            )
        elif kind == "tool_use":
            out.append(
                {
                    "type": "tool_use",
                    "id": "toolu_" + uuid.uuid4().hex[:20],
                    "name": "lookup",
                    "input": {"q": "emulated"},
                }
            )
    return out


def _check(params: Any) -> str | None:
    if not isinstance(params, dict):
        return "params: must be an object"
    if not params.get("model"):
        return "model: Field required"
    if not isinstance(params.get("max_tokens"), int) or params["max_tokens"] < 1:
        return "max_tokens: Field required (an integer >= 1)"
    if not isinstance(params.get("messages"), list):
        return "messages: Field required"
    return None


async def create_message(request: Request) -> Response:
    state = state_of(request)
    body = await read_json(request, _counted(state, "chat"))
    model = str(body.get("model", ""))
    fired = await gate(request, PROVIDER, "chat", error, Target(model=model))
    problem = _check(body)
    if problem:
        return error(400, None, None, problem)
    await attachments(request, PROVIDER, body, error, model)
    await live_latency(request)
    canonical, prompt, schema = decode_request(body)
    tools, results, turns = tool_turns(body)
    search = anthropic_asked(body.get("tools"))
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
        search=search,
    )
    plan, markers = anthropic_plan(model, body)
    note_cache(request, markers)
    ans = state.cached(ans, plan)
    state.stats.bill(PROVIDER, model, canonical)
    state.stats.searched(PROVIDER, model, ans.sources)
    return JSONResponse(
        message(model, ans, "standard"), headers={"request-id": "req_" + uuid.uuid4().hex[:24]}
    )


async def create_batch(request: Request) -> Response:
    state = state_of(request)
    body = await read_json(request, _counted(state, "batch.create"))
    fired = await gate(request, PROVIDER, "batch.create", error)
    requests = body.get("requests")
    if not isinstance(requests, list) or not requests:
        return error(400, None, None, "requests: must be a non-empty list")
    items: list[BatchItem] = []
    seen: set[str] = set()
    marked: list[dict[str, Any]] = []
    for index, entry in enumerate(requests):
        custom_id = str((entry or {}).get("custom_id", ""))
        problem = _check((entry or {}).get("params"))
        if not _CUSTOM_ID.match(custom_id):
            problem = "custom_id: must match ^[a-zA-Z0-9_-]{1,64}$"
        elif custom_id in seen:
            problem = f"custom_id: duplicate value {custom_id!r}"
        if problem:
            return error(400, None, None, f"requests.{index}.{problem}")
        seen.add(custom_id)
        params = entry["params"]
        take_attachments(PROVIDER, params)  # the batch keeps descriptors, not the bytes
        canonical, prompt, schema = decode_request(params)
        plan, markers = anthropic_plan(str(params["model"]), params)
        if markers:
            marked.append({"custom_id": custom_id, **markers})
        tools, results, turns = tool_turns(params)
        items.append(
            BatchItem(
                custom_id=custom_id,
                model=str(params["model"]),
                canonical=canonical,
                prompt=prompt,
                schema=schema,
                max_tokens=params["max_tokens"],
                cache=plan,
                tools=tools,
                results=results,
                turns=turns,
                search=anthropic_asked(params.get("tools")),
            )
        )
    note_cache(request, marked)
    batch = new_batch(
        state,
        fired,
        batch_id="msgbatch_" + uuid.uuid4().hex[:24],
        provider=PROVIDER,
        model=items[0].model,
        items=items,
    )
    return created(fired, JSONResponse(batch_json(state, batch, "queued", None, _base(request))))


async def get_batch(request: Request) -> Response:
    state = state_of(request)
    batch = state.batches.get(request.path_params["id"])
    fired = await gate(request, PROVIDER, "batch.get", error, _target(batch))
    if batch is None or batch.provider != PROVIDER:
        return _missing(request)
    phase, raw = observe(state, batch, fired)
    return JSONResponse(batch_json(state, batch, phase, raw, _base(request)))


async def cancel_batch(request: Request) -> Response:
    state = state_of(request)
    batch = state.batches.get(request.path_params["id"])
    fired = await gate(request, PROVIDER, "batch.cancel", error, _target(batch))
    if batch is None or batch.provider != PROVIDER:
        return _missing(request)
    phase, raw = observe(state, batch, fired)
    if phase == "ended":
        return error(400, None, None, f"Batch {batch.id} has already ended.")
    batch.cancel(state.clock.now())
    return JSONResponse(batch_json(state, batch, state.phase(batch), raw, _base(request)))


async def delete_batch(request: Request) -> Response:
    state = state_of(request)
    batch = state.batches.get(request.path_params["id"])
    await gate(request, PROVIDER, "batch.delete", error, _target(batch))
    if batch is None or batch.provider != PROVIDER:
        return _missing(request)
    if state.phase(batch) != "ended":
        return error(
            400, None, None, "A batch can be deleted only after it has ended; cancel it first."
        )
    del state.batches[batch.id]
    return JSONResponse({"id": batch.id, "type": "message_batch_deleted"})


async def list_batches(request: Request) -> Response:
    state = state_of(request)
    await gate(request, PROVIDER, "batch.list", error)
    mine = [b for b in reversed(state.batches.values()) if b.provider == PROVIDER]
    ids = [b.id for b in mine]
    after, before = request.query_params.get("after_id"), request.query_params.get("before_id")
    if after:
        mine = mine[ids.index(after) + 1 :] if after in ids else []
    elif before:
        mine = mine[: ids.index(before)] if before in ids else []
    limit = min(1000, max(1, int(request.query_params.get("limit", "20"))))
    page = mine[:limit]
    data = [batch_json(state, b, state.phase(b), None, _base(request)) for b in page]
    return JSONResponse(
        {
            "data": data,
            "has_more": len(mine) > limit,
            "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None,
        }
    )


async def batch_results(request: Request) -> Response:
    state = state_of(request)
    batch = state.batches.get(request.path_params["id"])
    await gate(request, PROVIDER, "batch.results", error, _target(batch))
    if batch is None or batch.provider != PROVIDER:
        return _missing(request)
    if state.phase(batch) != "ended":
        return error(
            400, None, None, f"Batch {batch.id} has not ended; results are not available yet."
        )
    lines = "".join(json.dumps(_result_line(batch, r)) + "\n" for r in batch.results or [])
    return Response(lines.encode(), media_type="application/binary")


def _result_line(batch: Batch, result: ItemResult) -> dict[str, Any]:
    item = result.item
    if result.kind == "answered" and result.answer is not None:
        body = {"type": "succeeded", "message": message(item.model, result.answer, "batch")}
    elif result.kind == "errored" and result.error is not None:
        e = result.error
        body = {
            "type": "errored",
            "error": e.body
            if e.body is not None
            else {
                "type": "error",
                "error": _error_object(e.status, e.code, e.message),
                "request_id": "req_" + uuid.uuid4().hex[:24],
            },
        }
    else:
        body = {"type": "expired" if batch.final == "expired" else "canceled"}
    return {"custom_id": item.custom_id, "result": body}


def status_name(batch: Batch, phase: str) -> str:
    """Anthropic's ``processing_status`` for a phase."""
    return {"ended": "ended", "cancelling": "canceling"}.get(phase, "in_progress")


def batch_json(
    state: EmulatorState, batch: Batch, phase: str, raw: str | None, base: str
) -> dict[str, Any]:
    """The ``message_batch`` object (``raw`` overrides ``processing_status``)."""
    counts = {
        "processing": len(batch.items),
        "succeeded": 0,
        "errored": 0,
        "canceled": 0,
        "expired": 0,
    }
    if phase == "ended":
        counts["processing"] = 0
        # Items the provider "lost" (batch_drop_records) still count as succeeded.
        counts["succeeded"] = len(batch.dropped)
        for result in batch.results or []:
            key = {"answered": "succeeded", "errored": "errored"}.get(
                result.kind, "expired" if batch.final == "expired" else "canceled"
            )
            counts[key] += 1
    return {
        "id": batch.id,
        "type": "message_batch",
        "processing_status": raw or status_name(batch, phase),
        "request_counts": counts,
        "created_at": _rfc3339(batch.created_at),
        "expires_at": _rfc3339(batch.created_at + 86400),
        "ended_at": _rfc3339(batch.ended_at) if phase == "ended" and batch.ended_at else None,
        "cancel_initiated_at": _rfc3339(batch.cancel_requested_at)
        if batch.cancel_requested_at
        else None,
        "archived_at": None,
        "results_url": f"{base}/v1/messages/batches/{batch.id}/results"
        if phase == "ended"
        else None,
    }


def _rfc3339(stamp: float) -> str:
    return datetime.fromtimestamp(stamp, UTC).isoformat().replace("+00:00", "Z")


def _base(request: Request) -> str:
    return str(request.base_url).rstrip("/")


def _target(batch: Batch | None) -> Target:
    return Target(model=batch.model if batch else None)


def _missing(request: Request) -> Response:
    return error(404, None, None, f"Message batch {request.path_params['id']} not found.")


def _counted(state: EmulatorState, op: str) -> Any:
    def render(
        status: int, code: str | None, retry_after: float | None, message_text: str | None
    ) -> Response:
        state.stats.count(PROVIDER, op)
        return error(status, code, retry_after, message_text)

    return render


async def get_model(request: Request) -> Response:
    """``GET /v1/models/{id}``: a ``ModelInfo`` whose ``lifecycle`` (and ``retires_at``)
    come from the table set with ``POST /_emulator/models``; any other model is active."""
    state = state_of(request)
    model_id = request.path_params["id"]
    await gate(request, PROVIDER, "model.get", error, Target(model=model_id))
    entry = state.models.get(model_id, {})
    lifecycle = entry.get("lifecycle", "active")
    return JSONResponse(
        {
            "type": "model",
            "id": model_id,
            "display_name": model_id,
            "created_at": "2025-01-01T00:00:00Z",
            "lifecycle": lifecycle,
            "deprecated_at": entry.get("deprecated_at") if lifecycle != "active" else None,
            "retires_at": entry.get("retires_at"),
        }
    )


def routes() -> list[Route]:
    """Anthropic's routes under ``/v1/messages`` and ``/v1/models/{id}``."""
    return [
        Route("/v1/models/{id}", get_model, methods=["GET"]),
        Route("/v1/messages", create_message, methods=["POST"]),
        Route("/v1/messages/batches", create_batch, methods=["POST"]),
        Route("/v1/messages/batches", list_batches, methods=["GET"]),
        Route("/v1/messages/batches/{id}", get_batch, methods=["GET"]),
        Route("/v1/messages/batches/{id}", delete_batch, methods=["DELETE"]),
        Route("/v1/messages/batches/{id}/cancel", cancel_batch, methods=["POST"]),
        Route("/v1/messages/batches/{id}/results", batch_results, methods=["GET"]),
    ]

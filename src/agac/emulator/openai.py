"""OpenAI's wire protocol: chat completions, files and the Batch API.

Chat answers stream as server-sent events when ``stream`` is set (with a final usage
chunk on ``stream_options.include_usage``). Served under ``/v1`` for OpenAI; :mod:`agac.emulator.groq` mounts the same handlers under
``/openai/v1`` with Groq's differences (:class:`Flavor`). Shapes follow the ``openai``
SDK's types: a batch goes ``validating → in_progress → finalizing → completed`` (a batch
whose every request failed is still ``completed``), results are JSONL files whose lines
are ``{"id": "batch_req_…", "custom_id", "response": {"status_code", "request_id",
"body"}, "error"}``, in shuffled order; requests that never ran (expired, cancelled) go
to the error file with ``response: null`` and ``error.code`` ``batch_expired`` /
``batch_cancelled``. Cancel spelling has two Ls here.
"""

from __future__ import annotations

import email.parser
import email.policy
import hashlib
import json
import math
import uuid
from dataclasses import dataclass, replace
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from .answers import Answer, answer, prompt_tokens
from .azure_front import azure_guard, filter_results, prompt_filter_error
from .caching import OPENAI_MINIMUM, openai_plan
from .faults import Target
from .handling import (
    Rejected,
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
from .media import batch_limit_error, wire_error
from .openai_responses import ENDPOINT as RESPONSES_ENDPOINT
from .openai_responses import response_object, responses_item
from .openai_responses import route as responses_route
from .openai_stream import chunks
from .search import executed_tools, groq_asked, groq_refusal, openai_asked, url_annotations
from .state import Batch, BatchItem, EmulatorState, ItemResult

BATCH_FILE_MAX = 200 * 1024 * 1024
"""OpenAI's and Groq's largest batch input file."""

__all__ = [
    "OPENAI",
    "Flavor",
    "asked_search",
    "chat_request",
    "completion",
    "counting",
    "error_renderer",
    "multipart_fields",
    "parse_input",
    "routes",
    "status_name",
    "write_results",
]

#: Not part of what an answer depends on: transport settings and the cache routing key.
_DROP = ("model", "stream", "stream_options", "metadata", "store", "user", "prompt_cache_key")
_STATUS = {
    "queued": "validating",
    "running": "in_progress",
    "finalizing": "finalizing",
    "cancelling": "cancelling",
}
_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "permission_error",
    404: "invalid_request_error",
    409: "conflict_error",
    422: "invalid_request_error",
    429: "requests",
}
_CODES = {401: "invalid_api_key", 429: "rate_limit_exceeded", 404: "not_found"}


@dataclass(frozen=True)
class Flavor:
    """What differs between OpenAI and its clones (Groq)."""

    provider: str
    prefix: str
    file_prefix: str
    batch_prefix: str
    retry_after_ms: bool
    service_tier: str
    windows: frozenset[str]
    cursor_paging: bool
    usage_timings: bool
    cache_minimum: int | None = OPENAI_MINIMUM
    """The fewest prompt tokens cached (implicitly, :mod:`.caching`); None: no caching."""
    batch_urls: frozenset[str] = frozenset({"/v1/chat/completions"})
    """The ``url`` of a batch line and the ``endpoint`` of a batch this API takes."""
    deployments: bool = False
    """Chat is served at ``/deployments/{deployment}/chat/completions`` (Azure's classic
    surface), the deployment naming the model."""
    azure: bool = False
    """Azure's rules (:mod:`.azure`): an ``api-key`` (or Entra bearer) header is required,
    ``api-version`` too where ``api_version`` says, a batch file names one deployment and
    has no BOM, a file may stay ``pending`` after upload, answers carry content filter
    results, and batches never expire."""
    api_version: bool = False
    batch: bool = True
    """Whether the API has files and batches (DeepSeek's has chat only)."""
    dialect: str = "openai"
    """``openrouter``: ``usage.cost`` (USD) and the serving ``provider`` in every answer.
    ``deepseek``: cache hits as ``prompt_cache_hit_tokens``/``prompt_cache_miss_tokens``,
    a reasoner's thinking as ``message.reasoning_content``, ``json_schema`` refused.
    ``mistral``: errors as a flat ``{object: error, message, type, param, code}``, a
    message with no refusal, a Magistral model's content as ``thinking`` and ``text``
    chunks."""
    line_url: bool = True
    """Whether a batch line must name its ``url`` (OpenAI's); Mistral's and Together's
    lines are ``{custom_id, body}``."""
    responses: bool = False
    """Whether the API serves the Responses API (``/responses``, :mod:`.openai_responses`)
    live and as a batch endpoint."""


def clone(provider: str, prefix: str, **differences: Any) -> Flavor:
    """The flavor of an OpenAI-compatible chat API at ``prefix`` whose files and batches,
    if it has any, are its own module's: no ``retry-after-ms``, the ``default`` tier, no
    flex windows, no cursor paging or timings, no implicit caching — ``differences`` say
    what else differs."""
    return replace(_CLONE, provider=provider, prefix=prefix, **differences)


OPENAI = Flavor(
    provider="openai",
    prefix="/v1",
    file_prefix="file-",
    batch_prefix="batch_",
    retry_after_ms=True,
    service_tier="default",
    windows=frozenset({"24h"}),
    cursor_paging=False,
    usage_timings=False,
    batch_urls=frozenset({"/v1/chat/completions", RESPONSES_ENDPOINT}),
    responses=True,
)


def error_renderer(flavor: Flavor) -> Any:
    """The provider's error response: ``{"error": {message, type, param, code}}``."""

    def render(
        status: int, code: str | None, retry_after: float | None, message: str | None
    ) -> Response:
        kind = _TYPES.get(status, "server_error")
        code = code or _CODES.get(status)
        if code == "insufficient_quota":
            kind = "insufficient_quota"
            message = message or (
                "You exceeded your current quota, please check your plan and billing details."
            )
        fields = {
            "message": message or f"Emulated error {status} ({code or kind}).",
            "type": kind,
            "param": None,
            "code": code,
        }
        if flavor.azure and code == "content_filter":
            fields = prompt_filter_error()
        # Mistral's error body is flat, OpenAI's wraps it in "error".
        body = {"object": "error", **fields} if flavor.dialect == "mistral" else {"error": fields}
        headers = {"x-request-id": "req_" + uuid.uuid4().hex}
        if status == 429 and code != "insufficient_quota":
            headers.update(retry_headers(retry_after, with_ms=flavor.retry_after_ms))
            headers["x-ratelimit-remaining-requests"] = "0"
        elif retry_after is not None:
            headers.update(retry_headers(retry_after, with_ms=flavor.retry_after_ms))
        return JSONResponse(body, status_code=status, headers=headers)

    return render


def chat_request(body: dict[str, Any]) -> tuple[Any, dict[str, Any] | None, int | None]:
    """Decode a chat body into (canonical request, JSON schema or None, max tokens)."""
    fmt = body.get("response_format") or {}
    schema: dict[str, Any] | None = None
    if fmt.get("type") == "json_schema":
        schema = (fmt.get("json_schema") or {}).get("schema") or {"type": "object"}
    elif fmt.get("type") == "json_object":
        schema = {"type": "object", "properties": {"answer": {"type": "string"}}}
    max_tokens = body.get("max_completion_tokens") or body.get("max_tokens")
    canonical = {k: v for k, v in body.items() if k not in _DROP}
    return canonical, schema, max_tokens


def tool_turns(body: dict[str, Any]) -> tuple[frozenset[str], tuple[str, ...], int]:
    """A chat body's tool loop so far: the function tools it offers, the results its
    ``tool`` messages send back, and how many assistant turns called tools."""
    offered = frozenset(
        str((t.get("function") or {}).get("name"))
        for t in body.get("tools") or ()
        if isinstance(t, dict) and t.get("type") == "function"
    )
    messages = [m for m in body.get("messages") or () if isinstance(m, dict)]
    results = tuple(str(m.get("content")) for m in messages if m.get("role") == "tool")
    turns = sum(1 for m in messages if m.get("role") == "assistant" and m.get("tool_calls"))
    return offered, results, turns


def asked_search(flavor: Flavor, body: dict[str, Any], model: str) -> Any:
    """The web search a chat body offers in the flavor's protocol (Groq's own, else a
    search model's ``web_search_options``), or None."""
    return groq_asked(body, model) if flavor.provider == "groq" else openai_asked(body)


def _calls(ans: Answer) -> list[dict[str, Any]]:
    """An answer's tool calls as ``message.tool_calls`` (ids derived from the calls, so the
    same turn asks with the same ids)."""
    out = []
    for n, (name, arguments) in enumerate(ans.tool_calls):
        digest = hashlib.sha256(f"{n}:{name}:{arguments}".encode()).hexdigest()[:24]
        out.append(
            {
                "id": "call_" + digest,
                "type": "function",
                "function": {"name": name, "arguments": arguments},
            }
        )
    return out


def completion(flavor: Flavor, model: str, ans: Answer, now: float, tier: str) -> dict[str, Any]:
    """A ``chat.completion`` object for ``ans``, bent by its ``reply`` fault: ``stop``
    (any ``finish_reason``), ``refusal`` (``message.refusal``, content null), ``content``
    (the text, null for none), ``blocks`` (``tool_calls``: a tool call in the message),
    ``usage`` (``cache_read_tokens``, ``cache_write_tokens``, ``reasoning_tokens``) or
    ``body`` (the whole completion)."""
    reply = ans.reply or {}
    if "body" in reply:
        return dict(reply["body"])
    finish = (
        reply.get("stop")
        or {
            "stop": "stop",
            "length": "length",
            "refusal": "stop",
            "tool_calls": "tool_calls",
        }[ans.finish]
    )
    extra = reply.get("usage") or {}
    cached = int(extra.get("cache_read_tokens", ans.cached_tokens))
    written = int(extra.get("cache_write_tokens", 0))
    prompt = ans.input_tokens + (cached - ans.cached_tokens) + written
    details: dict[str, Any] = {"cached_tokens": cached, "audio_tokens": 0}
    if written:
        details["cache_write_tokens"] = written
    usage: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": ans.output_tokens,
        "total_tokens": prompt + ans.output_tokens,
        # cached_tokens is a subset of prompt_tokens (included in it), as OpenAI reports.
        "prompt_tokens_details": details,
        "completion_tokens_details": {
            "reasoning_tokens": int(extra.get("reasoning_tokens", 0)),
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }
    if flavor.usage_timings:
        usage.update(queue_time=0.01, prompt_time=0.001, completion_time=0.02, total_time=0.031)
    if flavor.dialect == "deepseek":
        del usage["prompt_tokens_details"]
        usage["prompt_cache_hit_tokens"] = cached
        usage["prompt_cache_miss_tokens"] = prompt - cached
        usage["completion_tokens_details"] = {
            "reasoning_tokens": usage["completion_tokens_details"]["reasoning_tokens"]
        }
    refusal = reply.get("refusal", ans.refusal)
    content = reply.get("content", None if "refusal" in reply else ans.text)
    message: dict[str, Any] = {
        "role": "assistant",
        "content": content,
        "refusal": refusal,
        "annotations": url_annotations(ans.sources, content),
    }
    if flavor.provider == "groq":  # Groq's searches are its executed tools
        message["annotations"] = []
        if ans.sources:
            message["executed_tools"] = executed_tools(ans.sources, model)
    if flavor.dialect == "deepseek":
        message = {"role": "assistant", "content": content}
        if "reasoner" in model:
            message["reasoning_content"] = "Let me think it through."
    if flavor.dialect == "openrouter":
        # What the call cost (USD: $1 per million tokens here) and who served it.
        usage["cost"] = round((prompt + ans.output_tokens) / 1e6, 9)
        usage["is_byok"] = False
    if flavor.dialect == "mistral":
        message = {"role": "assistant", "content": content, "tool_calls": None}
        if "magistral" in model and content is not None:
            thinking = {"type": "thinking", "thinking": [{"type": "text", "text": "Hmm."}]}
            message["content"] = [thinking, {"type": "text", "text": content}]
        usage = {k: usage[k] for k in ("prompt_tokens", "completion_tokens", "total_tokens")}
        if cached:
            usage["prompt_tokens_details"] = {"cached_tokens": cached}
    if ans.tool_calls:
        message["tool_calls"] = _calls(ans)
    elif "tool_calls" in (reply.get("blocks") or []):
        message["tool_calls"] = [
            {
                "id": "call_" + uuid.uuid4().hex[:24],
                "type": "function",
                "function": {"name": "lookup", "arguments": '{"q":"x"}'},
            }
        ]
    choice: dict[str, Any] = {
        "index": 0,
        "logprobs": None,
        "finish_reason": finish,
        "message": message,
    }
    out = {
        "id": "chatcmpl-" + uuid.uuid4().hex[:24],
        "object": "chat.completion",
        "created": int(now),
        "model": model,
        "system_fingerprint": "fp_emulator",
        "service_tier": tier,
        "choices": [choice],
        "usage": usage,
    }
    if flavor.azure:
        flagged = reply.get("filter") if finish == "content_filter" else None
        choice["content_filter_results"] = filter_results(flagged)
        out["prompt_filter_results"] = [
            {"prompt_index": 0, "content_filter_results": filter_results(None)}
        ]
    return out


def flex_tier(flavor: Flavor, body: dict[str, Any]) -> str:
    """The ``service_tier`` an answer reports: ``flex`` when the request asked for it."""
    return "flex" if body.get("service_tier") == "flex" else flavor.service_tier


def routes(flavor: Flavor) -> list[Route]:
    """The routes of one OpenAI-shaped API under ``flavor.prefix``."""
    error = error_renderer(flavor)
    p = flavor.prefix

    async def chat(request: Request) -> Response:
        state = state_of(request)
        body = await read_json(request, counting(state, flavor, "chat", error))
        model = str(request.path_params.get("deployment") or body.get("model", ""))
        tier = body.get("service_tier") if body.get("service_tier") == "flex" else None
        fired = await gate(request, flavor.provider, "chat", error, Target(model=model, tier=tier))
        if not model or not isinstance(body.get("messages"), list):
            return error(400, None, None, "'model' and 'messages' are required.")
        fmt = body.get("response_format") or {}
        if flavor.dialect == "deepseek" and fmt.get("type") not in (None, "text", "json_object"):
            return error(400, None, None, "This response_format type is unavailable now")
        refused = groq_refusal(body, model) if flavor.provider == "groq" else None
        if refused is not None:
            return error(400, None, None, refused)
        await attachments(request, flavor.provider, body, error, model)
        await live_latency(request)
        canonical, schema, max_tokens = chat_request(body)
        tools, results, turns = tool_turns(body)
        ans = answer(
            provider=flavor.provider,
            model=model,
            body=canonical,
            prompt=body["messages"],
            schema=schema,
            max_tokens=max_tokens,
            seed=state.config.seed,
            fault=fired.answer,
            reply=fired.reply,
            tools=tools,
            results=results,
            turns=turns,
            search=asked_search(flavor, body, model),
        )
        plan, markers = openai_plan(
            flavor.provider, model, body, ans.input_tokens, flavor.cache_minimum
        )
        note_cache(request, markers)
        ans = state.cached(ans, plan)
        state.stats.bill(flavor.provider, model, canonical)
        state.stats.searched(flavor.provider, model, ans.sources)
        tier = flex_tier(flavor, body)
        reply = completion(flavor, model, ans, state.clock.now(), tier)
        if flavor.dialect == "openrouter":
            reply["provider"] = _routed(body)
        if body.get("stream"):
            usage = bool((body.get("stream_options") or {}).get("include_usage"))
            return StreamingResponse(chunks(reply, usage), media_type="text/event-stream")
        return JSONResponse(reply, headers={"x-request-id": "req_" + uuid.uuid4().hex})

    async def upload(request: Request) -> Response:
        state = state_of(request)
        fired = await gate(request, flavor.provider, "file.upload", error)
        fields = multipart_fields(request.headers.get("content-type", ""), await request.body())
        if "file" not in fields or fields.get("purpose", (None, b""))[1] != b"batch":
            return error(400, None, None, "Expected a 'file' and purpose 'batch'.")
        filename, content = fields["file"]
        if len(content) > BATCH_FILE_MAX:
            return error(
                400,
                None,
                None,
                f"File is too large: {len(content)} bytes; a batch "
                f"input file may be at most {BATCH_FILE_MAX} bytes (200 MB).",
            )
        stored = state.add_file(
            flavor.provider, _file_id(flavor), filename or "upload.jsonl", "batch", content
        )
        stored.pending = fired.file_pending
        return JSONResponse(_file_json(stored))

    async def file_get(request: Request) -> Response:
        stored = await _file(request, "file.get")
        answer = _file_json(stored)
        stored.pending = max(0, stored.pending - 1)
        return JSONResponse(answer)

    async def file_list(request: Request) -> Response:
        state = state_of(request)
        await gate(request, flavor.provider, "file.list", error)
        data = [_file_json(f) for f in state.files.values() if f.provider == flavor.provider]
        return JSONResponse(
            {
                "object": "list",
                "data": data,
                "has_more": False,
                "first_id": data[0]["id"] if data else None,
                "last_id": data[-1]["id"] if data else None,
            }
        )

    async def file_delete(request: Request) -> Response:
        stored = await _file(request, "file.delete")
        del state_of(request).files[stored.id]
        return JSONResponse({"id": stored.id, "object": "file", "deleted": True})

    async def file_content(request: Request) -> Response:
        stored = await _file(request, "file.download")
        return Response(stored.content, media_type="application/octet-stream")

    async def _file(request: Request, op: str) -> Any:
        state = state_of(request)
        await gate(request, flavor.provider, op, error)
        stored = state.files.get(request.path_params["file_id"])
        if stored is None or stored.provider != flavor.provider:
            raise Rejected(
                error(404, None, None, f"No such File object: {request.path_params['file_id']}")
            )
        return stored

    async def batch_create(request: Request) -> Response:
        state = state_of(request)
        body = await read_json(request, counting(state, flavor, "batch.create", error))
        metadata = body.get("metadata") or {}
        fired = await gate(
            request, flavor.provider, "batch.create", error, Target(metadata=metadata)
        )
        stored = state.files.get(str(body.get("input_file_id")))
        if stored is None or stored.provider != flavor.provider:
            return error(400, None, None, "Invalid 'input_file_id': file not found.")
        if stored.pending:
            return error(
                400,
                "invalid_request",
                None,
                "The input file is not ready: only files with status 'processed' are accepted.",
            )
        if body.get("endpoint") not in flavor.batch_urls:
            return error(400, None, None, f"The emulator batches only {sorted(flavor.batch_urls)}.")
        if body.get("completion_window") not in flavor.windows:
            return error(
                400,
                None,
                None,
                f"Invalid 'completion_window': expected one of {sorted(flavor.windows)}.",
            )
        items, invalid, marked = parse_input(stored.content, flavor, body["endpoint"])
        note_cache(request, marked)
        model = items[0].model if items else ""
        batch = new_batch(
            state,
            fired,
            batch_id=_batch_id(flavor),
            provider=flavor.provider,
            model=model,
            items=items,
            metadata=metadata,
            info={
                "input_file_id": stored.id,
                "endpoint": body["endpoint"],
                "completion_window": body["completion_window"],
            },
        )
        batch.invalid = invalid
        return created(fired, JSONResponse(batch_json(state, flavor, batch, "queued", None)))

    async def batch_get(request: Request) -> Response:
        state = state_of(request)
        batch = _batch(state, request)
        fired = await gate(
            request,
            flavor.provider,
            "batch.get",
            error,
            Target(
                model=batch.model if batch else None, metadata=batch.metadata if batch else None
            ),
        )
        if batch is None:
            return _no_batch(request)
        phase, raw = observe(state, batch, fired)
        return JSONResponse(batch_json(state, flavor, batch, phase, raw))

    async def batch_cancel(request: Request) -> Response:
        state = state_of(request)
        batch = _batch(state, request)
        fired = await gate(
            request,
            flavor.provider,
            "batch.cancel",
            error,
            Target(
                model=batch.model if batch else None, metadata=batch.metadata if batch else None
            ),
        )
        if batch is None:
            return _no_batch(request)
        phase, raw = observe(state, batch, fired)
        if phase == "ended":
            return error(409, None, None, f"Cannot cancel a batch with status '{batch.final}'.")
        batch.cancel(state.clock.now())
        return JSONResponse(batch_json(state, flavor, batch, state.phase(batch), raw))

    async def batch_list(request: Request) -> Response:
        state = state_of(request)
        await gate(request, flavor.provider, "batch.list", error)
        mine = [b for b in reversed(state.batches.values()) if b.provider == flavor.provider]
        after = request.query_params.get("cursor" if flavor.cursor_paging else "after")
        if after:
            ids = [b.id for b in mine]
            mine = mine[ids.index(after) + 1 :] if after in ids else []
        limit = min(100, max(1, int(request.query_params.get("limit", "20"))))
        page, more = mine[:limit], len(mine) > limit
        data = [batch_json(state, flavor, b, state.phase(b), None) for b in page]
        body: dict[str, Any] = {
            "object": "list",
            "data": data,
            "has_more": more,
            "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None,
        }
        if flavor.cursor_paging:
            body["paging"] = {"next_cursor": data[-1]["id"] if more and data else None}
        return JSONResponse(body)

    def _no_batch(request: Request) -> Response:
        return error(404, None, None, f"No batch found with id '{request.path_params['id']}'.")

    def _file_json(stored: Any) -> dict[str, Any]:
        return {
            "id": stored.id,
            "object": "file",
            "bytes": len(stored.content),
            "created_at": int(stored.created_at),
            "filename": stored.filename,
            "purpose": stored.purpose,
            "status": "pending" if stored.pending else "processed",
            "status_details": None,
            "expires_at": None,
        }

    chat_path = (
        "/deployments/{deployment}/chat/completions"
        if flavor.deployments
        else ("/chat/completions")
    )
    guard = azure_guard(flavor.api_version, error) if flavor.azure else (lambda handler: handler)
    chat_route = Route(f"{p}{chat_path}", guard(chat), methods=["POST"])
    live = [chat_route]
    if flavor.responses:
        live.append(
            responses_route(
                p, error, lambda state: counting(state, flavor, "chat", error), flavor.cache_minimum
            )
        )
    if not flavor.batch:
        return live
    return [
        *live,
        Route(f"{p}/files", guard(upload), methods=["POST"]),
        Route(f"{p}/files", guard(file_list), methods=["GET"]),
        Route(f"{p}/files/{{file_id}}", guard(file_get), methods=["GET"]),
        Route(f"{p}/files/{{file_id}}", guard(file_delete), methods=["DELETE"]),
        Route(f"{p}/files/{{file_id}}/content", guard(file_content), methods=["GET"]),
        Route(f"{p}/batches", guard(batch_create), methods=["POST"]),
        Route(f"{p}/batches", guard(batch_list), methods=["GET"]),
        Route(f"{p}/batches/{{id}}", guard(batch_get), methods=["GET"]),
        Route(f"{p}/batches/{{id}}/cancel", guard(batch_cancel), methods=["POST"]),
    ]


def _routed(body: dict[str, Any]) -> str:
    """The provider OpenRouter serves a request with: the first of its ``provider.order``,
    else the model's vendor."""
    order = (body.get("provider") or {}).get("order") or []
    return str(order[0]) if order else str(body.get("model", "")).split("/")[0].title()


def counting(state: EmulatorState, flavor: Flavor, op: str, error: Any) -> Any:
    """An error renderer that first counts the request (a body that does not parse still
    reaches the counters, as every received request must)."""

    def render(
        status: int, code: str | None, retry_after: float | None, message: str | None
    ) -> Response:
        state.stats.count(flavor.provider, op)
        response: Response = error(status, code, retry_after, message)
        return response

    return render


def _batch(state: EmulatorState, request: Request) -> Batch | None:
    return state.batches.get(request.path_params["id"])


def _file_id(flavor: Flavor) -> str:
    return flavor.file_prefix + uuid.uuid4().hex[:24]


def _batch_id(flavor: Flavor) -> str:
    return flavor.batch_prefix + uuid.uuid4().hex[:24]


def multipart_fields(content_type: str, raw: bytes) -> dict[str, tuple[str | None, bytes]]:
    """Decode a ``multipart/form-data`` body into {field: (filename, bytes)} (stdlib only)."""
    head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode()
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + raw)
    fields: dict[str, tuple[str | None, bytes]] = {}
    if not message.is_multipart():
        return fields
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if isinstance(name, str):
            payload = part.get_payload(decode=True)
            fields[name] = (part.get_filename(), payload if isinstance(payload, bytes) else b"")
    return fields


def parse_input(
    content: bytes, flavor: Flavor, endpoint: str | None = None
) -> tuple[list[BatchItem], list[dict[str, Any]], list[dict[str, Any]]]:
    """Decode a batch input file; return its items, OpenAI-style validation errors and the
    cache markers of the lines that carried any. ``endpoint``: the batch's; a line naming
    another ``url`` is refused (every line of a file goes to the batch's endpoint)."""
    provider = flavor.provider
    items: list[BatchItem] = []
    invalid: list[dict[str, Any]] = []
    marked: list[dict[str, Any]] = []
    seen: set[str] = set()
    if flavor.azure and content.startswith(b"\xef\xbb\xbf"):
        # Azure reads a file with a UTF-8 BOM as having no deployment at all.
        message = "The batch input file has no valid deployment name."
        return [], [{"code": "invalid_request", "line": 1, "param": None, "message": message}], []
    deployments: set[str] = set()
    for number, line in enumerate(content.decode("utf-8", "replace").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            custom_id, body = str(row["custom_id"]), row["body"]
            routed = row.get("url") in flavor.batch_urls or not flavor.line_url
            if not routed or not isinstance(body, dict):
                raise ValueError(f"url must be one of {sorted(flavor.batch_urls)}, body an object")
            if flavor.line_url and endpoint is not None and row.get("url") != endpoint:
                raise ValueError(f"url {row.get('url')!r} is not the batch's endpoint {endpoint!r}")
        except (ValueError, KeyError, TypeError) as exc:
            invalid.append(
                {
                    "code": "invalid_request",
                    "line": number,
                    "param": None,
                    "message": f"Line {number}: {exc}",
                }
            )
            continue
        if custom_id in seen:
            invalid.append(
                {
                    "code": "duplicate_custom_id",
                    "line": number,
                    "param": "custom_id",
                    "message": f"The custom_id '{custom_id}' is not unique.",
                }
            )
            continue
        seen.add(custom_id)
        if flavor.line_url and row.get("url") == RESPONSES_ENDPOINT:
            _responses_line(number, custom_id, body, items, invalid)
            continue
        deployments.add(str(body.get("model", "")))
        if flavor.azure and len(deployments) > 1:
            invalid.append(
                {
                    "code": "model_mismatch",
                    "line": number,
                    "param": "body.model",
                    "message": "A batch file may target one deployment only.",
                }
            )
            continue
        wrong = wire_error(provider, body) or batch_limit_error(provider, body)
        refused = groq_refusal(body, str(body.get("model", ""))) if provider == "groq" else None
        if wrong is None and refused is not None:
            wrong = (400, None, refused)
        if wrong is not None:
            message = f"Line {number}: {wrong[2]}"
            invalid.append(
                {"code": "invalid_request", "line": number, "param": "body", "message": message}
            )
            continue
        canonical, schema, max_tokens = chat_request(body)
        model = str(body.get("model", ""))
        prompt = body.get("messages", [])
        plan, markers = openai_plan(
            provider, model, body, prompt_tokens(prompt, canonical), flavor.cache_minimum
        )
        if markers:
            marked.append({"custom_id": custom_id, **markers})
        tools, results, turns = tool_turns(body)
        items.append(
            BatchItem(
                custom_id=custom_id,
                model=model,
                canonical=canonical,
                prompt=prompt,
                schema=schema,
                max_tokens=max_tokens,
                cache=plan,
                tools=tools,
                results=results,
                turns=turns,
                search=asked_search(flavor, body, model),
            )
        )
    if not items and not invalid:
        invalid.append(
            {
                "code": "empty_file",
                "line": None,
                "param": None,
                "message": "The input file has no requests.",
            }
        )
    return items, invalid, marked


def _responses_line(
    number: int,
    custom_id: str,
    body: dict[str, Any],
    items: list[BatchItem],
    invalid: list[dict[str, Any]],
) -> None:
    """A line of a ``/v1/responses`` batch: its item, or why OpenAI refuses it."""
    item, wrong = responses_item(custom_id, body)
    if item is not None:
        items.append(item)
        return
    message = f"Line {number}: {wrong}"
    invalid.append({"code": "invalid_request", "line": number, "param": "body", "message": message})


def batch_json(
    state: EmulatorState, flavor: Flavor, batch: Batch, phase: str, raw_status: str | None
) -> dict[str, Any]:
    """The batch object as the SDK reads it (``raw_status`` overrides ``status``)."""
    start, d = int(batch.created_at), batch.duration
    status = status_name(batch, phase)
    total = 0 if phase == "queued" else len(batch.items)
    completed = math.floor(total * batch.progress(batch.elapsed(state.clock.now())))
    failed = 0
    ended = phase == "ended"
    if ended:
        write_results(state, flavor, batch)
        results = batch.results or []
        completed = sum(r.kind == "answered" for r in results)
        failed = sum(r.kind != "answered" for r in results)
        total = len(batch.items) if batch.final != "failed" or not batch.invalid else 0
    stamp = int(batch.ended_at or 0)
    # OpenAI reports a finished batch's total usage; Groq's batch object has none.
    usage = _usage(batch.results or []) if ended and flavor.provider == "openai" else None
    return {
        "id": batch.id,
        "object": "batch",
        "endpoint": batch.info["endpoint"],
        "model": batch.model,
        "input_file_id": batch.info["input_file_id"],
        "completion_window": batch.info["completion_window"],
        "status": raw_status or status,
        "output_file_id": batch.info.get("output_file_id"),
        "error_file_id": batch.info.get("error_file_id"),
        "errors": _errors(batch) if ended and batch.final == "failed" else None,
        "created_at": start,
        "expires_at": None if flavor.azure else start + 86400,  # Azure never expires
        "in_progress_at": start + int(d / 4) if phase != "queued" else None,
        "finalizing_at": start + int(3 * d / 4)
        if phase in ("finalizing",) or (ended and batch.final == "completed")
        else None,
        "completed_at": stamp if ended and batch.final == "completed" else None,
        "failed_at": stamp if ended and batch.final == "failed" else None,
        "expired_at": stamp if ended and batch.final == "expired" else None,
        "cancelling_at": int(batch.cancel_requested_at) if batch.cancel_requested_at else None,
        "cancelled_at": stamp if ended and batch.final == "cancelled" else None,
        "request_counts": {"total": total, "completed": completed, "failed": failed},
        "metadata": batch.metadata or None,
        "usage": usage,
    }


def status_name(batch: Batch, phase: str) -> str:
    """OpenAI's (and Groq's) batch ``status`` for a phase."""
    return (batch.final or "completed") if phase == "ended" else _STATUS[phase]


def _errors(batch: Batch) -> dict[str, Any]:
    data = batch.invalid or [
        {
            "code": "batch_failed",
            "line": None,
            "param": None,
            "message": "The batch failed (injected by the emulator).",
        }
    ]
    return {"object": "list", "data": data}


def _usage(results: list[ItemResult]) -> dict[str, Any]:
    answers = [r.answer for r in results if r.answer is not None]
    inp = sum(a.input_tokens for a in answers)
    out = sum(a.output_tokens for a in answers)
    return {
        "input_tokens": inp,
        "output_tokens": out,
        "total_tokens": inp + out,
        "input_tokens_details": {"cached_tokens": sum(a.cached_tokens for a in answers)},
        "output_tokens_details": {"reasoning_tokens": 0},
    }


def write_results(state: EmulatorState, flavor: Flavor, batch: Batch) -> None:
    """Create the output and error files of an ended batch, once."""
    if "results_written" in batch.info:
        return
    batch.info["results_written"] = True
    out, err = [], []
    for result in batch.results or []:
        line: dict[str, Any] = {
            "id": "batch_req_" + uuid.uuid4().hex[:24],
            "custom_id": result.item.custom_id,
            "error": None,
        }
        if result.kind == "answered" and result.answer is not None:
            tier = "batch" if flavor.provider == "openai" else flavor.service_tier
            body = (
                response_object(result.item.model, result.answer, state.clock.now(), tier)
                if result.item.extra.get("endpoint") == RESPONSES_ENDPOINT
                else completion(flavor, result.item.model, result.answer, state.clock.now(), tier)
            )
            line["response"] = {
                "status_code": 200,
                "request_id": "req_" + uuid.uuid4().hex,
                "body": body,
            }
            out.append(line)
        elif result.kind == "errored" and result.error is not None:
            e = result.error
            body = (
                e.body
                if e.body is not None
                else {"error": prompt_filter_error()}
                if flavor.azure and e.code == "content_filter"
                else {
                    "error": {
                        "message": e.message,
                        "type": _TYPES.get(e.status, "server_error"),
                        "param": None,
                        "code": e.code,
                    }
                }
            )
            line["response"] = {
                "status_code": e.status,
                "request_id": "req_" + uuid.uuid4().hex,
                "body": body,
            }
            err.append(line)
        elif batch.final in ("expired", "cancelled"):
            code = "batch_expired" if batch.final == "expired" else "batch_cancelled"
            line["response"] = None
            line["error"] = {
                "code": code,
                "message": f"This request was not run: the batch "
                f"was {batch.final} before it was processed.",
            }
            err.append(line)
    for key, lines in (("output_file_id", out), ("error_file_id", err)):
        if lines:
            content = "".join(json.dumps(x) + "\n" for x in lines).encode()
            stored = state.add_file(
                flavor.provider,
                _file_id(flavor),
                f"{batch.id}_{key}.jsonl",
                "batch_output",
                content,
            )
            batch.info[key] = stored.id


_CLONE = Flavor(
    provider="",
    prefix="",
    file_prefix="file-",
    batch_prefix="batch_",
    retry_after_ms=False,
    service_tier="default",
    windows=frozenset(),
    cursor_paging=False,
    usage_timings=False,
    cache_minimum=None,
    batch=False,
)

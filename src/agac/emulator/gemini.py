"""Gemini's (Developer API) wire protocol: generateContent, files, the Batch API and
explicit context caches (:mod:`.gemini_caches`).

Shapes follow the ``google-genai`` SDK's converters (``batches._BatchJob_from_mldev``,
``_api_client.upload_file``). Structured output is read from
``generationConfig.responseJsonSchema`` or ``responseSchema`` (OpenAPI subset).
``usageMetadata.promptTokenCount`` includes ``cachedContentTokenCount``, what the implicit
prompt cache read (:mod:`.caching`). A request with ``serviceTier: flex`` is answered with
``usageMetadata.serviceTier: flex`` and the header ``x-gemini-service-tier: flex`` (the flex
tier's 503 ``UNAVAILABLE`` is a fault).

Batches are long-running operations named ``batches/<id>`` whose ``metadata.state`` is a
``BATCH_STATE_*`` word (the SDK renames it ``JOB_STATE_*``); results live only in
``metadata.output``: ``responsesFile`` for file input, ``inlinedResponses.inlinedResponses``
(nested twice, as on the wire) for inline input. ``batchStats`` counts are strings
(int64). The Developer API has no cancelling state: a batch being cancelled still says
``BATCH_STATE_RUNNING``. Files upload through Google's resumable protocol: ``start``
returns ``x-goog-upload-url``; chunks answer ``x-goog-upload-status: active`` and the
``finalize`` chunk ``final`` with ``{"file": …}``; uploaded attachments and ``file_data``
parts are handled in :mod:`.gemini_files`. Gemini 3's thought signatures on function calls
are given and required back as the API does (:mod:`.gemini_signatures`). Errors are ``google.rpc.Status`` bodies;
a 429 carries a ``QuotaFailure`` detail and, when a wait is known, a ``RetryInfo``.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from . import gemini_caches
from .answers import Answer, answer, prompt_tokens
from .caching import gemini_plan
from .faults import Target
from .gemini_files import finish_upload, take_files
from .gemini_signatures import sign_calls, unsigned_call
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
    state_of,
)
from .media import take_attachments
from .search import Source, gemini_asked
from .state import Batch, BatchItem, EmulatorState, ItemError, ItemResult, StoredFile, with_cache

__all__ = [
    "STATUS_NAMES",
    "decode_request",
    "error",
    "generate",
    "response",
    "routes",
    "status_name",
]

PROVIDER = "gemini"
STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ABORTED",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "NOT_IMPLEMENTED",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
_STATES = {
    "completed": "BATCH_STATE_SUCCEEDED",
    "failed": "BATCH_STATE_FAILED",
    "expired": "BATCH_STATE_EXPIRED",
    "cancelled": "BATCH_STATE_CANCELLED",
}
_T = "type.googleapis.com/google.rpc."


def error(
    status: int, code: str | None, retry_after: float | None, message: str | None
) -> Response:
    """A ``google.rpc.Status`` error body in Google's JSON mapping.

    A 429 always carries a ``QuotaFailure``: per minute with a ``RetryInfo`` when
    ``retry_after`` is given, per day (no ``RetryInfo``: retrying will not help) when not.
    ``code`` becomes an ``ErrorInfo.reason``.
    """
    details: list[dict[str, Any]] = []
    if code:
        details.append(
            {
                "@type": _T + "ErrorInfo",
                "reason": code,
                "domain": "generativelanguage.googleapis.com",
            }
        )
    if status == 429:
        per = "PerMinute" if retry_after is not None else "PerDay"
        details.append(
            {
                "@type": _T + "QuotaFailure",
                "violations": [
                    {
                        "quotaMetric": "generativelanguage.googleapis.com/generate_content_requests",
                        "quotaId": f"GenerateRequests{per}PerProjectPerModel",
                        "quotaValue": "10",
                    }
                ],
            }
        )
    if retry_after is not None:
        # A protobuf Duration in JSON: whole seconds, or with a fraction ("0.05s").
        details.append({"@type": _T + "RetryInfo", "retryDelay": f"{float(retry_after):g}s"})
    name = STATUS_NAMES.get(status, "UNKNOWN")
    text = message or {
        429: "You exceeded your current quota.",
        503: "The model is overloaded. Please try again later.",
    }.get(status, f"Emulated error {status} ({name}).")
    body = {"error": {"code": status, "message": text, "status": name, "details": details}}
    return JSONResponse(body, status_code=status)


def decode_request(body: dict[str, Any]) -> tuple[Any, Any, dict[str, Any] | None, int | None]:
    """(canonical, prompt, schema, max tokens) of a GenerateContentRequest."""
    config = body.get("generationConfig") or {}
    schema = config.get("responseJsonSchema") or config.get("responseSchema")
    if schema is None and config.get("responseMimeType") == "application/json":
        schema = {"type": "object", "properties": {"answer": {"type": "string"}}}
    canonical = {k: v for k, v in body.items() if k != "model"}
    prompt = [body.get("systemInstruction") or {}, body.get("contents") or []]
    return canonical, prompt, schema, config.get("maxOutputTokens")


#: The model families the emulated Gemini serves on its flex tier (as agac's spec says);
#: a flex request for another model is refused 400, as Gemini refuses it.
FLEX_FAMILIES = ("gemini-2.5-", "gemini-3")


def _flex(body: dict[str, Any]) -> bool:
    """The request asks for the flex tier (``serviceTier``, any case: the SDK sends
    ``flex``, Google's REST samples ``FLEX``)."""
    return str(body.get("serviceTier") or "").lower() == "flex"


def response(model: str, ans: Answer, *, flex: bool = False) -> dict[str, Any]:
    """A GenerateContentResponse for ``ans``, bent by its ``reply`` fault: ``stop`` (any
    ``finishReason``), ``safety_category`` (a blocked safety rating on the candidate),
    ``block_reason`` and ``block_reason_message`` (the prompt blocked: no candidate,
    ``promptFeedback``), ``content`` (the text, null for no parts), ``blocks`` (the parts
    in order: ``text``, ``thought``), ``usage`` (``cache_read_tokens``,
    ``reasoning_tokens`` — ``thoughtsTokenCount`` —, ``web_search_requests`` — grounding
    queries) or ``body`` (the whole response)."""
    reply = ans.reply or {}
    if "body" in reply:
        return dict(reply["body"])
    extra = reply.get("usage") or {}
    cached = int(extra.get("cache_read_tokens", ans.cached_tokens))
    prompt = ans.input_tokens - ans.cached_tokens + cached
    thoughts = int(extra.get("reasoning_tokens", 0))
    usage: dict[str, Any] = {
        "promptTokenCount": prompt,
        "candidatesTokenCount": ans.output_tokens,
        "totalTokenCount": prompt + ans.output_tokens + thoughts,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": prompt}],
    }
    if cached:
        usage["cachedContentTokenCount"] = cached
    if thoughts:
        usage["thoughtsTokenCount"] = thoughts
    if flex:
        usage["serviceTier"] = "flex"
    out: dict[str, Any] = {
        "usageMetadata": usage,
        "modelVersion": model,
        "responseId": uuid.uuid4().hex[:22],
    }
    if "block_reason" in reply:
        feedback: dict[str, Any] = {"blockReason": reply["block_reason"]}
        if "block_reason_message" in reply:
            feedback["blockReasonMessage"] = reply["block_reason_message"]
        feedback["safetyRatings"] = [
            {
                "category": reply.get("safety_category", "HARM_CATEGORY_DANGEROUS_CONTENT"),
                "probability": "HIGH",
                "blocked": True,
            }
        ]
        return {**out, "promptFeedback": feedback}
    text = reply.get("content", ans.text)
    if ans.text is None and not ans.tool_calls and "stop" not in reply:
        candidate: dict[str, Any] = {
            "finishReason": "SAFETY",
            "index": 0,
            "safetyRatings": [
                {
                    "category": "HARM_CATEGORY_DANGEROUS_CONTENT",
                    "probability": "HIGH",
                    "blocked": True,
                }
            ],
        }
    elif ans.tool_calls:
        # No call ids: the Gemini API leaves ``functionCall.id`` out on most models.
        calls = sign_calls(
            model, [{"functionCall": {"name": n, "args": json.loads(a)}} for n, a in ans.tool_calls]
        )
        candidate = {
            "content": {"parts": calls, "role": "model"},
            "finishReason": reply.get("stop") or "STOP",
            "index": 0,
        }
    else:
        parts = []
        for kind in reply.get("blocks") or ["text"]:
            if kind == "thought":
                parts.append({"text": "Thinking about the question.", "thought": True})
            elif kind == "text" and text is not None:
                parts.append({"text": text})
        candidate = {
            "content": {"parts": parts, "role": "model"},
            "finishReason": reply.get("stop")
            or ("MAX_TOKENS" if ans.finish == "length" else "STOP"),
            "index": 0,
        }
    if "safety_category" in reply:
        candidate["safetyRatings"] = [
            {"category": reply["safety_category"], "probability": "HIGH", "blocked": True}
        ]
    searches = int(extra.get("web_search_requests", 0))
    if searches:
        candidate["groundingMetadata"] = {
            "webSearchQueries": [f"emulated query {i}" for i in range(searches)]
        }
    elif ans.sources and not ans.tool_calls and text is not None:
        candidate["groundingMetadata"] = grounding(ans.sources, text)
    return {**out, "candidates": [candidate]}


def grounding(sources: tuple[Source, ...], text: str) -> dict[str, Any]:
    """What Google Search grounding adds to a candidate: the queries, a web chunk per
    source, and one support citing every chunk for the whole answer."""
    return {
        "webSearchQueries": [s.query for s in sources],
        "groundingChunks": [{"web": {"uri": s.url, "title": s.title}} for s in sources],
        "groundingSupports": [
            {
                "segment": {"startIndex": 0, "endIndex": len(text.encode()), "text": text},
                "groundingChunkIndices": list(range(len(sources))),
            }
        ],
        "searchEntryPoint": {"renderedContent": "<div>emulated</div>"},
    }


def tool_turns(body: dict[str, Any]) -> tuple[frozenset[str], tuple[str, ...], int]:
    """A GenerateContentRequest's tool loop so far: the functions it declares, the results
    its ``functionResponse`` parts send back (``response.result``, else the response as
    JSON), and how many model turns called functions."""
    offered = frozenset(
        str(d.get("name"))
        for t in body.get("tools") or ()
        if isinstance(t, dict)
        for d in t.get("functionDeclarations") or t.get("function_declarations") or ()
        if isinstance(d, dict)
    )
    results: list[str] = []
    turns = 0
    for content in body.get("contents") or ():
        parts = [p for p in (content or {}).get("parts") or () if isinstance(p, dict)]
        turns += content.get("role") == "model" and any("functionCall" in p for p in parts)
        for p in parts:
            answered = (p.get("functionResponse") or {}).get("response")
            if isinstance(answered, dict):
                result = answered.get("result", answered)
                results.append(result if isinstance(result, str) else json.dumps(result))
    return offered, tuple(results), turns


async def models_post(request: Request) -> Response:
    """``models/{model}:generateContent`` and ``:batchGenerateContent``."""
    model, _, method = request.path_params["target"].rpartition(":")
    if method == "generateContent":
        return await generate(request, model)
    if method == "batchGenerateContent":
        return await _create_batch(request, model)
    return error(404, None, None, f"Method {method!r} is not emulated.")


async def generate(request: Request, model: str, provider: str = PROVIDER) -> Response:
    """``generateContent`` of ``model``, counted, faulted and billed as ``provider``
    (Vertex AI serves Gemini's answer on its own path)."""
    state = state_of(request)
    body = await read_json(request, _counted(state, "chat", provider))
    flex = _flex(body)
    target = Target(model=model, tier="flex" if flex else None)
    fired = await gate(request, provider, "chat", error, target)
    if not isinstance(body.get("contents"), list):
        return error(
            400, None, None, "* GenerateContentRequest.contents: contents is not specified"
        )
    refused = gemini_caches.refusal(state, model, body)
    if refused is not None:
        return error(refused[0], None, None, refused[1])
    if flex and not model.startswith(FLEX_FAMILIES):
        return error(400, None, None, f"Model {model} is not supported on the flex service tier.")
    take_files(state, body, error)
    await attachments(request, provider, body, error, model)
    await live_latency(request)
    whole, cache = gemini_caches.expanded(state, body)
    unsigned = unsigned_call(model, whole.get("contents"))
    if unsigned is not None:
        return error(400, None, None, unsigned)
    canonical, prompt, schema, max_tokens = decode_request(whole)
    tools, results, turns = tool_turns(whole)
    ans = answer(
        provider=provider,
        model=model,
        body=canonical,
        prompt=prompt,
        schema=schema,
        max_tokens=max_tokens,
        seed=state.config.seed,
        fault=fired.answer,
        reply=fired.reply,
        tools=tools,
        results=results,
        turns=turns,
        search=gemini_asked(whole.get("tools")),
    )
    plan, markers = gemini_plan(model, body, ans.input_tokens)
    note_cache(request, markers)
    if cache is not None:  # an explicit cache: its tokens are what the call read
        cache.live += 1
        ans = with_cache(ans, cache.tokens, gemini_caches.own_tokens(body))
    else:
        ans = state.cached(ans, plan)
    state.stats.bill(provider, model, canonical)
    state.stats.searched(provider, model, ans.sources)
    headers = {"x-request-id": uuid.uuid4().hex}
    if flex:
        headers["x-gemini-service-tier"] = "flex"
    return JSONResponse(response(model, ans, flex=flex), headers=headers)


def _items(state: EmulatorState, model: str, config: dict[str, Any]) -> list[BatchItem]:
    """Decode ``inputConfig`` (inline requests or an uploaded file) into items."""
    rows: list[tuple[str, Any, dict[str, Any] | None]] = []
    if "fileName" in config:
        stored = state.files.get(str(config["fileName"]).removeprefix("files/"))
        if stored is None:
            raise Rejected(error(404, None, None, f"File {config['fileName']} not found."))
        for number, line in enumerate(stored.content.decode().splitlines(), start=1):
            if line.strip():
                try:
                    row = json.loads(line)
                    rows.append((str(row["key"]), row["request"], None))
                except (ValueError, KeyError, TypeError) as exc:
                    raise Rejected(
                        error(400, None, None, f"Invalid input file line {number}: {exc}")
                    ) from exc
    else:
        entries = ((config.get("requests") or {}).get("requests")) or []
        for index, entry in enumerate(entries):
            metadata = entry.get("metadata")
            key = (metadata or {}).get("key", str(index))
            rows.append((str(key), entry.get("request") or {}, metadata))
    if not rows:
        raise Rejected(error(400, None, None, "* The batch has no requests."))
    return [
        _item(state, model, key, request_body, metadata) for key, request_body, metadata in rows
    ]


def _item(
    state: EmulatorState,
    model: str,
    key: str,
    request_body: dict[str, Any],
    metadata: dict[str, Any] | None,
) -> BatchItem:
    """One batch request, decoded; one naming a context cache is read with the cache's
    contents (and refused as a live call would be when it cannot use it)."""
    take_attachments(PROVIDER, request_body)  # the batch keeps descriptors, not bytes
    take_files(state, request_body, error)
    refused = gemini_caches.refusal(state, model, request_body)
    whole, cache = gemini_caches.expanded(state, request_body)
    canonical, prompt, schema, max_tokens = decode_request(whole)
    plan, markers = gemini_plan(model, request_body, prompt_tokens(prompt, canonical))
    extra: dict[str, Any] = {"metadata": metadata, "cache": markers}
    if cache is not None:
        cache.batch += 1
        extra.update(cached_content=cache.id, own_tokens=gemini_caches.own_tokens(request_body))
    tools, results, turns = tool_turns(whole)
    item = BatchItem(
        custom_id=key,
        model=model,
        canonical=canonical,
        prompt=prompt,
        schema=schema,
        max_tokens=max_tokens,
        extra=extra,
        cache=plan,
        tools=tools,
        results=results,
        turns=turns,
        search=gemini_asked(whole.get("tools")),
    )
    if refused is not None:
        item.error = ItemError(refused[0], None, refused[1])
    return item


async def _create_batch(request: Request, model: str) -> Response:
    state = state_of(request)
    body = await read_json(request, _counted(state, "batch.create"))
    spec = body.get("batch") or {}
    display = spec.get("displayName")
    metadata = {"displayName": display} if display else {}
    fired = await gate(
        request, PROVIDER, "batch.create", error, Target(model=model, metadata=metadata)
    )
    config = spec.get("inputConfig") or {}
    items = _items(state, model, config)
    note_cache(
        request, [{"custom_id": i.custom_id, **i.extra["cache"]} for i in items if i.extra["cache"]]
    )
    batch_id = uuid.uuid4().hex[:20]
    batch = new_batch(
        state,
        fired,
        batch_id=batch_id,
        provider=PROVIDER,
        model=model,
        items=items,
        metadata=metadata,
        info={
            "name": f"batches/{batch_id}",
            "display_name": display,
            "file_input": "fileName" in config,
        },
    )
    return created(fired, JSONResponse(operation(state, batch, "queued", None, _base(request))))


def status_name(batch: Batch, phase: str) -> str:
    """The wire ``BATCH_STATE_*`` for a phase."""
    if phase == "ended":
        return _STATES[batch.final or "completed"]
    return "BATCH_STATE_PENDING" if phase == "queued" else "BATCH_STATE_RUNNING"


def operation(
    state: EmulatorState, batch: Batch, phase: str, raw: str | None, base: str
) -> dict[str, Any]:
    """The batch as a long-running Operation (``raw`` overrides ``metadata.state``)."""
    total = len(batch.items)
    results = batch.results or []
    ok = sum(r.kind == "answered" for r in results)
    bad = sum(r.kind == "errored" for r in results)
    meta: dict[str, Any] = {
        "@type": "type.googleapis.com/google.ai.generativelanguage.v1beta.GenerateContentBatch",
        "model": f"models/{batch.model}",
        "displayName": batch.info.get("display_name"),
        "state": raw or status_name(batch, phase),
        "createTime": _stamp(batch.created_at),
        "updateTime": _stamp(state.clock.now()),
        "batchStats": {
            "requestCount": str(total),
            "successfulRequestCount": str(ok),
            "failedRequestCount": str(bad),
            "pendingRequestCount": str(0 if phase == "ended" else total),
        },
    }
    done = phase == "ended"
    if done:
        meta["endTime"] = _stamp(batch.ended_at or state.clock.now())
        output = _output(state, batch, base)
        if output is not None:
            meta["output"] = output
    op: dict[str, Any] = {"name": batch.info["name"], "metadata": meta, "done": done}
    if done and batch.final == "failed":
        op["error"] = {"code": 13, "message": "The batch failed (injected by the emulator)."}
    elif done and "output" in meta:
        op["response"] = {
            "@type": "type.googleapis.com/google.ai.generativelanguage.v1beta."
            "GenerateContentBatchOutput",
            **meta["output"],
        }
    return op


def _result(result: ItemResult) -> dict[str, Any]:
    if result.answer is not None:
        return {"response": response(result.item.model, result.answer)}
    e = result.error
    if e is not None and e.body is not None:
        return {"error": e.body.get("error", e.body) if isinstance(e.body, dict) else e.body}
    status = e.status if e else 500
    return {
        "error": {
            "code": status,
            "message": e.message if e else "internal error",
            "status": STATUS_NAMES.get(status, "UNKNOWN"),
        }
    }


def _output(state: EmulatorState, batch: Batch, base: str) -> dict[str, Any] | None:
    """``metadata.output`` of an ended batch; ``None`` when nothing was answered."""
    ran = [r for r in batch.results or [] if r.kind != "unanswered"]
    if not ran:
        return None
    if not batch.info.get("file_input"):
        inlined = []
        for r in ran:
            entry = _result(r)
            if r.item.extra.get("metadata") is not None:
                entry["metadata"] = r.item.extra["metadata"]
            inlined.append(entry)
        return {"inlinedResponses": {"inlinedResponses": inlined}}
    if "responses_file" not in batch.info:
        lines = "".join(json.dumps({"key": r.item.custom_id, **_result(r)}) + "\n" for r in ran)
        file_id = uuid.uuid4().hex[:12]
        state.add_file(
            PROVIDER, file_id, f"batch-{batch.id}-responses.jsonl", "generated", lines.encode()
        )
        batch.info["responses_file"] = f"files/{file_id}"
    return {"responsesFile": batch.info["responses_file"]}


async def batches_get(request: Request) -> Response:
    state = state_of(request)
    batch = _find(state, request.path_params["id"])
    fired = await gate(request, PROVIDER, "batch.get", error, _target(batch))
    if batch is None:
        return _missing(request.path_params["id"])
    phase, raw = observe(state, batch, fired)
    return JSONResponse(operation(state, batch, phase, raw, _base(request)))


async def batches_post(request: Request) -> Response:
    """``batches/{id}:cancel``."""
    batch_id, _, method = request.path_params["id"].partition(":")
    if method != "cancel":
        return error(404, None, None, f"Method {method!r} is not emulated.")
    state = state_of(request)
    batch = _find(state, batch_id)
    fired = await gate(request, PROVIDER, "batch.cancel", error, _target(batch))
    if batch is None:
        return _missing(batch_id)
    phase, _ = observe(state, batch, fired)
    if phase == "ended":
        return error(400, None, None, f"Batch batches/{batch_id} is already in a final state.")
    batch.cancel(state.clock.now())
    state.phase(batch)
    return JSONResponse({})


async def batches_delete(request: Request) -> Response:
    state = state_of(request)
    batch = _find(state, request.path_params["id"])
    await gate(request, PROVIDER, "batch.delete", error, _target(batch))
    if batch is None:
        return _missing(request.path_params["id"])
    del state.batches[batch.id]
    return JSONResponse({})


async def batches_list(request: Request) -> Response:
    state = state_of(request)
    await gate(request, PROVIDER, "batch.list", error)
    mine = [b for b in reversed(state.batches.values()) if b.provider == PROVIDER]
    start = int(request.query_params.get("pageToken") or 0)
    size = min(1000, max(1, int(request.query_params.get("pageSize") or 50)))
    page = mine[start : start + size]
    body: dict[str, Any] = {
        "operations": [operation(state, b, state.phase(b), None, _base(request)) for b in page]
    }
    if start + size < len(mine):
        body["nextPageToken"] = str(start + size)
    return JSONResponse(body)


async def upload(request: Request) -> Response:
    """The resumable upload protocol: ``start``, then ``upload[, finalize]`` chunks."""
    state = state_of(request)
    command = request.headers.get("x-goog-upload-command", "")
    sessions = state.uploads
    if command.strip() == "start":
        await gate(request, PROVIDER, "file.upload", error)
        spec = (json.loads(await request.body() or b"{}").get("file")) or {}
        upload_id = uuid.uuid4().hex
        sessions[upload_id] = {
            "chunks": [],
            "spec": spec,
            "mime": request.headers.get(
                "x-goog-upload-header-content-type", "application/octet-stream"
            ),
        }
        url = (
            f"{_base(request)}/upload/v1beta/files?upload_id={upload_id}&upload_protocol=resumable"
        )
        return Response(b"", headers={"x-goog-upload-url": url, "x-goog-upload-status": "active"})
    session = sessions.get(request.query_params.get("upload_id", ""))
    if session is None:
        return error(404, None, None, "Unknown upload session.")
    session["chunks"].append(await request.body())
    if "finalize" not in command:
        return Response(b"", headers={"x-goog-upload-status": "active"})
    del sessions[request.query_params["upload_id"]]
    file_id = uuid.uuid4().hex[:12]
    stored = finish_upload(
        state,
        file_id,
        session["spec"].get("displayName") or file_id,
        session["mime"],
        b"".join(session["chunks"]),
    )
    return JSONResponse(
        {"file": file_json(stored, _base(request))}, headers={"x-goog-upload-status": "final"}
    )


def file_json(stored: StoredFile, base: str) -> dict[str, Any]:
    """A ``File`` resource."""
    body = {
        "name": f"files/{stored.id}",
        "displayName": stored.filename,
        "mimeType": stored.mime_type,
        "sizeBytes": str(stored.size),
        "createTime": _stamp(stored.created_at),
        "updateTime": _stamp(stored.created_at),
        "expirationTime": _stamp(stored.created_at + 48 * 3600),
        "uri": f"{base}/v1beta/files/{stored.id}",
        "state": "ACTIVE",
        "source": "GENERATED" if stored.purpose == "generated" else "UPLOADED",
    }
    if stored.purpose == "generated":
        body["downloadUri"] = f"{base}/v1beta/files/{stored.id}:download?alt=media"
    return body


async def files_get(request: Request) -> Response:
    """``files/{id}`` (metadata) and ``files/{id}:download?alt=media`` (content)."""
    state = state_of(request)
    file_id, _, method = request.path_params["id"].partition(":")
    op = "file.download" if method == "download" else "file.get"
    await gate(request, PROVIDER, op, error)
    stored = state.files.get(file_id)
    if stored is None or stored.provider != PROVIDER:
        return error(404, None, None, f"File files/{file_id} not found.")
    if method == "download":
        return Response(stored.content, media_type="application/octet-stream")
    return JSONResponse(file_json(stored, _base(request)))


async def files_list(request: Request) -> Response:
    state = state_of(request)
    await gate(request, PROVIDER, "file.list", error)
    return JSONResponse(
        {
            "files": [
                file_json(f, _base(request)) for f in state.files.values() if f.provider == PROVIDER
            ]
        }
    )


async def files_delete(request: Request) -> Response:
    state = state_of(request)
    await gate(request, PROVIDER, "file.delete", error)
    if state.files.pop(request.path_params["id"], None) is None:
        return error(404, None, None, f"File files/{request.path_params['id']} not found.")
    return JSONResponse({})


def _find(state: EmulatorState, batch_id: str) -> Batch | None:
    batch = state.batches.get(batch_id)
    return batch if batch is not None and batch.provider == PROVIDER else None


def _target(batch: Batch | None) -> Target:
    return Target(model=batch.model if batch else None, metadata=batch.metadata if batch else None)


def _missing(batch_id: str) -> Response:
    return error(404, None, None, f"Batch batches/{batch_id} not found.")


def _stamp(when: float) -> str:
    return datetime.fromtimestamp(when, UTC).isoformat().replace("+00:00", "Z")


def _base(request: Request) -> str:
    return str(request.base_url).rstrip("/")


def _counted(state: EmulatorState, op: str, provider: str = PROVIDER) -> Any:
    def render(
        status: int, code: str | None, retry_after: float | None, message: str | None
    ) -> Response:
        state.stats.count(provider, op)
        return error(status, code, retry_after, message)

    return render


def routes() -> list[Route]:
    """Gemini's routes under ``/v1beta`` and ``/upload/v1beta``."""
    return [
        Route("/v1beta/models/{target}", models_post, methods=["POST"]),
        *gemini_caches.routes(error),
        Route("/v1beta/batches", batches_list, methods=["GET"]),
        Route("/v1beta/batches/{id}", batches_get, methods=["GET"]),
        Route("/v1beta/batches/{id}", batches_post, methods=["POST"]),
        Route("/v1beta/batches/{id}", batches_delete, methods=["DELETE"]),
        Route("/upload/v1beta/files", upload, methods=["POST"]),
        Route("/v1beta/files", files_list, methods=["GET"]),
        Route("/v1beta/files/{id}", files_get, methods=["GET"]),
        Route("/v1beta/files/{id}", files_delete, methods=["DELETE"]),
    ]

"""How Anthropic's Messages wire reads: an answer (a ``message`` object, from the SDK or
as JSON, live or in a batch result line), a batch's status and an errored batch item.
The adapter (:mod:`agac.providers.anthropic`) sends; this module reads.
"""

from __future__ import annotations

import json
from typing import Any

from agac.errors import ProviderError
from agac.providers._common import SCHEMA_NAME, as_int, parse_json, pick
from agac.providers._errors import classify
from agac.providers._tool_wire import anthropic_calls
from agac.providers.base import (
    BatchState,
    BatchStatus,
    Response,
    Usage,
    server_tool_counts,
)
from agac.providers.servertools import Citation, distinct_citations
from agac.providers.stops import read_stop

__all__ = [
    "BATCH_STATES",
    "ERROR_TYPE_STATUS",
    "batch_status",
    "billed_usage",
    "item_error",
    "message_response",
    "tool_schema",
]

BATCH_STATES: dict[str, BatchState] = {
    "in_progress": "running",
    "canceling": "cancelling",  # one L on Anthropic
    "ended": "ended",
}

# error.type of an errored batch item -> the HTTP status it stands for.
ERROR_TYPE_STATUS: dict[str, int] = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}

# Tool input must be an object: other schemas are wrapped under this property.
_WRAP_KEY = "agac_value"


def message_response(
    message: Any,
    *,
    latency_ms: float,
    service_tier: str | None = None,
    parse: bool = True,
    request_id: str | None = None,
    offered: frozenset[str] = frozenset(),
) -> Response:
    """Normalize a Message per docs/providers.md, on every path (SDK, lean transport, batch).

    Anthropic's ``input_tokens`` already excludes cache reads and writes; writes are
    kept as ``cache_write_tokens``. A ``tool_use`` block named ``answer`` is the
    forced-tool form of structured output: its input is the answer; any other ``tool_use``
    block is a tool call the action did not ask for, whatever the stop. The answer is the
    text blocks joined (the web pages they cite its citations); thinking, server-tool and
    other blocks stay out of it. The stop
    is read by :func:`read_stop`; ``stop_details`` (a refusal's category and
    explanation) becomes its detail. ``offered``: the functions the request offered; a
    turn calling only those is ``tool_use``, its calls in :attr:`Response.tool_calls`.
    """
    texts: list[str] = []
    cited: list[Citation] = []
    tool_input: Any = None
    called: str | None = None
    content = pick(message, "content") or []
    for block in content:
        kind = pick(block, "type")
        if kind == "text":
            texts.append(pick(block, "text") or "")
            cited += _citations(pick(block, "citations"))
        elif kind == "tool_use" and pick(block, "name") == SCHEMA_NAME:
            tool_input = _unwrap_tool_input(pick(block, "input"))
        elif kind == "tool_use" and called is None:
            called = str(pick(block, "name") or "")
    calls = anthropic_calls(content, SCHEMA_NAME) if offered and called is not None else ()
    stop = read_stop(
        "anthropic",
        pick(message, "stop_reason"),
        tool_answer=tool_input is not None,
        detail=_stop_details(pick(message, "stop_details")),
        tool_call=called,
        offered=bool(calls) and all(c.name in offered for c in calls),
    )
    if tool_input is not None and stop.reason != "tool_use":
        text = json.dumps(tool_input, ensure_ascii=False)
        parsed = tool_input
    else:
        text = "".join(texts)
        parsed = parse_json(text) if parse and stop.reason == "end" else None
    usage = pick(message, "usage")
    refused = stop.reason == "refusal"
    return Response(
        text=text,
        model=str(pick(message, "model") or ""),
        stop_reason=stop.reason,
        usage=billed_usage(usage),
        parsed=parsed,
        service_tier=service_tier or pick(usage, "service_tier"),
        latency_ms=latency_ms,
        # A refusal may come with no text at all.
        refusal=(text or "the model declined to answer") if refused else None,
        raw_stop=stop.raw,
        stop_detail=stop.detail,
        paused=_wire_blocks(content) if stop.reason == "paused" else None,
        request_id=request_id,
        tool_calls=calls if stop.reason == "tool_use" else (),
        citations=distinct_citations(cited),
    )


def _citations(found: Any) -> list[Citation]:
    """A text block's ``citations`` that name a web page (``web_search_result_location``:
    ``url``, ``title``, ``cited_text``); a document's locations name none."""
    out = []
    for c in found or ():
        url = pick(c, "url")
        if url:
            title, text = pick(c, "title"), pick(c, "cited_text")
            out.append(Citation(str(url), title and str(title), text and str(text)))
    return out


#: The token fields of a usage object (and of each of its ``iterations``), as
#: (Usage field, wire path) pairs.
_TOKEN_FIELDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("input_tokens", ("input_tokens",)),
    ("output_tokens", ("output_tokens",)),
    ("cached_tokens", ("cache_read_input_tokens",)),
    ("cache_write_tokens", ("cache_creation_input_tokens",)),
    ("cache_write_1h_tokens", ("cache_creation", "ephemeral_1h_input_tokens")),
)


def billed_usage(usage: Any) -> Usage:
    """What a message's ``usage`` bills. With ``iterations`` (server-side compaction, tool
    loops), the billed tokens are the sum over every iteration: a ``compaction`` entry's
    tokens are not in the top-level fields, which count the last sampling only (the
    recorded case: 229 in / 5 out / 0 cache writes at the top, 329 / 136 / 55,096 billed).
    Each count is never less than the top level's."""
    counts = {name: as_int(pick(usage, *path)) for name, path in _TOKEN_FIELDS}
    iterations = pick(usage, "iterations") or []
    if iterations:
        summed = {
            name: sum(as_int(pick(it, *path)) for it in iterations) for name, path in _TOKEN_FIELDS
        }
        counts = {name: max(counts[name], summed[name]) for name in counts}
    return Usage(
        reasoning_tokens=as_int(pick(usage, "output_tokens_details", "thinking_tokens")),
        server_tools=_server_tools(pick(usage, "server_tool_use")),
        **counts,
    )


def _server_tools(used: Any) -> tuple[tuple[str, int], ...]:
    """``usage.server_tool_use`` (``web_search_requests``, ``web_fetch_requests`` and
    whatever siblings come) as ``(tool, count)`` pairs."""
    if used is None:
        return ()
    fields = used if isinstance(used, dict) else (getattr(used, "model_dump", dict)() or {})
    return server_tool_counts(
        {
            name.removesuffix("_requests"): n
            for name, n in fields.items()
            if name.endswith("_requests") and isinstance(n, int)
        }
    )


def _stop_details(details: Any) -> str | None:
    """``stop_details`` (``{type, category, explanation}``) as one line, or None."""
    if not details:
        return None
    category = pick(details, "category")
    explanation = pick(details, "explanation")
    parts = [f"category {category}" if category else "", str(explanation or "")]
    said = ": ".join(p for p in parts if p)
    return said or None


def _wire_blocks(content: Any) -> list[Any]:
    """A paused turn's content blocks as wire dicts, to send back as the assistant turn."""
    out = []
    for block in content:
        dump = getattr(block, "model_dump", None)
        out.append(dump(mode="json", exclude_none=True) if callable(dump) else block)
    return out


def batch_status(batch: Any) -> BatchStatus:
    """Normalize a MessageBatch; an unknown status is running (B9).

    Counts stay at ``processing`` until the batch ends, so ``completed`` is 0 until then.
    """
    raw = str(pick(batch, "processing_status") or "")
    state = BATCH_STATES.get(raw)
    counts = pick(batch, "request_counts")
    names = ("processing", "succeeded", "errored", "canceled", "expired")
    values = {n: as_int(pick(counts, n)) for n in names}
    return BatchStatus(
        state=state or "running",
        raw_status=raw,
        request_count=sum(values.values()),
        completed=values["succeeded"],
        failed=values["errored"] + values["canceled"] + values["expired"],
        known=state is not None,
    )


def item_error(provider: str, error: Any) -> ProviderError:
    """An errored batch item's ErrorResponse, classified like an HTTP answer."""
    kind = str(pick(error, "error", "type") or pick(error, "type") or "")
    message = pick(error, "error", "message") or pick(error, "message")
    code = pick(error, "error", "details", "error_code") or kind or None
    status = ERROR_TYPE_STATUS.get(kind, 500 if not kind else 400)
    return classify(
        provider,
        status,
        message=message,
        code=code,
        kind=kind or None,
        request_id=pick(error, "request_id"),
    )


def tool_schema(schema: dict[str, Any]) -> dict[str, Any]:
    if schema.get("type") == "object":
        return schema
    return {"type": "object", "properties": {_WRAP_KEY: schema}, "required": [_WRAP_KEY]}


def _unwrap_tool_input(value: Any) -> Any:
    if isinstance(value, dict) and set(value) == {_WRAP_KEY}:
        return value[_WRAP_KEY]
    return value

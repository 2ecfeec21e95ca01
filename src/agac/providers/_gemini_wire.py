"""How the Gemini Developer API's wire reads: an answer (a GenerateContentResponse, from
the SDK or as JSON, live or in a batch result), a batch job's state, an error answer
(``google.rpc.Status`` with its ``RetryInfo``, ``QuotaFailure`` and ``ErrorInfo``
details) and a failed batch item. The adapter (:mod:`agac.providers.gemini`) sends;
this module reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agac.errors import ProviderError, RetryableError
from agac.providers._common import as_int, enum_str, parse_json, pick
from agac.providers._errors import classify, request_id_of, retry_after_seconds
from agac.providers._search_wire import PER_QUERY, grounding_citations
from agac.providers._tool_wire import gemini_calls
from agac.providers.base import (
    BatchState,
    BatchStatus,
    Response,
    Usage,
)
from agac.providers.stops import read_stop

__all__ = [
    "BATCH_STATES",
    "RPC_STATUS",
    "api_error",
    "batch_status",
    "content_response",
    "item_error",
    "status_error",
]

# Both spellings: the SDK renames BATCH_STATE_* to JOB_STATE_*, but only the ones it knows.
BATCH_STATES: dict[str, BatchState] = {}
for _prefix in ("JOB_STATE_", "BATCH_STATE_"):
    BATCH_STATES.update(
        {
            _prefix + "PENDING": "running",
            _prefix + "QUEUED": "running",
            _prefix + "RUNNING": "running",
            _prefix + "UPDATING": "running",
            _prefix + "PAUSED": "running",
            _prefix + "SUCCEEDED": "ended",
            _prefix + "PARTIALLY_SUCCEEDED": "ended",
            _prefix + "FAILED": "failed",
            _prefix + "CANCELLING": "cancelling",
            _prefix + "CANCELLED": "cancelled",
            _prefix + "EXPIRED": "expired",
        }
    )

# google.rpc.Code of a failed batch item -> the HTTP status it stands for.
RPC_STATUS: dict[int, int] = {
    1: 499, 2: 500, 3: 400, 4: 504, 5: 404, 6: 409, 7: 403, 8: 429,
    9: 400, 10: 409, 11: 400, 12: 501, 13: 500, 14: 503, 15: 500, 16: 401,
}  # fmt: skip

_RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo"
_ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
_QUOTA_FAILURE = "type.googleapis.com/google.rpc.QuotaFailure"


def _served_tier(answer: Any, usage: Any) -> str | None:
    """The tier that served a call, in lower case (``flex``, ``standard``): the wire's
    ``usageMetadata.serviceTier``, else the ``x-gemini-service-tier`` header the SDK keeps
    in ``sdk_http_response`` (its usage model has no such field); None when neither."""
    text = enum_str(pick(usage, "service_tier"))
    if not text:
        headers = pick(answer, "sdk_http_response", "headers") or {}
        text = next(
            (str(v) for k, v in dict(headers).items() if k.lower() == "x-gemini-service-tier"),
            None,
        )
    return text.lower() if text else None


def content_response(
    answer: Any,
    *,
    latency_ms: float,
    service_tier: str | None = None,
    parse: bool = True,
    offered: frozenset[str] = frozenset(),
) -> Response:
    """Normalize a GenerateContentResponse (SDK object or wire dict) per docs/providers.md, on
    every path (SDK, lean transport, batch results).

    ``promptTokenCount`` includes cached tokens: they are subtracted;
    ``toolUsePromptTokenCount`` (the prompts of grounding searches, billed as input) is
    added. A ``functionCall`` part of a function the request did not offer (``offered``)
    is a tool call the action did not ask for, whatever the finish reason: ``STOP`` then is
    not an answer; a turn calling only offered functions is ``tool_use``, its calls in
    :attr:`Response.tool_calls`. Thinking
    tokens are billed as output and counted there (and as ``reasoning_tokens``); thought
    parts stay out of the answer. Grounding searches (``webSearchQueries``) are counted as
    the ``web_search`` server tool. ``usageMetadata.serviceTier`` says which tier served
    the call (``flex`` for a flex request).
    A prompt blocked before any candidate (``promptFeedback.blockReason``) is a content
    filter; the block message, or the safety category of a filtered candidate, is the
    stop's detail (:func:`read_stop`).
    """
    candidates = pick(answer, "candidates") or []
    candidate = candidates[0] if candidates else None
    parts = pick(candidate, "content", "parts") or []
    text = "".join(pick(p, "text") or "" for p in parts if not pick(p, "thought"))
    feedback = pick(answer, "prompt_feedback")
    blocked = enum_str(pick(feedback, "block_reason")) if candidate is None else None
    if blocked:
        detail = pick(feedback, "block_reason_message") or _safety(pick(feedback, "safety_ratings"))
    else:
        detail = pick(candidate, "finish_message") or _safety(pick(candidate, "safety_ratings"))
    calls = gemini_calls(parts) if offered else ()
    stop = read_stop(
        "gemini",
        enum_str(pick(candidate, "finish_reason")),
        blocked=blocked,
        detail=detail,
        tool_call=_function_call(parts),
        offered=bool(calls) and all(c.name in offered for c in calls),
    )
    usage = pick(answer, "usage_metadata")
    # The prompts of grounding and other built-in tools are billed as input, apart from
    # promptTokenCount (totalTokenCount adds them): counted as input here.
    prompt = as_int(pick(usage, "prompt_token_count")) + as_int(
        pick(usage, "tool_use_prompt_token_count")
    )
    cached = as_int(pick(usage, "cached_content_token_count"))
    thoughts = as_int(pick(usage, "thoughts_token_count"))
    output = as_int(pick(usage, "candidates_token_count")) + thoughts
    grounding = pick(candidate, "grounding_metadata")
    version = str(pick(answer, "model_version") or "")
    searches = len(pick(grounding, "web_search_queries") or [])
    if searches and not version.startswith(PER_QUERY):
        searches = 1  # billed per grounded prompt, whatever the number of its queries
    return Response(
        text=text,
        model=str(pick(answer, "model_version") or ""),
        stop_reason=stop.reason,
        usage=Usage(
            input_tokens=max(0, prompt - cached),
            output_tokens=output,
            cached_tokens=cached,
            reasoning_tokens=thoughts,
            server_tools=(("web_search", searches),) if searches else (),
        ),
        parsed=parse_json(text) if parse and stop.reason == "end" else None,
        service_tier=service_tier or _served_tier(answer, usage),
        latency_ms=latency_ms,
        raw_stop=stop.raw,
        stop_detail=stop.detail,
        request_id=pick(answer, "response_id"),
        tool_calls=calls if stop.reason == "tool_use" else (),
        citations=grounding_citations(grounding),
    )


def _function_call(parts: Any) -> str | None:
    """The name of the first function the candidate calls, or None."""
    for part in parts:
        call = pick(part, "function_call")
        if call is not None:
            return str(pick(call, "name") or "")
    return None


def _safety(ratings: Any) -> str | None:
    """The safety categories a candidate or a prompt was blocked for (``blocked: true``,
    else those rated HIGH or MEDIUM), as one line."""
    found = []
    for rating in ratings or []:
        category = enum_str(pick(rating, "category"))
        probability = enum_str(pick(rating, "probability")) or ""
        if category and (pick(rating, "blocked") or probability in ("HIGH", "MEDIUM")):
            found.append(f"{category} ({probability})" if probability else category)
    return "safety: " + ", ".join(found) if found else None


def batch_status(job: Any) -> BatchStatus:
    """Normalize a BatchJob; an unknown state is running (B9).

    The SDK does not expose ``batchStats`` in Developer-API mode, so counts are 0
    unless ``completion_stats`` is filled.
    """
    raw = enum_str(pick(job, "state")) or ""
    state = BATCH_STATES.get(raw)
    stats = pick(job, "completion_stats")
    completed = as_int(pick(stats, "successful_count"))
    failed = as_int(pick(stats, "failed_count"))
    return BatchStatus(
        state=state or "running",
        raw_status=raw,
        request_count=completed + failed + as_int(pick(stats, "incomplete_count")),
        completed=completed,
        failed=failed,
        known=state is not None,
    )


def api_error(provider: str, exc: Any) -> ProviderError:
    """Classify a google-genai APIError (see :func:`status_error`)."""
    body = exc.details if isinstance(exc.details, dict) else {}
    headers = getattr(getattr(exc, "response", None), "headers", None)
    return status_error(provider, int(exc.code) if exc.code else None, body, headers)


def status_error(
    provider: str, status: int | None, body: dict[str, Any], headers: Mapping[str, str] | None
) -> ProviderError:
    """Classify a Gemini error answer, reading ``RetryInfo`` and ``QuotaFailure``.

    A 429 with ``RetryInfo`` waits ``retryDelay``; one with ``QuotaFailure`` and no
    ``RetryInfo`` is a daily or free-tier quota (fatal); one with neither retries.
    ``body`` is the error body as the SDK's APIError keeps it (``{"error": {…}}`` or
    the inner object).
    """
    details = pick(body, "error", "details") or pick(body, "details") or []
    types = {str(d.get("@type")): d for d in details if isinstance(d, dict)}
    retry_after = _duration(pick(types.get(_RETRY_INFO), "retryDelay"))
    if retry_after is None:
        retry_after = retry_after_seconds(headers) if headers is not None else None
    quota = status == 429 and _QUOTA_FAILURE in types and retry_after is None
    error = body.get("error")
    inner: dict[str, Any] = error if isinstance(error, dict) else body
    kind = inner.get("status")
    reason = pick(types.get(_ERROR_INFO), "reason")
    return classify(
        provider,
        status,
        message=inner.get("message"),
        retry_after=retry_after,
        code=str(reason or kind) if reason or kind else None,
        quota=quota,
        kind=str(kind) if kind else None,
        request_id=request_id_of(headers),
    )


def item_error(provider: str, error: Any) -> ProviderError:
    """A failed batch item: a google.rpc.Status (rpc code) or an HTTP-style error."""
    if error is None:
        return RetryableError(f"{provider}: batch item returned neither response nor error")
    code = as_int(pick(error, "code"))
    status = code if code >= 100 else RPC_STATUS.get(code, 500)
    kind = pick(error, "status")
    return classify(
        provider,
        status,
        message=pick(error, "message"),
        code=kind,
        kind=str(kind) if kind else None,
    )


def _duration(value: Any) -> float | None:
    """A protobuf Duration: ``"30s"``, ``"1.5s"`` or ``{"seconds": …, "nanos": …}``."""
    if value is None:
        return None
    if isinstance(value, dict):
        return as_int(value.get("seconds")) + as_int(value.get("nanos")) / 1e9
    try:
        return max(0.0, float(str(value).rstrip("s")))
    except ValueError:
        return None

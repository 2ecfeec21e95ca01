"""The usual chat completion of a batch result line, read in one pass of plain dict
lookups (the bulk path: a batch of 50,000 answers is 50,000 of them).

:func:`plain_completion` reads only the shape almost every line has — one choice whose
message is text alone (no refusal, reasoning, tool call, annotation, executed server
tool or content chunks), ended ``stop`` — and gives the very
:class:`~agac.providers.base.Response` the general reader
(``_openai_compat.chat_response``) gives it; anything else is None and goes the general
way. tests/unit/providers/test_plain_wire.py holds the two readers to the same
answer for every line shape it draws.
"""

from __future__ import annotations

from typing import Any

from agac.providers._common import as_int, parse_json
from agac.providers.base import Response, Usage
from agac.providers.stops import Stop, read_stop

__all__ = ["plain_completion"]

_STOPS: dict[str, Stop] = {}
"""The stop of a ``stop`` finish, by provider (read once: :func:`read_stop` is pure)."""


def plain_completion(
    body: Any,
    *,
    provider: str,
    latency_ms: float,
    service_tier: str | None,
    parse: bool,
    request_id: str | None,
) -> Response | None:
    """The Response of a wire completion of the plain shape, else None."""
    if type(body) is not dict or provider == "openrouter":  # OpenRouter bills in usage
        return None
    choices = body.get("choices")
    if type(choices) is not list or not choices:
        return None
    choice = choices[0]
    if type(choice) is not dict or choice.get("finish_reason") != "stop":
        return None
    message = choice.get("message")
    if type(message) is not dict:
        return None
    text = message.get("content")
    if (
        type(text) is not str
        or message.get("refusal") is not None
        or message.get("tool_calls")
        or message.get("annotations")
        or message.get("executed_tools")
        or message.get("reasoning")
        or message.get("reasoning_content")
        or text.lstrip().startswith("<think>")
    ):
        return None
    usage = body.get("usage")
    if usage is not None and type(usage) is not dict:
        return None
    stop = _STOPS.get(provider)
    if stop is None:
        stop = _STOPS[provider] = read_stop(provider, "stop")
    return Response(
        text=text,
        model=str(body.get("model") or ""),
        stop_reason=stop.reason,
        usage=_usage(usage or {}),
        parsed=parse_json(text) if parse and stop.reason == "end" else None,
        service_tier=service_tier or body.get("service_tier"),
        latency_ms=latency_ms,
        refusal=None,
        raw_stop=stop.raw,
        stop_detail=stop.detail,
        request_id=request_id,
    )


def _usage(usage: dict[str, Any]) -> Usage:
    """A completion's ``usage`` (cached reads and cache writes are within
    ``prompt_tokens``; DeepSeek names its cache hits ``prompt_cache_hit_tokens``)."""
    prompt = as_int(usage.get("prompt_tokens"))
    details = usage.get("prompt_tokens_details")
    details = details if type(details) is dict else {}
    cached = as_int(details.get("cached_tokens")) or as_int(usage.get("prompt_cache_hit_tokens"))
    written = as_int(details.get("cache_write_tokens"))
    out = usage.get("completion_tokens_details")
    return Usage(
        input_tokens=max(0, prompt - cached - written),
        output_tokens=as_int(usage.get("completion_tokens")),
        cached_tokens=cached,
        cache_write_tokens=written,
        reasoning_tokens=as_int(out.get("reasoning_tokens")) if type(out) is dict else 0,
    )

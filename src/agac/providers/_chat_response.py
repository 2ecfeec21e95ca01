"""Reading a chat completion — an SDK object, a lean-transport answer or a batch result
line — into agac's :class:`~agac.providers.base.Response`: the one reader every
OpenAI-compatible adapter's live calls and batch lines go through
(:mod:`agac.providers._openai_compat` re-exports it)."""

from __future__ import annotations

from typing import Any

from agac.providers._common import (
    as_int,
    parse_json,
    pick,
)
from agac.providers._content_filter import filter_detail
from agac.providers._plain_wire import plain_completion
from agac.providers._reasoning import content_text, reasoning_share, split_reasoning
from agac.providers._search_wire import (
    executed_citations,
    executed_counts,
    url_citations,
)
from agac.providers._tool_wire import chat_calls, first_call
from agac.providers.base import (
    Response,
    Usage,
)
from agac.providers.stops import read_stop

__all__ = ["chat_response"]


def chat_response(
    body: Any,
    *,
    provider: str,
    latency_ms: float,
    service_tier: str | None = None,
    parse: bool = True,
    request_id: str | None = None,
    wire: bool = False,
    offered: frozenset[str] = frozenset(),
    searched: bool = False,
) -> Response:
    """Normalize a chat completion (SDK object or wire dict) per docs/providers.md, on every
    path (SDK, lean transport, batch lines); ``provider`` names the stop table
    (:func:`read_stop`).

    ``prompt_tokens`` includes cached reads and cache writes; both are subtracted so
    that ``input_tokens`` counts only uncached input. ``message.refusal`` is a refusal
    whatever ``finish_reason`` says; a ``tool_calls`` entry is a tool call nobody asked
    for whatever it says. Reasoning — ``message.reasoning`` (Groq, asked apart),
    ``reasoning_content``, or a leading ``<think>`` block of the content — stays out of the
    answer and counts as reasoning tokens (:mod:`agac.providers._reasoning`). ``wire``: ``body`` is a batch result line's, read
    with plain dict lookups (one per field of every line of a result file). ``offered``:
    the tools the request offered; a turn calling only those is ``tool_use``, its calls in
    :attr:`Response.tool_calls`. ``searched``: the request offered web search (a search
    model's ``web_search_options``): the call is one ``web_search`` use, as billed, and the
    message's ``url_citation`` annotations are the answer's citations. A message's
    ``executed_tools`` (Groq's server tools) are read always: their searches and page
    visits are uses as Groq bills them, their sources the citations.
    """
    if wire and not searched:  # the usual batch line, read in one pass
        plain = plain_completion(
            body,
            provider=provider,
            latency_ms=latency_ms,
            service_tier=service_tier,
            parse=parse,
            request_id=request_id,
        )
        if plain is not None:
            return plain
    pick_ = _wire_get if wire else pick
    choices = pick_(body, "choices") or []
    choice = choices[0] if choices else None
    message = pick_(choice, "message")
    content, thinking = content_text(pick_(message, "content"))
    split = split_reasoning(
        content,
        pick_(message, "reasoning") or pick_(message, "reasoning_content") or thinking,
    )
    text = split.answer
    refusal = pick_(message, "refusal")
    finish = pick_(choice, "finish_reason")
    detail = (
        filter_detail(pick_(choice, "content_filter_results"), pick_(body, "prompt_filter_results"))
        if finish == "content_filter"
        else None
    )
    executed = pick_(message, "executed_tools")
    asked = pick_(message, "tool_calls")
    calls = chat_calls(asked) if offered and asked else ()
    stop = read_stop(
        provider,
        finish,
        refusal=refusal,
        detail=detail,
        tool_call=first_call(asked),
        offered=bool(calls) and all(c.name in offered for c in calls),
    )
    usage = pick_(body, "usage")
    prompt = as_int(pick_(usage, "prompt_tokens"))
    # DeepSeek reports its cache hits as ``prompt_cache_hit_tokens`` (within prompt_tokens).
    cached = as_int(pick_(usage, "prompt_tokens_details", "cached_tokens")) or as_int(
        pick_(usage, "prompt_cache_hit_tokens")
    )
    written = as_int(pick_(usage, "prompt_tokens_details", "cache_write_tokens"))
    output = as_int(pick_(usage, "completion_tokens"))
    reported = as_int(pick_(usage, "completion_tokens_details", "reasoning_tokens"))
    billed = served = None
    if provider == "openrouter":  # what OpenRouter billed, and the provider it routed to
        billed = _cost(pick_(usage, "cost"))
        served = str(pick_(body, "provider") or "") or None
    return Response(
        text=text,
        model=str(pick_(body, "model") or ""),
        stop_reason=stop.reason,
        usage=Usage(
            input_tokens=max(0, prompt - cached - written),
            output_tokens=output,
            cached_tokens=cached,
            cache_write_tokens=written,
            reasoning_tokens=reasoning_share(split, output, reported),
            server_tools=(("web_search", 1),) if searched else executed_counts(executed),
        ),
        parsed=parse_json(text) if parse and stop.reason == "end" else None,
        service_tier=service_tier or pick_(body, "service_tier"),
        latency_ms=latency_ms,
        refusal=refusal,
        raw_stop=stop.raw,
        stop_detail=stop.detail,
        request_id=request_id,
        tool_calls=calls if stop.reason == "tool_use" else (),
        billed_usd=billed,
        served_by=served,
        citations=url_citations(pick_(message, "annotations"), content)
        or executed_citations(executed),
    )


def _cost(value: Any) -> float | None:
    """A cost the provider reports (USD), or None when it reports none."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _wire_get(obj: Any, *path: str) -> Any:
    """:func:`pick` for a batch result line (JSON as parsed: dicts all the way down, keys
    as OpenAI writes them): plain ``dict.get``, no camelCase second try."""
    for name in path:
        if obj is None:
            return None
        obj = obj.get(name) if type(obj) is dict else getattr(obj, name, None)
    return obj

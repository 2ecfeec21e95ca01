"""OpenAI's Responses API (``POST /v1/responses``) on the wire: the body of a request that
searches the web (live, or a batch line whose ``url`` is ``/v1/responses``) and how its
answer reads. docs/decisions/0126 says why an OpenAI action with ``tools: [web_search]``
goes here.

The body: the system prompt as ``instructions``; the conversation as ``input`` items
(``{role, content}`` messages, an assistant turn's calls as ``function_call`` items and
each result as a ``function_call_output`` item under the call's ``call_id``) resent whole
every turn, ``store: false`` (stateless: no ``previous_response_id``, so a batch round
carries its conversation as the other providers' do); ``max_output_tokens``; the schema as
``text.format`` (``json_schema``, ``strict`` when the schema allows it, else
``json_object``); functions as ``{type: function, name, description, parameters,
strict}``; the search as ``{type: web_search, filters: {allowed_domains},
user_location: {type: approximate, …}}`` and its ``max_uses`` as the request's
``max_tool_calls`` (the bound on built-in tool calls); ``reasoning_effort`` as
``reasoning.effort``. The Responses API takes no ``seed``.

The answer: a ``response`` object whose ``output`` holds ``web_search_call`` items (one
billed search each), ``function_call`` items (``call_id``, ``name``, ``arguments``) and a
``message`` whose ``output_text`` parts carry ``url_citation`` annotations (``url``,
``title``, ``start_index``/``end_index`` into that text) or whose ``refusal`` part is a
refusal. ``status`` is ``completed``, or ``incomplete`` with
``incomplete_details.reason`` (``max_output_tokens``, ``content_filter``). ``usage``:
``input_tokens`` includes ``input_tokens_details.cached_tokens`` (and
``cache_write_tokens``), both subtracted here as on Chat Completions;
``output_tokens_details.reasoning_tokens``.
"""

from __future__ import annotations

from typing import Any

from agac.providers._attachments import Data, live_base64, responses_parts
from agac.providers._common import SCHEMA_NAME, as_int, parse_json, pick, strict_compatible
from agac.providers.base import Message, Request, Response, ToolCall, Usage
from agac.providers.servertools import Citation, WebSearch, distinct_citations
from agac.providers.stops import read_stop

__all__ = [
    "RESPONSES_ENDPOINT",
    "is_response_object",
    "read_response",
    "responses_body",
    "responses_web_search",
]

RESPONSES_ENDPOINT = "/v1/responses"
"""The Batch API's endpoint (and a batch line's ``url``) for Responses requests."""

#: A response's ``status`` (and ``incomplete_details.reason``) as the Chat Completions
#: finish reason :func:`read_stop` reads for OpenAI.
_FINISH = {
    "completed": "stop",
    "max_output_tokens": "length",
    "content_filter": "content_filter",
}


def responses_web_search(search: WebSearch) -> dict[str, Any]:
    """The web search as the Responses API's ``web_search`` tool: ``allowed_domains``
    under ``filters``, the location ``approximate`` (``max_uses`` goes on the request as
    ``max_tool_calls``)."""
    tool: dict[str, Any] = {"type": "web_search"}
    if search.allowed_domains:
        tool["filters"] = {"allowed_domains": list(search.allowed_domains)}
    if search.user_location:
        tool["user_location"] = {"type": "approximate", **dict(search.user_location)}
    return tool


def responses_body(
    request: Request, *, native: bool, fallback: str | None, data: Data = live_base64
) -> dict[str, Any]:
    """The ``/v1/responses`` body of a request, live or in a batch line. ``native``: the
    schema as ``json_schema``; else JSON mode, with ``fallback`` (the schema told in the
    prompt) as the instructions."""
    body: dict[str, Any] = {
        "model": request.model,
        "input": [item for m in request.chat for item in _items(m, data)],
        "max_output_tokens": request.max_tokens,
        "store": False,
    }
    system = request.system
    if request.schema is not None and not native:
        system = fallback
    if system:
        body["instructions"] = system
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.schema is not None:
        body["text"] = {"format": _format(request.schema, native)}
    tools = [_function(t.name, t.description, t.parameters) for t in request.tools]
    if request.web_search is not None:
        tools.append(responses_web_search(request.web_search))
        if request.web_search.max_uses is not None:
            body["max_tool_calls"] = request.web_search.max_uses
    if tools:
        body["tools"] = tools
    for option, value in request.options:
        if option == "reasoning_effort":
            body["reasoning"] = {"effort": value}
        else:
            body[option] = value
    if request.tier == "flex":
        body["service_tier"] = "flex"
    return body


def _format(schema: dict[str, Any], native: bool) -> dict[str, Any]:
    if not native:
        return {"type": "json_object"}
    return {
        "type": "json_schema",
        "name": SCHEMA_NAME,
        "schema": schema,
        "strict": strict_compatible(schema),
    }


def _function(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "name": name,
        "description": description,
        "parameters": parameters,
        "strict": strict_compatible(parameters),
    }


def _items(m: Message, data: Data) -> list[dict[str, Any]]:
    """One turn as ``input`` items: a message, an assistant turn's text and its
    ``function_call`` items, or one call's ``function_call_output``."""
    if m.tool_call_id is not None:
        return [{"type": "function_call_output", "call_id": m.tool_call_id, "output": m.content}]
    if m.attachments:
        content: Any = responses_parts(m.content, m.attachments, m.position, data)
        return [{"role": m.role, "content": content}]
    out: list[dict[str, Any]] = []
    if m.content or not m.tool_calls:
        out.append({"role": m.role, "content": m.content})
    out += [
        {"type": "function_call", "call_id": c.id, "name": c.name, "arguments": c.arguments}
        for c in m.tool_calls
    ]
    return out


def is_response_object(body: Any) -> bool:
    """A batch result line's body from ``/v1/responses`` (``object: response``)."""
    return isinstance(body, dict) and body.get("object") == "response"


def read_response(
    body: Any,
    *,
    provider: str,
    latency_ms: float,
    parse: bool = True,
    request_id: str | None = None,
    service_tier: str | None = None,
    offered: frozenset[str] = frozenset(),
) -> Response:
    """Normalize a Responses ``response`` (SDK object or wire dict) on every path; see the
    module docstring. A turn whose ``function_call`` items call only ``offered`` functions
    is ``tool_use``; each ``web_search_call`` item is one ``web_search`` use."""
    output = list(pick(body, "output") or ())
    texts, refusals, found = _message_parts(output)
    text = "".join(texts)
    calls = tuple(
        ToolCall(
            str(pick(i, "call_id") or ""),
            str(pick(i, "name") or ""),
            str(pick(i, "arguments") or "{}"),
        )
        for i in output
        if pick(i, "type") == "function_call"
    )
    searches = sum(1 for i in output if pick(i, "type") == "web_search_call")
    status = str(pick(body, "status") or "")
    reason = pick(body, "incomplete_details", "reason")
    raw = f"{status}:{reason}" if status == "incomplete" and reason else status
    stop = read_stop(
        provider,
        _FINISH.get(str(reason) if status == "incomplete" else status, raw),
        refusal="".join(refusals) or None,
        tool_call=calls[0].name if calls else None,
        offered=bool(calls) and bool(offered) and all(c.name in offered for c in calls),
    )
    usage = pick(body, "usage")
    cached = as_int(pick(usage, "input_tokens_details", "cached_tokens"))
    written = as_int(pick(usage, "input_tokens_details", "cache_write_tokens"))
    return Response(
        text=text,
        model=str(pick(body, "model") or ""),
        stop_reason=stop.reason,
        usage=Usage(
            input_tokens=max(0, as_int(pick(usage, "input_tokens")) - cached - written),
            output_tokens=as_int(pick(usage, "output_tokens")),
            cached_tokens=cached,
            cache_write_tokens=written,
            reasoning_tokens=as_int(pick(usage, "output_tokens_details", "reasoning_tokens")),
            server_tools=(("web_search", searches),) if searches else (),
        ),
        parsed=parse_json(text) if parse and stop.reason == "end" else None,
        service_tier=service_tier or pick(body, "service_tier"),
        latency_ms=latency_ms,
        refusal="".join(refusals) or None,
        raw_stop=raw,
        stop_detail=stop.detail,
        request_id=request_id,
        tool_calls=calls if stop.reason == "tool_use" else (),
        citations=distinct_citations(found),
    )


def _message_parts(output: list[Any]) -> tuple[list[str], list[str], list[Citation]]:
    """The ``message`` items' answer texts, refusals and ``url_citation`` annotations
    (each with the span of its own text it supports), in order."""
    texts: list[str] = []
    refusals: list[str] = []
    found: list[Citation] = []
    for item in output:
        if pick(item, "type") != "message":
            continue
        for part in pick(item, "content") or ():
            kind = pick(part, "type")
            if kind == "refusal":
                refusals.append(str(pick(part, "refusal") or ""))
            elif kind == "output_text":
                text = str(pick(part, "text") or "")
                texts.append(text)
                found += _url_citations(pick(part, "annotations"), text)
    return texts, refusals, found


def _url_citations(annotations: Any, text: str) -> list[Citation]:
    out = []
    for a in annotations or ():
        url = pick(a, "url")
        if pick(a, "type") != "url_citation" or not url:
            continue
        start, end = pick(a, "start_index"), pick(a, "end_index")
        span = text[start:end] if isinstance(start, int) and isinstance(end, int) else ""
        title = pick(a, "title")
        out.append(Citation(str(url), str(title) if title else None, span or None))
    return out

"""OpenAI's Responses API (``POST /v1/responses``), live and as a Batch API endpoint.

A body's ``input`` is a string or a list of items: ``{role, content}`` messages,
``function_call`` items (an earlier turn's calls) and ``function_call_output`` items
(their results, each under a ``call_id`` the input's calls name, else 400 as OpenAI
answers: the emulator keeps no conversation, ``store`` or not). Its ``tools`` are
``{type: function, name, …}`` and ``{type: web_search, filters: {allowed_domains},
user_location}`` (the search bounded by the request's ``max_tool_calls``); ``text.format``
asks for a ``json_schema`` (or ``json_object``). The answer is a ``response`` object:
the searches as ``web_search_call`` items (searched on every turn, a turn that calls
functions too; each billed), then the turn's ``function_call`` items or a ``message``
whose ``output_text`` carries ``url_citation`` annotations (flat: ``url``, ``title``,
``start_index``, ``end_index``). A truncated answer is ``status: incomplete`` with
``incomplete_details.reason: max_output_tokens``. ``usage.input_tokens`` includes
``input_tokens_details.cached_tokens``. A live call counts and is journaled as ``chat``
(the same faults fire on it); ``reply`` faults ``body``, ``refusal``, ``content`` and
``usage`` bend it as they bend a chat completion.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .answers import Answer, answer, prompt_tokens
from .caching import openai_plan
from .faults import Target
from .handling import gate, live_latency, note_cache, read_json, state_of
from .search import WebSearchAsked
from .state import BatchItem, EmulatorState

__all__ = ["ENDPOINT", "Asked", "read_body", "response_object", "responses_item", "route"]

ENDPOINT = "/v1/responses"

#: Not part of what an answer depends on: transport settings and the cache routing key.
_DROP = ("model", "stream", "metadata", "store", "user", "prompt_cache_key", "service_tier")
_JSON_MODE = {"type": "object", "properties": {"answer": {"type": "string"}}}


@dataclass(frozen=True)
class Asked:
    """A Responses body decoded: what the answer depends on (``canonical``), the text
    counted as input (``prompt``), the schema, the token cap, the functions offered, the
    results sent back, the turns that called functions, and the web search (or None).
    ``wrong`` is why OpenAI would refuse the body (None: it would not)."""

    canonical: dict[str, Any]
    prompt: list[Any]
    schema: dict[str, Any] | None
    max_tokens: int | None
    tools: frozenset[str]
    results: tuple[str, ...]
    turns: int
    search: WebSearchAsked | None
    wrong: str | None = None


def read_body(body: dict[str, Any]) -> Asked:
    """Decode a ``/v1/responses`` body (see the module docstring)."""
    raw = body.get("input")
    items: list[Any] = [{"role": "user", "content": raw}] if isinstance(raw, str) else raw or []
    fmt = (body.get("text") or {}).get("format") or {}
    schema: dict[str, Any] | None = None
    if fmt.get("type") == "json_schema":
        schema = fmt.get("schema") or {"type": "object"}
    elif fmt.get("type") == "json_object":
        schema = _JSON_MODE
    tools = [t for t in body.get("tools") or () if isinstance(t, dict)]
    offered = frozenset(str(t.get("name")) for t in tools if t.get("type") == "function")
    search = next(
        (
            WebSearchAsked(
                body.get("max_tool_calls"),
                tuple((t.get("filters") or {}).get("allowed_domains") or ()),
                every_turn=True,
            )
            for t in tools
            if str(t.get("type", "")).startswith("web_search")
        ),
        None,
    )
    prompt = [body.get("instructions") or "", *items]
    return Asked(
        canonical={k: v for k, v in body.items() if k not in _DROP},
        prompt=prompt,
        schema=schema,
        max_tokens=body.get("max_output_tokens"),
        tools=offered,
        results=tuple(str(i.get("output")) for i in items if _kind(i) == "function_call_output"),
        turns=_call_turns(items),
        search=search,
        wrong=_wrong(body, items),
    )


def _kind(item: Any) -> str:
    if not isinstance(item, dict):
        return ""
    return str(item.get("type") or ("message" if "role" in item else ""))


def _call_turns(items: list[Any]) -> int:
    """How many turns called functions: runs of consecutive ``function_call`` items."""
    turns, previous = 0, ""
    for item in items:
        kind = _kind(item)
        if kind == "function_call" and previous != "function_call":
            turns += 1
        previous = kind
    return turns


def _wrong(body: dict[str, Any], items: list[Any]) -> str | None:
    if not body.get("model") or body.get("input") in (None, "", []):
        return "Missing required parameter: 'model' and 'input' are required."
    called = {str(i.get("call_id")) for i in items if _kind(i) == "function_call"}
    for item in items:
        if _kind(item) == "function_call_output" and str(item.get("call_id")) not in called:
            return (
                f"No tool call found for function call output with call_id {item.get('call_id')}."
            )
    for tool in body.get("tools") or ():
        domains = ((tool or {}).get("filters") or {}).get("allowed_domains")
        if domains is not None and not isinstance(domains, list):
            return "Invalid type for 'tools.filters.allowed_domains': expected an array."
    return None


def _answer(model: str, asked: Asked, seed: int, fault: str | None, reply: Any) -> Answer:
    return answer(
        provider="openai",
        model=model,
        body=asked.canonical,
        prompt=asked.prompt,
        schema=asked.schema,
        max_tokens=asked.max_tokens,
        seed=seed,
        fault=fault,
        reply=reply,
        tools=asked.tools,
        results=asked.results,
        turns=asked.turns,
        search=asked.search,
    )


def cache_view(body: dict[str, Any], asked: Asked) -> dict[str, Any]:
    """The body as the implicit prompt cache reads a chat body (:func:`openai_plan`)."""
    messages = [
        {"role": "system", "content": asked.prompt[0]},
        *(
            {"role": i.get("role", _kind(i)), "content": i.get("content", json.dumps(i))}
            for i in asked.prompt[1:]
            if isinstance(i, dict)
        ),
    ]
    return {"messages": messages, "prompt_cache_key": body.get("prompt_cache_key")}


def response_object(model: str, ans: Answer, now: float, tier: str) -> dict[str, Any]:
    """A ``response`` object for ``ans`` (see the module docstring)."""
    reply = ans.reply or {}
    if "body" in reply:
        return dict(reply["body"])
    output: list[dict[str, Any]] = [
        {
            "id": "ws_" + _digest(s.url),
            "type": "web_search_call",
            "status": "completed",
            "action": {
                "type": "search",
                "query": s.query,
                "sources": [{"type": "url", "url": s.url}],
            },
        }
        for s in ans.sources
    ]
    for n, (name, arguments) in enumerate(ans.tool_calls):
        call_id = "call_" + _digest(f"{n}:{name}:{arguments}")
        output.append(
            {
                "id": "fc_" + call_id[5:],
                "type": "function_call",
                "status": "completed",
                "call_id": call_id,
                "name": name,
                "arguments": arguments,
            }
        )
    refusal = reply.get("refusal", ans.refusal)
    content = reply.get("content", None if "refusal" in reply else ans.text)
    if not ans.tool_calls:
        parts: list[dict[str, Any]] = []
        if refusal:
            parts.append({"type": "refusal", "refusal": refusal})
        if content is not None:
            parts.append(
                {"type": "output_text", "text": content, "annotations": _annotations(ans, content)}
            )
        output.append(
            {
                "id": "msg_" + uuid.uuid4().hex[:24],
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": parts,
            }
        )
    extra = reply.get("usage") or {}
    cached = int(extra.get("cache_read_tokens", ans.cached_tokens))
    prompt = ans.input_tokens + (cached - ans.cached_tokens)
    truncated = ans.finish == "length"
    return {
        "id": "resp_" + uuid.uuid4().hex[:24],
        "object": "response",
        "created_at": int(now),
        "status": "incomplete" if truncated else "completed",
        "incomplete_details": {"reason": "max_output_tokens"} if truncated else None,
        "error": None,
        "model": model,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "store": False,
        "service_tier": tier,
        "usage": {
            "input_tokens": prompt,
            "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": 0},
            "output_tokens": ans.output_tokens,
            "output_tokens_details": {"reasoning_tokens": int(extra.get("reasoning_tokens", 0))},
            "total_tokens": prompt + ans.output_tokens,
        },
    }


def _annotations(ans: Answer, content: str) -> list[dict[str, Any]]:
    """Each source cited for the whole answer."""
    return [
        {
            "type": "url_citation",
            "url": s.url,
            "title": s.title,
            "start_index": 0,
            "end_index": len(content),
        }
        for s in ans.sources
    ]


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def responses_item(custom_id: str, body: dict[str, Any]) -> tuple[BatchItem | None, str | None]:
    """A batch line's ``/v1/responses`` body as an item, or why OpenAI refuses it."""
    asked = read_body(body)
    if asked.wrong is not None:
        return None, asked.wrong
    model = str(body.get("model", ""))
    item = BatchItem(
        custom_id=custom_id,
        model=model,
        canonical=asked.canonical,
        prompt=asked.prompt,
        schema=asked.schema,
        max_tokens=asked.max_tokens,
        tools=asked.tools,
        results=asked.results,
        turns=asked.turns,
        search=asked.search,
        extra={"endpoint": ENDPOINT},
    )
    return item, None


def route(
    prefix: str,
    error: Any,
    counting: Callable[[EmulatorState], Any],
    cache_minimum: int | None,
) -> Route:
    """``POST {prefix}/responses``: one live response (``error`` renders OpenAI's errors,
    ``counting(state)`` its renderer that first counts a body that does not parse)."""

    async def respond(request: Request) -> Response:
        state = state_of(request)
        body = await read_json(request, counting(state))
        model = str(body.get("model", ""))
        tier = "flex" if body.get("service_tier") == "flex" else None
        fired = await gate(request, "openai", "chat", error, Target(model=model, tier=tier))
        asked = read_body(body)
        if asked.wrong is not None:
            return error(400, None, None, asked.wrong)
        await live_latency(request)
        ans = _answer(model, asked, state.config.seed, fired.answer, fired.reply)
        total = prompt_tokens(asked.prompt, asked.canonical)
        plan, markers = openai_plan("openai", model, cache_view(body, asked), total, cache_minimum)
        note_cache(request, markers)
        ans = state.cached(ans, plan)
        state.stats.bill("openai", model, asked.canonical)
        state.stats.searched("openai", model, ans.sources)
        reply = response_object(model, ans, state.clock.now(), tier or "default")
        return JSONResponse(reply, headers={"x-request-id": "req_" + uuid.uuid4().hex})

    return Route(f"{prefix}/responses", respond, methods=["POST"])

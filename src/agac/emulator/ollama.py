"""Ollama's wire protocol: ``POST /api/chat``, non-streaming and streaming (NDJSON).

The REST default is ``stream: true`` (the Python SDK sends ``false`` unless asked), so a
body without ``stream`` is answered as NDJSON, as Ollama does. ``format`` is ``"json"`` or
a JSON schema; ``options.num_predict`` caps output (``done_reason: "length"``),
``options.seed`` varies the answer. Ollama has no batch API and no cached-token field.
Errors are ``{"error": "…"}``; a busy server answers 503 with no ``Retry-After``.

Function tools: ``tools`` offers functions (``{type: function, function: {name, …}}``);
a turn that calls them (a ``[[emulator calls: …]]`` directive of the prompt) is an
assistant message whose ``tool_calls`` hold ``function: {index, name, arguments}`` with
the arguments as an object and no call id, ended ``done_reason: "stop"`` as Ollama ends
it; results come back as ``tool`` messages (``tool_name``), one per call. Streamed, the
calls come in one chunk before the ``done`` line, as Ollama streams them.

Web search (``POST /api/web_search``, op ``web_search``): Ollama's hosted search API as the
SDK's ``WebSearchRequest``/``WebSearchResponse`` spell it. A request without a Bearer token
is refused 401; ``query`` is required and ``max_results`` (default 5) at most 10. The
results are derived from the query alone (the same query finds the same pages): result
``i`` is ``https://<domain>/search/<digest>/<i>``, its domain ``example.com`` for odd
``i`` and ``example.org`` for even ones, so domain filters have something to keep and
something to drop. Each search answered counts in ``stats.searches["ollama"]``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from .answers import Answer, answer
from .faults import Target
from .handling import attachments, gate, live_latency, read_json, state_of

__all__ = ["routes"]

PROVIDER = "ollama"
_DROP = ("model", "stream", "keep_alive")
_MESSAGES = {
    404: "model not found, try pulling it first",
    503: "server busy, please try again.  maximum pending requests exceeded",
}


def error(
    status: int, code: str | None, retry_after: float | None, message: str | None
) -> Response:
    """``{"error": "…"}`` with the status (Ollama sends no retry hints)."""
    text = message or _MESSAGES.get(
        status, f"emulated error {status}" + (f" ({code})" if code else "")
    )
    return JSONResponse({"error": text}, status_code=status)


def _counted(request: Request) -> Any:
    def render(
        status: int, code: str | None, retry_after: float | None, message: str | None
    ) -> Response:
        state_of(request).stats.count(PROVIDER, "chat")
        return error(status, code, retry_after, message)

    return render


def _final(model: str, ans: Answer, content: str, *, streamed: bool = False) -> dict[str, Any]:
    """The last (or only) chat line, bent by its ``reply`` fault: ``stop`` (any
    ``done_reason``, null to leave it out), ``content``, ``blocks`` (``thinking``: the
    message's ``thinking`` field) or ``body`` (the whole answer). A turn's tool calls are
    in its message, unless ``streamed`` (they came in a chunk before)."""
    reply = ans.reply or {}
    if "body" in reply:
        return dict(reply["body"])
    message: dict[str, Any] = {"role": "assistant", "content": reply.get("content", content)}
    if ans.tool_calls and not streamed:
        message["tool_calls"] = _calls(ans)
    if "thinking" in (reply.get("blocks") or []):
        message["thinking"] = "Thinking about the question."
    done_reason = reply.get("stop", "length" if ans.finish == "length" else "stop")
    return {
        "model": model,
        "created_at": _now(),
        "message": message,
        "done": True,
        "done_reason": done_reason,
        "total_duration": 1_000_000 * (ans.input_tokens + ans.output_tokens),
        "load_duration": 100_000,
        "prompt_eval_count": ans.input_tokens,
        "prompt_eval_duration": 200_000 * ans.input_tokens,
        "eval_count": ans.output_tokens,
        "eval_duration": 800_000 * ans.output_tokens,
    }


def tool_turns(body: dict[str, Any]) -> tuple[frozenset[str], tuple[str, ...], int]:
    """A chat body's tool loop so far: the functions it offers, the results its ``tool``
    messages send back, and how many assistant turns called tools."""
    offered = frozenset(
        str((t.get("function") or {}).get("name"))
        for t in body.get("tools") or ()
        if isinstance(t, dict) and t.get("type", "function") == "function"
    )
    messages = [m for m in body.get("messages") or () if isinstance(m, dict)]
    results = tuple(str(m.get("content")) for m in messages if m.get("role") == "tool")
    turns = sum(1 for m in messages if m.get("role") == "assistant" and m.get("tool_calls"))
    return offered, results, turns


def _calls(ans: Answer) -> list[dict[str, Any]]:
    """An answer's tool calls as ``message.tool_calls``: arguments as an object, no id."""
    return [
        {"function": {"index": n, "name": name, "arguments": json.loads(arguments)}}
        for n, (name, arguments) in enumerate(ans.tool_calls)
    ]


async def chat(request: Request) -> Response:
    state = state_of(request)
    body = await read_json(request, _counted(request))
    model = str(body.get("model", ""))
    fired = await gate(request, PROVIDER, "chat", error, Target(model=model))
    if not model:
        return error(400, None, None, "model is required")
    if not isinstance(body.get("messages", []), list):
        return error(400, None, None, "messages must be a list")
    await attachments(request, PROVIDER, body, error, model)
    await live_latency(request)
    fmt = body.get("format")
    schema = (
        fmt
        if isinstance(fmt, dict)
        else (
            {"type": "object", "properties": {"answer": {"type": "string"}}}
            if fmt == "json"
            else None
        )
    )
    options = body.get("options") or {}
    canonical = {k: v for k, v in body.items() if k not in _DROP}
    tools, results, turns = tool_turns(body)
    ans = answer(
        provider=PROVIDER,
        model=model,
        body=canonical,
        prompt=body.get("messages") or [],
        schema=schema,
        max_tokens=options.get("num_predict"),
        seed=state.config.seed,
        fault=fired.answer,
        reply=fired.reply,
        tools=tools,
        results=results,
        turns=turns,
    )
    state.stats.bill(PROVIDER, model, canonical)
    text = ans.text if ans.text is not None else (ans.refusal or "")
    if body.get("stream", True) is False:
        return JSONResponse(_final(model, ans, text))
    return StreamingResponse(_stream(model, ans, text), media_type="application/x-ndjson")


async def _stream(model: str, ans: Answer, text: str) -> AsyncIterator[bytes]:
    """NDJSON chunks of a few characters each (a turn's tool calls in one chunk), then the
    ``done`` line with the counts."""
    if ans.tool_calls:
        chunk = {
            "model": model,
            "created_at": _now(),
            "done": False,
            "message": {"role": "assistant", "content": "", "tool_calls": _calls(ans)},
        }
        yield (json.dumps(chunk) + "\n").encode()
    for start in range(0, len(text), 16):
        chunk = {
            "model": model,
            "created_at": _now(),
            "done": False,
            "message": {"role": "assistant", "content": text[start : start + 16]},
        }
        yield (json.dumps(chunk) + "\n").encode()
    yield (json.dumps(_final(model, ans, "", streamed=True)) + "\n").encode()


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


async def web_search(request: Request) -> Response:
    """One search of Ollama's web search API (see the module docstring)."""
    state = state_of(request)
    await gate(request, PROVIDER, "web_search", error)
    if not request.headers.get("authorization", "").startswith("Bearer "):
        return error(401, None, None, "unauthorized")
    body = await read_json(request, error)
    query = body.get("query") if isinstance(body, dict) else None
    if not isinstance(query, str) or not query:
        return error(400, None, None, "query is required")
    n = body.get("max_results", 5)  # a dict: it has a query
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 10:
        return error(400, None, None, "max_results must be between 1 and 10")
    state.stats.searches[PROVIDER] = state.stats.searches.get(PROVIDER, 0) + 1
    return JSONResponse({"results": search_results(query, n)})


def search_results(query: str, n: int) -> list[dict[str, str]]:
    """The ``n`` pages a query finds (derived from the query alone)."""
    digest = hashlib.sha256(query.encode()).hexdigest()[:8]
    return [
        {
            "title": f"Emulated page {i} for {query}",
            "url": f"https://example.{'com' if i % 2 else 'org'}/search/{digest}/{i}",
            "content": f"Emulated passage {i} about {query}.",
        }
        for i in range(1, n + 1)
    ]


def routes() -> list[Route]:
    """Ollama's routes."""
    return [
        Route("/api/chat", chat, methods=["POST"]),
        Route("/api/web_search", web_search, methods=["POST"]),
    ]

"""Function tools on Anthropic's and Gemini's wires: the tools a request offers, a tool
loop's turns sent back, and the calls a reply asks for.

Anthropic: tools are ``{name, description, input_schema}``; a turn that calls them is an
assistant message of ``tool_use`` blocks (``id``, ``name``, ``input``: an object); their
results go back in the next user message as ``tool_result`` blocks (``tool_use_id``,
``content``), every result of a turn in one message (parallel calls together, as
Anthropic requires).

Gemini: tools are ``functionDeclarations`` (``parametersJsonSchema``); a turn that calls
them is a ``model`` content of ``functionCall`` parts (``name``, ``args``: an object, and
an ``id`` on models that give one); their results go back in one ``user`` content of
``functionResponse`` parts (``name``, ``response``: an object, the call's ``id``). A call
without an id is given one from its position (``call_<n>``), which the reply then omits.
Gemini 3 signs a turn that calls functions: a ``thoughtSignature`` beside the first
``functionCall`` (base64 on the wire, bytes in the SDK's ``Part.thought_signature``),
which must come back unchanged on that part, or the next request is refused; it is kept
on the call (:attr:`ToolCall.signature`) as base64 text.

Ollama (``/api/chat``): tools are OpenAI's ``{type: function, function: {name,
description, parameters}}``; a turn that calls them is an assistant message whose
``tool_calls`` hold ``function.name`` and ``function.arguments`` as an object (no call
id on most servers, and none through the SDK, whose model drops it: the position gives
one, ``call_<n>``); each result goes back as its own ``tool`` message naming the
function (``tool_name``), in the order of the calls.

Chat Completions (OpenAI and the APIs shaped like it): tools are ``{type: function,
function: {name, description, parameters}}``; a turn that calls them is an assistant
message with ``tool_calls`` (``id``, ``function.name``, ``function.arguments`` as JSON
text); each result goes back as its own ``tool`` message under the call's
``tool_call_id``.

A call's arguments are kept as the JSON text of its object (:class:`ToolCall`); a
result is the text the engine stored, sent as Anthropic's and Ollama's string content
and as Gemini's ``{"result": text}``.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Sequence
from typing import Any

from agac.providers._common import pick
from agac.providers.base import Message, Request, ToolCall

__all__ = [
    "GENERATED_ID",
    "anthropic_calls",
    "anthropic_chat",
    "anthropic_tools",
    "chat_calls",
    "chat_tool_message",
    "first_call",
    "gemini_calls",
    "gemini_tool_content",
    "gemini_tools",
    "is_tool_turn",
    "offered",
    "ollama_calls",
    "ollama_tool_message",
    "ollama_tools",
]

GENERATED_ID = "call_"
"""The prefix of an id agac gives a Gemini call that came without one."""


def is_tool_turn(m: Message) -> bool:
    """A turn of a tool loop: an assistant turn that called tools, or a call's result."""
    return bool(m.tool_calls) or m.tool_call_id is not None


def offered(request: Request) -> frozenset[str]:
    """The names of the functions a request offers."""
    return frozenset(t.name for t in request.tools)


def _arguments(text: str) -> Any:
    """A call's arguments back as the object the model wrote (``{}`` for a bad text)."""
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


# -- Chat Completions (OpenAI and the APIs shaped like it) --------------------------------


def chat_calls(calls: Any) -> tuple[ToolCall, ...]:
    """A message's ``tool_calls`` (function calls) as ToolCalls, in order."""
    return tuple(
        ToolCall(
            str(pick(c, "id") or ""),
            str(pick(c, "function", "name") or ""),
            str(pick(c, "function", "arguments") or "{}"),
        )
        for c in calls
    )


def chat_tool_message(m: Message) -> dict[str, Any]:
    """A tool loop's turn on the wire: an assistant turn with its ``tool_calls``, or a
    ``tool`` message with one call's result."""
    if m.tool_call_id is not None:
        return {"role": "tool", "tool_call_id": m.tool_call_id, "content": m.content}
    return {
        "role": "assistant",
        "content": m.content or None,
        "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in m.tool_calls
        ],
    }


def first_call(calls: Any) -> str | None:
    """The name of the first tool a message calls (``tool_calls``), or None."""
    for call in calls or ():
        return str(pick(call, "function", "name") or "")
    return None


# -- Anthropic ---------------------------------------------------------------------------


def anthropic_tools(request: Request) -> list[dict[str, Any]]:
    """The request's functions as Messages ``tools``."""
    return [
        {"name": t.name, "description": t.description, "input_schema": t.parameters}
        for t in request.tools
    ]


def anthropic_chat(
    chat: Sequence[Message], content: Callable[[int, Message], Any]
) -> list[dict[str, Any]]:
    """The Messages ``messages`` of a conversation: a plain turn as ``content(i, m)``
    makes it, an assistant turn that called tools as its text and ``tool_use`` blocks, a
    paused one as its content blocks, and each run of results as one user message of ``tool_result`` blocks."""
    out: list[dict[str, Any]] = []
    for i, m in enumerate(chat):
        if m.tool_call_id is not None:
            block = {"type": "tool_result", "tool_use_id": m.tool_call_id, "content": m.content}
            if out and out[-1]["role"] == "user" and _results_only(out[-1]["content"]):
                out[-1]["content"].append(block)
            else:
                out.append({"role": "user", "content": [block]})
        elif m.paused:  # a paused turn goes back as Anthropic sent it, to continue it
            out.append({"role": "assistant", "content": list(m.paused)})
        elif m.tool_calls:
            blocks: list[dict[str, Any]] = (
                [{"type": "text", "text": m.content}] if m.content else []
            )
            blocks += [
                {"type": "tool_use", "id": c.id, "name": c.name, "input": _arguments(c.arguments)}
                for c in m.tool_calls
            ]
            out.append({"role": "assistant", "content": blocks})
        else:
            out.append({"role": m.role, "content": content(i, m)})
    return out


def _results_only(content: Any) -> bool:
    return isinstance(content, list) and all(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in content
    )


def anthropic_calls(content: Any, skip: str) -> tuple[ToolCall, ...]:
    """The ``tool_use`` blocks of a message's content as calls, in order (not the one
    named ``skip``: the forced-tool form of structured output)."""
    return tuple(
        ToolCall(
            str(pick(b, "id") or ""),
            str(pick(b, "name") or ""),
            json.dumps(pick(b, "input") or {}, ensure_ascii=False, sort_keys=True),
        )
        for b in content or ()
        if pick(b, "type") == "tool_use" and pick(b, "name") != skip
    )


# -- Gemini ------------------------------------------------------------------------------


def gemini_tools(request: Request, *, rest: bool) -> list[dict[str, Any]]:
    """The request's functions as one Tool of function declarations, and its web search
    as Google Search grounding (a ``googleSearch`` Tool, which takes no options on the
    Gemini API), in the REST (camelCase, ``rest``) or the SDK's (snake_case) spelling."""
    schema = "parametersJsonSchema" if rest else "parameters_json_schema"
    declarations = [
        {"name": t.name, "description": t.description, schema: t.parameters} for t in request.tools
    ]
    out: list[dict[str, Any]] = []
    if declarations:
        out.append({"functionDeclarations" if rest else "function_declarations": declarations})
    if request.web_search is not None:
        out.append({"googleSearch" if rest else "google_search": {}})
    return out


def gemini_tool_content(
    m: Message, previous: dict[str, Any] | None, *, rest: bool
) -> dict[str, Any] | None:
    """A tool loop's turn as a Gemini content: a ``model`` turn of its text and
    ``functionCall`` parts, or a result as a ``functionResponse`` part — added to
    ``previous`` (then None is returned) when that content already holds the turn's
    other results."""
    call_key, response_key = (
        ("functionCall", "functionResponse")
        if rest
        else (
            "function_call",
            "function_response",
        )
    )
    if m.tool_call_id is None:
        parts: list[dict[str, Any]] = [{"text": m.content}] if m.content else []
        for c in m.tool_calls:
            call: dict[str, Any] = {"name": c.name, "args": _arguments(c.arguments)}
            if not c.id.startswith(GENERATED_ID):
                call["id"] = c.id
            part: dict[str, Any] = {call_key: call}
            if c.signature is not None:
                part.update(_signed(c.signature, rest=rest))
            parts.append(part)
        return {"role": "model", "parts": parts}
    response: dict[str, Any] = {"name": m.name or "", "response": {"result": m.content}}
    if not m.tool_call_id.startswith(GENERATED_ID):
        response["id"] = m.tool_call_id
    reply = {response_key: response}
    if previous is not None and all(response_key in p for p in previous["parts"]):
        previous["parts"].append(reply)
        return None
    return {"role": "user", "parts": [reply]}


def _signed(signature: str, *, rest: bool) -> dict[str, Any]:
    """A call's thought signature as its part carries it: the base64 text on the wire,
    the bytes for the SDK (which encodes them again)."""
    if rest:
        return {"thoughtSignature": signature}
    return {"thought_signature": _signature_bytes(signature)}


def _signature_bytes(text: str) -> bytes:
    """Base64 text, standard or URL-safe alphabet, padded or not, as bytes."""
    padded = text + "=" * (-len(text) % 4)
    try:
        return base64.urlsafe_b64decode(padded.replace("+", "-").replace("/", "_"))
    except (binascii.Error, ValueError):
        return text.encode()


def _signature_text(value: Any) -> str | None:
    """A part's thought signature as base64 text (the SDK gives bytes, the wire text)."""
    if value is None:
        return None
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    return str(value)


def gemini_calls(parts: Any) -> tuple[ToolCall, ...]:
    """The ``functionCall`` parts of a candidate as calls, in order, each with the thought
    signature its part carries."""
    called = [p for p in parts or () if pick(p, "function_call") is not None]
    return tuple(
        ToolCall(
            str(pick(p, "function_call", "id") or f"{GENERATED_ID}{n}"),
            str(pick(p, "function_call", "name") or ""),
            json.dumps(pick(p, "function_call", "args") or {}, ensure_ascii=False, sort_keys=True),
            _signature_text(pick(p, "thought_signature")),
        )
        for n, p in enumerate(called)
    )


# -- Ollama ------------------------------------------------------------------------------


def ollama_tools(request: Request) -> list[dict[str, Any]]:
    """The request's functions as ``/api/chat`` ``tools``."""
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
        }
        for t in request.tools
    ]


def ollama_tool_message(m: Message) -> dict[str, Any]:
    """A tool loop's turn as an ``/api/chat`` message: an assistant turn with its
    ``tool_calls`` (arguments as objects), or one call's result as a ``tool`` message
    naming the function."""
    if m.tool_call_id is not None:
        return {"role": "tool", "content": m.content, "tool_name": m.name or ""}
    return {
        "role": "assistant",
        "content": m.content,
        "tool_calls": [
            {"function": {"name": c.name, "arguments": _arguments(c.arguments)}}
            for c in m.tool_calls
        ],
    }


def ollama_calls(calls: Any) -> tuple[ToolCall, ...]:
    """A message's ``tool_calls`` as calls, in order; arguments come as an object (a
    string, as some proxies send, is kept as written)."""
    out = []
    for n, c in enumerate(calls or ()):
        arguments = pick(c, "function", "arguments")
        text = (
            arguments
            if isinstance(arguments, str)
            else json.dumps(arguments or {}, ensure_ascii=False, sort_keys=True, default=str)
        )
        call_id = pick(c, "id")
        name = str(pick(c, "function", "name") or "")
        out.append(ToolCall(str(call_id) if call_id else f"{GENERATED_ID}{n}", name, text))
    return tuple(out)

"""How Amazon Bedrock's Converse wire reads and writes: one request body for every model
family on Bedrock (Anthropic, Meta, Mistral, Amazon Nova, …), live and as a batch line's
``modelInput`` (a job created with ``modelInvocationType: Converse``), and one answer
shape (``output.message``, ``stopReason``, ``usage``) on both paths.

The shapes, as botocore's service model types them:

- a message is ``{"role": "user" | "assistant", "content": [block, …]}``; a block is
  ``{"text"}``, ``{"image": {"format": "png", "source": {"bytes"}}}``, ``{"document":
  {"format": "pdf", "name", "source": {"bytes"}}}``, ``{"toolUse": {"toolUseId", "name",
  "input"}}``, ``{"toolResult": {"toolUseId", "content": [{"text"}]}}`` or
  ``{"cachePoint": {"type": "default"}}``; ``bytes`` are raw bytes for boto3 and base64
  on the wire (a batch line);
- the system prompt is a list of ``{"text"}`` (and ``cachePoint``) blocks;
- ``inferenceConfig`` carries ``maxTokens`` and ``temperature``; a schema goes as a
  forced tool (``toolConfig: {tools: [{toolSpec: {name: "answer", inputSchema: {json}}}],
  toolChoice: {tool: {name: "answer"}}}``), which every family with tool use takes;
- usage is ``inputTokens`` (cache reads and writes not included), ``outputTokens``,
  ``cacheReadInputTokens`` and ``cacheWriteInputTokens``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from agac.providers._anthropic_wire import tool_schema
from agac.providers._cache_wire import anthropic_minimum, first_user
from agac.providers._common import SCHEMA_NAME, as_int, parse_json, pick
from agac.providers.base import (
    Attachment,
    CacheHint,
    Message,
    Request,
    Response,
    ToolCall,
    Usage,
)
from agac.providers.stops import read_stop

__all__ = [
    "CONVERSE_STOPS",
    "bedrock_cache_minimum",
    "caches",
    "converse_params",
    "converse_response",
]

CONVERSE_STOPS = (
    "end_turn",
    "stop_sequence",
    "max_tokens",
    "model_context_window_exceeded",
    "tool_use",
    "guardrail_intervened",
    "content_filtered",
    "malformed_model_output",
    "malformed_tool_use",
)
"""Converse's stop reasons (botocore's ``StopReason`` enum); :mod:`agac.providers.stops`
says what each means."""

Data = Callable[[Attachment], Any]
"""An attachment's bytes as the path needs them: raw bytes (boto3) or base64 (a line)."""

_CACHE_POINT: dict[str, Any] = {"cachePoint": {"type": "default"}}
_UNWRAP = "agac_value"
#: Amazon Nova caches prompt prefixes of at least this many tokens.
NOVA_MINIMUM = 1_000


def bedrock_cache_minimum(model: str) -> int:
    """The fewest prefix tokens Bedrock caches for a model id or inference profile
    (``anthropic.claude-…``, ``us.anthropic.claude-…``, ``amazon.nova-…``); other
    families take no cache point, so Anthropic's minimum stands in as a high bar."""
    name = model.rsplit("/", 1)[-1]
    if "anthropic." in name:
        return anthropic_minimum(name.split("anthropic.", 1)[1])
    if "amazon.nova" in name:
        return NOVA_MINIMUM
    return anthropic_minimum(name)


def caches(model: str) -> bool:
    """Whether the model takes cache points (Anthropic's and Amazon Nova's on Bedrock); any
    other family refuses a request that carries one."""
    name = model.rsplit("/", 1)[-1]
    return "anthropic." in name or "amazon.nova" in name


def converse_params(request: Request, data: Data, *, schema_tool: bool = True) -> dict[str, Any]:
    """The Converse body of ``request`` without ``modelId`` (boto3 takes it beside the
    body; a batch job names it once). A cache hint puts a cache point after the system
    prompt and after the first user message's static head."""
    hint = request.cache if caches(request.model) else None
    chat = request.chat
    first = first_user(chat) if hint is not None else -1
    params: dict[str, Any] = {"messages": _messages(chat, hint, first, data)}
    if request.system:
        system: list[dict[str, Any]] = [{"text": request.system}]
        if hint is not None and hint.system:
            system.append(dict(_CACHE_POINT))
        params["system"] = system
    inference: dict[str, Any] = {"maxTokens": request.max_tokens}
    if request.temperature is not None:
        inference["temperature"] = request.temperature
    params["inferenceConfig"] = inference
    tools = [_tool(t.name, t.description, t.parameters) for t in request.tools]
    if request.schema is not None and schema_tool:
        tools.append(_tool(SCHEMA_NAME, "Record the answer.", tool_schema(request.schema)))
        params["toolConfig"] = {"tools": tools, "toolChoice": {"tool": {"name": SCHEMA_NAME}}}
    elif tools:
        params["toolConfig"] = {"tools": tools}
    return params


def _tool(name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"toolSpec": {"name": name, "description": description, "inputSchema": {"json": schema}}}


def _messages(
    chat: list[Message], hint: CacheHint | None, first: int, data: Data
) -> list[dict[str, Any]]:
    """Converse messages: tool results go back in a user turn, consecutive ones joined
    (Converse wants the turns to alternate)."""
    out: list[dict[str, Any]] = []
    for i, m in enumerate(chat):
        if m.role == "tool":
            result = {
                "toolResult": {"toolUseId": m.tool_call_id or "", "content": [{"text": m.content}]}
            }
            if out and out[-1]["role"] == "user" and "toolResult" in out[-1]["content"][-1]:
                out[-1]["content"].append(result)
            else:
                out.append({"role": "user", "content": [result]})
            continue
        out.append({"role": m.role, "content": _content(m, hint if i == first else None, data)})
    return out


def _content(m: Message, hint: CacheHint | None, data: Data) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if hint is not None and hint.static_chars > 0 and not m.attachments:
        head, rest = hint.split(m.content)
        blocks = [{"text": head}, dict(_CACHE_POINT)] + ([{"text": rest}] if rest else [])
    elif m.content:
        blocks = [{"text": m.content}]
    files = [_attachment(a, data) for a in m.attachments]
    blocks = blocks + files if m.position == "after" else files + blocks
    for call in m.tool_calls:
        blocks.append(
            {"toolUse": {"toolUseId": call.id, "name": call.name, "input": _args(call.arguments)}}
        )
    return blocks


def _attachment(a: Attachment, data: Data) -> dict[str, Any]:
    fmt = a.media_type.split("/", 1)[-1].lower().replace("jpg", "jpeg")
    if a.kind == "pdf":
        return {"document": {"format": "pdf", "name": "document", "source": {"bytes": data(a)}}}
    return {"image": {"format": fmt, "source": {"bytes": data(a)}}}


def _args(arguments: str) -> Any:
    try:
        return json.loads(arguments or "{}")
    except ValueError:
        return {}


def converse_response(
    answer: Any,
    *,
    latency_ms: float,
    service_tier: str | None = None,
    request_id: str | None = None,
    offered: frozenset[str] = frozenset(),
    model: str = "",
) -> Response:
    """Normalize a Converse answer (boto3's dict, or a batch line's ``modelOutput``). A
    ``toolUse`` block named ``answer`` is the forced-tool structured answer; calls of
    tools in ``offered`` make a ``tool_use`` turn; any other is a call the action did not
    ask for. The stop is read by :func:`~agac.providers.stops.read_stop`."""
    blocks = pick(answer, "output", "message", "content") or []
    texts: list[str] = []
    calls: list[ToolCall] = []
    forced: Any = None
    for block in blocks:
        if not isinstance(block, dict):
            continue
        if "text" in block:
            texts.append(str(block["text"] or ""))
        use = block.get("toolUse")
        if isinstance(use, dict):
            name = str(use.get("name") or "")
            if name == SCHEMA_NAME:
                forced = _unwrap(use.get("input"))
            else:
                args = json.dumps(use.get("input") or {}, ensure_ascii=False)
                calls.append(ToolCall(str(use.get("toolUseId") or ""), name, args))
    called = calls[0].name if calls else None
    stop = read_stop(
        "bedrock",
        pick(answer, "stopReason"),
        tool_answer=forced is not None,
        tool_call=called,
        offered=bool(calls) and all(c.name in offered for c in calls),
    )
    if forced is not None:
        text, parsed = json.dumps(forced, ensure_ascii=False), forced
    else:
        text = "".join(texts)
        parsed = parse_json(text) if stop.reason == "end" else None
    return Response(
        text=text,
        model=model,
        stop_reason=stop.reason,
        usage=converse_usage(pick(answer, "usage")),
        parsed=parsed,
        service_tier=service_tier,
        latency_ms=latency_ms or float(as_int(pick(answer, "metrics", "latencyMs"))),
        raw_stop=stop.raw,
        stop_detail=stop.detail,
        request_id=request_id,
        tool_calls=tuple(calls) if stop.reason == "tool_use" else (),
    )


def converse_usage(usage: Any) -> Usage:
    """Converse's ``usage``: ``inputTokens`` already leaves cache reads and writes out."""
    return Usage(
        input_tokens=as_int(pick(usage, "inputTokens")),
        output_tokens=as_int(pick(usage, "outputTokens")),
        cached_tokens=as_int(pick(usage, "cacheReadInputTokens")),
        cache_write_tokens=as_int(pick(usage, "cacheWriteInputTokens")),
    )


def _unwrap(value: Any) -> Any:
    if isinstance(value, dict) and set(value) == {_UNWRAP}:
        return value[_UNWRAP]
    return value

"""How a provider's stop reason is read: one closed table per provider, one function.

An answer is taken only from a stop that means "this is the answer": Anthropic
``end_turn`` and ``stop_sequence``, OpenAI and Groq ``stop``, Gemini ``STOP``, Ollama
``stop``. Every other value the provider documents has an explicit rule here
(truncated, content filter, refusal, a tool call nobody asked for, a paused turn), and a
value agac does not know — providers add one every few months — is ``unexpected``, with
the raw value in the detail: never answered with whatever text came.

:func:`read_stop` is the one place this is decided. Every adapter's normalizer calls it
(``message_response``, ``chat_response``, ``content_response``), and those normalizers
read live answers on the SDK path, on the lean HTTP transport and batch result lines
alike, so the same body reads the same way on every path. Adding a stop reason later is
one row of a table below.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from agac.providers.base import StopReason

__all__ = ["STOP_TABLES", "Rule", "Stop", "read_stop"]

Rule = Literal["end", "max_tokens", "refusal", "content_filter", "unexpected", "paused", "tool"]
"""A table's verdict: a :data:`~agac.providers.base.StopReason`, or ``tool`` — an answer
when it came as the tool call agac asked for (Anthropic's forced ``answer`` tool), else a
tool call the action did not ask for (``unexpected``)."""

_OPENAI: dict[str, Rule] = {
    "stop": "end",
    "length": "max_tokens",
    "content_filter": "content_filter",
    "tool_calls": "tool",
    "function_call": "tool",  # deprecated spelling of tool_calls
}

STOP_TABLES: Mapping[str, Mapping[str, Rule]] = {
    "anthropic": {
        "end_turn": "end",
        "stop_sequence": "end",
        "max_tokens": "max_tokens",
        "model_context_window_exceeded": "max_tokens",
        "refusal": "refusal",
        "tool_use": "tool",
        "pause_turn": "paused",
    },
    "openai": _OPENAI,
    # Groq documents stop, length, tool_calls and function_call; content_filter is kept
    # from OpenAI's list for gateways that speak OpenAI's vocabulary in front of Groq.
    "groq": _OPENAI,
    # Azure OpenAI: OpenAI's finish reasons; its content filter says which category.
    "azure": _OPENAI,
    # DeepSeek: OpenAI's values, and its inference service out of capacity mid-answer.
    "deepseek": {**_OPENAI, "insufficient_system_resource": "unexpected"},
    # Mistral: the context of the model full (``model_length``) truncates; ``error`` is an
    # answer broken off by the service.
    "mistral": {
        "stop": "end",
        "length": "max_tokens",
        "model_length": "max_tokens",
        "error": "unexpected",
        "tool_calls": "tool",
    },
    # Together: OpenAI's values, and ``eos`` (the model's end-of-sequence token: an answer).
    "together": {**_OPENAI, "eos": "end"},
    # OpenRouter: OpenAI's values as it normalizes them, and ``error`` (the upstream
    # provider failed mid-answer).
    "openrouter": {**_OPENAI, "error": "unexpected"},
    # vLLM and SGLang: OpenAI's values; ``abort`` (the server dropped the request) and
    # ``error`` (it failed mid-answer) are never an answer.
    "vllm": {**_OPENAI, "abort": "unexpected", "error": "unexpected"},
    # xAI and Fireworks: OpenAI's values.
    "xai": _OPENAI,
    "fireworks": _OPENAI,
    "gemini": {
        "STOP": "end",
        "MAX_TOKENS": "max_tokens",
        # Per-request token limit reached before the answer was complete.
        "CONTINUATION": "max_tokens",
        "SAFETY": "content_filter",
        "RECITATION": "content_filter",
        "LANGUAGE": "content_filter",
        "BLOCKLIST": "content_filter",
        "PROHIBITED_CONTENT": "content_filter",
        "SPII": "content_filter",
        "IMAGE_SAFETY": "content_filter",
        "IMAGE_PROHIBITED_CONTENT": "content_filter",
        "IMAGE_RECITATION": "content_filter",
        "MODEL_ARMOR": "content_filter",
        "ESCALATION": "content_filter",
        "PUP_LIMITED_DISABLED": "content_filter",
        "MALFORMED_FUNCTION_CALL": "tool",
        "UNEXPECTED_TOOL_CALL": "tool",
        "TOO_MANY_TOOL_CALLS": "tool",
        "OTHER": "unexpected",
        "FINISH_REASON_UNSPECIFIED": "unexpected",
        "IMAGE_OTHER": "unexpected",
        "NO_IMAGE": "unexpected",
        "MALFORMED_RESPONSE": "unexpected",
        "MISSING_THOUGHT_SIGNATURE": "unexpected",
    },
    # Amazon Bedrock's Converse, for every model family: Anthropic's values, a guardrail or
    # the model's own filter, and an answer or tool call the model garbled.
    "bedrock": {
        "end_turn": "end",
        "stop_sequence": "end",
        "max_tokens": "max_tokens",
        "model_context_window_exceeded": "max_tokens",
        "tool_use": "tool",
        "guardrail_intervened": "content_filter",
        "content_filtered": "content_filter",
        "malformed_model_output": "unexpected",
        "malformed_tool_use": "unexpected",
    },
    "ollama": {
        "stop": "end",
        "length": "max_tokens",
        # Model-management answers, not a chat answer.
        "load": "unexpected",
        "unload": "unexpected",
    },
}
"""Every documented stop/finish reason of each provider and what agac makes of it."""


@dataclass(frozen=True, slots=True)
class Stop:
    """How a response stopped: the normalized ``reason``, the provider's own ``raw``
    value, and the ``detail`` a person reads when the unit fails because of it."""

    reason: StopReason
    raw: str
    detail: str | None = None


def read_stop(
    provider: str,
    raw: str | None,
    *,
    tool_answer: bool = False,
    refusal: str | None = None,
    blocked: str | None = None,
    detail: str | None = None,
    tool_call: str | None = None,
    offered: bool = False,
) -> Stop:
    """The stop of one response of ``provider`` whose stop/finish reason is ``raw``.

    ``tool_answer``: the answer came as the tool call agac asked for (only then is a tool
    stop an answer). ``refusal``: a refusal the provider sent beside the stop reason
    (OpenAI ``message.refusal``): a refusal whatever the finish reason says. ``blocked``:
    the prompt itself was blocked and no candidate came (Gemini
    ``promptFeedback.blockReason``): a content filter. ``detail``: what the provider
    said about the stop (Anthropic ``stop_details``, Gemini's safety category or block
    message), kept for the person who reads the failure. ``tool_call``: the name of a tool
    the reply calls that the action did not ask for (a Gemini ``functionCall`` part, an
    OpenAI ``tool_calls`` entry), whatever the stop value says — Gemini ends a function
    call with ``STOP``: never an answer. ``offered``: every tool the reply calls is one
    the request offered (an action's ``tools:``): the turn is ``tool_use``, which the
    engine's tool loop answers, whatever the stop value says.
    """
    raw = raw or ""
    if refusal:
        text = refusal if not detail else f"{refusal} ({detail})"
        return Stop("refusal", raw or "refusal", text)
    if blocked:
        what = "the prompt was blocked"
        return Stop("content_filter", blocked, f"{what}: {detail}" if detail else what)
    rule = STOP_TABLES.get(provider, {}).get(raw)
    if tool_call is not None and offered and rule in ("end", "tool"):
        return Stop("tool_use", raw, detail)
    if tool_call is not None and not tool_answer and rule in ("end", "tool"):
        said = (
            f"{provider} stopped with {raw!r} on a call of tool {tool_call!r}: "
            "the model called a tool the action did not ask for"
        )
        return Stop("unexpected", raw, f"{said}: {detail}" if detail else said)
    if rule is None:
        said = (
            f"{provider} stopped with {raw!r}, a stop reason agac does not know"
            if raw
            else f"{provider} sent no stop reason"
        )
        return Stop("unexpected", raw, f"{said}: {detail}" if detail else said)
    if rule == "tool":
        if tool_answer:
            return Stop("end", raw, detail)
        said = (
            f"{provider} stopped with {raw!r}: the model called a tool the action did not ask for"
        )
        return Stop("unexpected", raw, f"{said}: {detail}" if detail else said)
    if rule == "unexpected":
        said = f"{provider} stopped with {raw!r} before the answer was complete"
        return Stop("unexpected", raw, f"{said}: {detail}" if detail else said)
    return Stop(rule, raw, detail)

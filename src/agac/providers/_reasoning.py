"""Reasoning kept out of an answer: the part of a reply that is the model thinking.

Providers send reasoning three ways: in a field of its own (Groq ``message.reasoning``
when asked with ``reasoning_format: parsed``, ``reasoning_content`` on DeepSeek-style
servers, Ollama ``message.thinking`` when asked with ``think``), in blocks or parts the
normalizers already skip (Anthropic ``thinking``, Gemini ``thought`` parts), or inline: the
content itself opens with ``<think>…</think>`` (Groq's ``deepseek-r1-*`` and ``qwen3``
unless asked otherwise, Ollama's ``deepseek-r1`` on ``/api/chat``). Where a provider can
send it apart, the adapter asks for that (:func:`thinks_inline` names the models that
would otherwise inline it); whatever arrives inline anyway is split off here. Either way the
answer is only what follows the reasoning, and the reasoning is counted as reasoning.

Asking for reasoning apart changes how it travels, never the answer agac keeps (the inline
form is split to the same answer), so it is not part of the request's fingerprint.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from agac.providers._common import pick

__all__ = ["Split", "content_text", "reasoning_share", "split_reasoning", "thinks_inline"]

_OPEN = "<think>"
_CLOSE = "</think>"

#: Model families that write their reasoning inline as ``<think>`` unless asked otherwise:
#: DeepSeek-R1 and its distillations, Qwen3 and QwQ (any namespace: ``qwen/qwen3-32b``,
#: any tag: ``deepseek-r1:8b``).
_INLINE_THINKERS = re.compile(r"(?:^|/)(?:deepseek-r1|qwen3|qwq|qwen-qwq)", re.IGNORECASE)


def thinks_inline(model: str) -> bool:
    """Whether ``model`` writes ``<think>`` reasoning into its content unless asked not to."""
    return bool(_INLINE_THINKERS.search(model))


@dataclass(frozen=True, slots=True)
class Split:
    """A reply's content as the answer and the reasoning that came before it."""

    answer: str
    reasoning: str = ""


def split_reasoning(content: str, apart: str | None = None) -> Split:
    """The answer in ``content`` and the reasoning: ``apart`` (a reasoning field the
    provider sent beside the content), then a leading ``<think>…</think>`` block of the
    content. A block that never closes (the reply was cut while thinking) is all reasoning.
    Text after the block starts the answer (its leading blank lines dropped); a ``<think>``
    anywhere but at the start is the answer's own text."""
    reasoning = apart or ""
    stripped = content.lstrip()
    if not stripped.startswith(_OPEN):
        return Split(content, reasoning)
    inner, closed, rest = stripped[len(_OPEN) :].partition(_CLOSE)
    thought = inner.strip()
    reasoning = f"{reasoning}\n{thought}" if reasoning and thought else reasoning or thought
    return Split(rest.lstrip() if closed else "", reasoning)


def reasoning_share(split: Split, output_tokens: int, reported: int) -> int:
    """The reasoning tokens of a reply: what the provider reported, else the reasoning's
    share of the output tokens by characters (Groq and Ollama bill reasoning as output and
    report no count of their own for these models)."""
    if reported or not split.reasoning or output_tokens <= 0:
        return reported
    total = len(split.reasoning) + len(split.answer)
    return min(output_tokens, round(output_tokens * len(split.reasoning) / total))


def content_text(content: Any) -> tuple[str, str | None]:
    """A message's content as (answer text, reasoning or None). Most APIs send a string;
    some (Mistral's reasoning models) send a list of chunks: ``text`` chunks are the
    answer, ``thinking`` chunks (their own text chunks inside) are reasoning."""
    if content is None or isinstance(content, str):
        return content or "", None
    text: list[str] = []
    thought: list[str] = []
    for chunk in content:
        kind = pick(chunk, "type")
        if kind == "text":
            text.append(str(pick(chunk, "text") or ""))
        elif kind == "thinking":
            inner = pick(chunk, "thinking")
            parts = inner if isinstance(inner, list) else [inner]
            thought += [str(pick(p, "text") or "") if not isinstance(p, str) else p for p in parts]
    return "".join(text), "".join(thought) or None

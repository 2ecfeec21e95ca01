"""Prompt caching on the wire: where each provider's request carries a cache hint
(:class:`~agac.providers.base.CacheHint`), and the fewest prefix tokens each caches.

A request without a hint is sent exactly as before. With one:

- Anthropic marks breakpoints with ``cache_control: {"type": "ephemeral"}`` (``"ttl":
  "1h"`` for the hour-long cache; five minutes is the default and sends no ttl): on the
  system prompt, sent as one text block (``hint.system``), and on the static head of the
  first user message, which becomes its own text block ahead of the rest and of the
  attachments. Two breakpoints at most (Anthropic takes four).
- OpenAI sends ``prompt_cache_key`` (the adapter's own flag: Groq takes none).
- Gemini caches implicitly; a hint naming an explicit cache (``cachedContents/…``) sends
  ``cachedContent`` and leaves out what the cache holds: the system instruction
  (``hint.system``) and the static head of the first user message.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agac.media import Attachment
from agac.providers.base import CacheHint, Message

Blocks = Callable[[str, tuple[Attachment, ...], str], list[dict[str, Any]]]
"""Builds a message's content blocks from its text, attachments and their position."""

__all__ = [
    "anthropic_content",
    "anthropic_marker",
    "anthropic_minimum",
    "anthropic_system",
    "first_user",
    "gemini_cache_name",
    "gemini_minimum",
    "gemini_rest",
]

#: Anthropic's minimum cacheable prompt by model family (its prompt-caching docs); a model
#: not listed caches from 1,024 tokens, the figure of the Sonnet and Opus 4 families.
_ANTHROPIC_MINIMUMS: tuple[tuple[str, int], ...] = (
    ("claude-opus-4-5", 4096),
    ("claude-haiku-4-5", 4096),
    ("claude-3-5-haiku", 2048),
    ("claude-3-haiku", 2048),
)
ANTHROPIC_DEFAULT_MINIMUM = 1024

#: Gemini's minimum for implicit and explicit caching by model family; a model not
#: listed is taken at 4,096 tokens, the highest figure Google has published.
_GEMINI_MINIMUMS: tuple[tuple[str, int], ...] = (
    ("gemini-2.5-flash", 1024),
    ("gemini-3-flash", 1024),
    ("gemini-2.5-pro", 4096),
    ("gemini-3-pro", 4096),
)
GEMINI_DEFAULT_MINIMUM = 4096


def _minimum(table: tuple[tuple[str, int], ...], model: str, default: int) -> int:
    name = model.lower().removeprefix("models/")
    for prefix, tokens in table:
        if name.startswith(prefix):
            return tokens
    return default


def anthropic_minimum(model: str) -> int:
    """The fewest prompt tokens Anthropic caches for ``model``."""
    return _minimum(_ANTHROPIC_MINIMUMS, model, ANTHROPIC_DEFAULT_MINIMUM)


def gemini_minimum(model: str) -> int:
    """The fewest prompt tokens Gemini caches for ``model``."""
    return _minimum(_GEMINI_MINIMUMS, model, GEMINI_DEFAULT_MINIMUM)


def first_user(messages: list[Message]) -> int:
    """The index of the first user message (-1 for none): the one whose head is static."""
    return next((i for i, m in enumerate(messages) if m.role == "user"), -1)


def anthropic_marker(hint: CacheHint) -> dict[str, str]:
    """One breakpoint's ``cache_control``."""
    return {"type": "ephemeral", "ttl": "1h"} if hint.ttl == "1h" else {"type": "ephemeral"}


def anthropic_system(system: str, hint: CacheHint | None) -> str | list[dict[str, Any]]:
    """The ``system`` field: the prompt as given, or one marked text block."""
    if hint is None or not hint.system:
        return system
    return [{"type": "text", "text": system, "cache_control": anthropic_marker(hint)}]


def anthropic_content(
    message: Message, hint: CacheHint | None, blocks: Blocks
) -> str | list[dict[str, Any]]:
    """A message's ``content``; ``blocks(text, attachments, position)`` builds its
    content blocks. The first user message of a hinted request starts with its static
    head as a marked text block: [static] [attachments] [rest] for attachments placed
    ``before``, [static] [rest] [attachments] for ``after``. A head of blanks (Anthropic
    refuses a text block of whitespace) is not split off."""
    static, rest = hint.split(message.content) if hint is not None else ("", message.content)
    if not static.strip():
        if not message.attachments:
            return message.content
        return list(blocks(message.content, message.attachments, message.position))
    assert hint is not None  # a static head comes only from a hint
    head = {"type": "text", "text": static, "cache_control": anthropic_marker(hint)}
    tail = [{"type": "text", "text": rest}] if rest else []
    files = list(blocks("", message.attachments, message.position)) if message.attachments else []
    return [head, *files, *tail] if message.position == "before" else [head, *tail, *files]


def gemini_cache_name(hint: CacheHint | None) -> str | None:
    """The explicit cache a hinted request names, as the API spells it
    (``cachedContents/…``), or None."""
    if hint is None or not hint.name:
        return None
    return hint.name if hint.name.startswith("cachedContents/") else f"cachedContents/{hint.name}"


def gemini_rest(message: Message, hint: CacheHint) -> Message:
    """The first user message less the static head an explicit cache holds."""
    return Message(
        message.role, hint.split(message.content)[1], message.attachments, message.position
    )

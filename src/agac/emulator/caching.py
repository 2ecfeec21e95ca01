"""The emulator's prompt cache: the cache reads and writes each provider reports.

Two kinds, as the providers document them:

- **Explicit** (Anthropic): only a request with ``cache_control`` breakpoints caches. The
  prompt up to each breakpoint (tools, system, messages, in that order) is a prefix; a
  prefix of at least the model's minimum is *written* the first time it is seen and
  *read* while it lives (five minutes, or an hour for ``"ttl": "1h"``; a read renews it).
  A request reads its longest live prefix and writes the rest up to its last breakpoint.
- **Implicit** (OpenAI, Groq, Gemini): every prompt is cached without being asked; a
  prefix of at least the minimum seen before is read, in steps of 128 tokens from the
  minimum (OpenAI's granularity, used for all three). OpenAI's ``prompt_cache_key``
  separates the caches: requests hit only the prefixes seen under the same key.

Tokens are the emulator's own estimate (:mod:`.answers`): a quarter of the prompt's
characters, 258 an attachment. A provider module makes a :class:`CachePlan` of each
request when it decodes it (a live call, or a batch item at ``batch.create``); the
plan is spent when the request is answered (:meth:`PromptCache.use`), so in a batch
the first request to reach a prefix writes it and the later ones read it.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .answers import text_chars
from .media import attachment_tokens

__all__ = [
    "Breakpoint",
    "CachePlan",
    "CacheUse",
    "PromptCache",
    "anthropic_minimum",
    "anthropic_plan",
    "gemini_minimum",
    "gemini_plan",
    "openai_plan",
]

#: How long an implicit cache entry lives: it does not expire in the emulator.
_FOREVER = math.inf
_TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}
#: Implicit caches read prefixes in steps of this many tokens from the minimum.
STEP = 128
OPENAI_MINIMUM = 1024

#: Minimums by model family, as agac's adapters know them (the emulator imports none of
#: agac: the table is its own). Any other model: the default after each table.
_ANTHROPIC = (
    ("claude-opus-4-5", 4096),
    ("claude-haiku-4-5", 4096),
    ("claude-3-5-haiku", 2048),
    ("claude-3-haiku", 2048),
)
_GEMINI = (
    ("gemini-2.5-flash", 1024),
    ("gemini-3-flash", 1024),
    ("gemini-2.5-pro", 4096),
    ("gemini-3-pro", 4096),
)


def _minimum(table: tuple[tuple[str, int], ...], model: str, default: int) -> int:
    name = model.lower().removeprefix("models/")
    return next((tokens for prefix, tokens in table if name.startswith(prefix)), default)


def anthropic_minimum(model: str) -> int:
    """The fewest prompt tokens the emulated Anthropic caches for ``model``."""
    return _minimum(_ANTHROPIC, model, 1024)


def gemini_minimum(model: str) -> int:
    """The fewest prompt tokens the emulated Gemini caches for ``model``."""
    return _minimum(_GEMINI, model, 4096)


@dataclass(frozen=True)
class Breakpoint:
    """One ``cache_control`` breakpoint: the prefix's tokens, its identity, its lifetime."""

    tokens: int
    key: str
    ttl: str


@dataclass(frozen=True)
class CachePlan:
    """What one request may read from or write to the cache: explicit ``breakpoints``
    (Anthropic) or implicit ``prefixes`` (``(tokens, identity)`` at each step)."""

    minimum: int
    breakpoints: tuple[Breakpoint, ...] = ()
    prefixes: tuple[tuple[int, str], ...] = ()


@dataclass(frozen=True)
class CacheUse:
    """What a request read from the cache and wrote to it (by lifetime), in tokens."""

    read: int = 0
    write_5m: int = 0
    write_1h: int = 0

    @property
    def written(self) -> int:
        return self.write_5m + self.write_1h


class PromptCache:
    """Every cached prefix, by identity, with the emulator time it expires at."""

    def __init__(self) -> None:
        self.entries: dict[str, float] = {}

    def clear(self) -> None:
        self.entries.clear()

    def use(self, plan: CachePlan | None, now: float) -> CacheUse:
        """Read and write the cache for one request answered at ``now``."""
        if plan is None:
            return CacheUse()
        if plan.breakpoints:
            return self._explicit(plan, now)
        read = 0
        for tokens, key in plan.prefixes:
            if key in self.entries:
                read = tokens
            self.entries[key] = _FOREVER
        return CacheUse(read=read)

    def _explicit(self, plan: CachePlan, now: float) -> CacheUse:
        eligible = [b for b in plan.breakpoints if b.tokens >= plan.minimum]
        read = 0
        for b in eligible:
            if self.entries.get(b.key, -1.0) > now:
                read = max(read, b.tokens)
                self.entries[b.key] = now + _TTL_SECONDS[b.ttl]  # a read renews the entry
        writes = {"5m": 0, "1h": 0}
        done = read
        for b in sorted(eligible, key=lambda b: b.tokens):
            if b.tokens > done:
                writes[b.ttl] += b.tokens - done
                done = b.tokens
            if self.entries.get(b.key, -1.0) <= now:
                self.entries[b.key] = now + _TTL_SECONDS[b.ttl]
        return CacheUse(read=read, write_5m=writes["5m"], write_1h=writes["1h"])


def _tokens(chars: int, attached: int) -> int:
    return (max(1, math.ceil(chars / 4)) if chars else 0) + attached


def _units(value: Any, where: str) -> Iterator[tuple[str, Any]]:
    """A string or a list of blocks as ``(path, block)`` units, in order."""
    if isinstance(value, list):
        for index, block in enumerate(value):
            yield f"{where}.{index}", block
    elif value:
        yield where, value


def _marked(body: dict[str, Any]) -> bool:
    """Whether a Messages body carries any ``cache_control`` (most carry none)."""
    if "cache_control" in body:
        return True
    lists = [body.get("system")] + [
        m.get("content") for m in body.get("messages") or () if isinstance(m, dict)
    ]
    return any(
        isinstance(b, dict) and "cache_control" in b
        for blocks in lists
        if isinstance(blocks, list)
        for b in blocks
    )


def anthropic_plan(model: str, body: dict[str, Any]) -> tuple[CachePlan | None, dict[str, Any]]:
    """The plan of a Messages body and the markers it carried (``cache_control``: each
    breakpoint's path and ttl; a top-level ``cache_control`` marks the last block)."""
    if not _marked(body):
        return None, {}
    units = [("tools", body.get("tools"))] if body.get("tools") else []
    units += list(_units(body.get("system"), "system"))
    for i, m in enumerate(body.get("messages") or ()):
        content = m.get("content") if isinstance(m, dict) else None
        units += list(_units(content, f"messages.{i}.content"))
    marks: list[dict[str, Any]] = []
    breakpoints: list[Breakpoint] = []
    digest = hashlib.sha256(model.encode())
    chars = attached = 0
    top = body.get("cache_control")
    for index, (path, unit) in enumerate(units):
        control = unit.get("cache_control") if isinstance(unit, dict) else None
        where = path
        if control is None and isinstance(top, dict) and index == len(units) - 1:
            control, where = top, "cache_control"
        plain = (
            {k: v for k, v in unit.items() if k != "cache_control"}
            if isinstance(unit, dict)
            else unit
        )
        # A prefix is its blocks where they stand (the marker itself is not part of it).
        digest.update(json.dumps([path, plain], sort_keys=True).encode())
        if path != "tools":
            chars += text_chars(plain)
            attached += attachment_tokens(plain)
        if isinstance(control, dict):
            ttl = "1h" if control.get("ttl") == "1h" else "5m"
            marks.append({"at": where, "ttl": ttl})
            breakpoints.append(Breakpoint(_tokens(chars, attached), digest.hexdigest(), ttl))
    markers = {"cache_control": marks} if marks else {}
    if not breakpoints:
        return None, markers
    return CachePlan(anthropic_minimum(model), breakpoints=tuple(breakpoints)), markers


def _implicit(
    namespace: str, pieces: list[tuple[str, Any]], total: int, minimum: int
) -> CachePlan | None:
    """An implicit plan: the prompt's identity at every step from ``minimum`` up to its
    ``total`` tokens. ``pieces`` are ``(kind, value)``: ``text`` (a string, cut anywhere),
    ``mark`` (a role or turn boundary, no tokens) or ``file`` (an attachment, whole)."""
    if total < minimum:
        return None
    steps = iter(range(minimum, total + 1, STEP))
    step = next(steps, None)
    digest = hashlib.sha256(namespace.encode())
    out: list[tuple[int, str]] = []
    at = 0  # characters so far, an attachment counting 4 a token
    for kind, value in pieces:
        if step is None:
            break
        if kind == "mark":
            digest.update(b"\x00" + str(value).encode() + b"\x00")
            continue
        text = value if kind == "text" else json.dumps(value, sort_keys=True)
        width = len(text) if kind == "text" else 4 * attachment_tokens(value)
        while step is not None and step * 4 <= at + width:
            if kind == "text":
                cut = digest.copy()
                cut.update(text[: step * 4 - at].encode())
                out.append((step, cut.hexdigest()))
            elif step * 4 == at + width:
                cut = digest.copy()
                cut.update(text.encode())
                out.append((step, cut.hexdigest()))
            step = next(steps, None)
        digest.update(text.encode())
        at += width
    return CachePlan(minimum, prefixes=tuple(out)) if out else None


def _content_pieces(content: Any, pieces: list[tuple[str, Any]]) -> None:
    if isinstance(content, str):
        pieces.append(("text", content))
        return
    for part in content if isinstance(content, list) else ():
        if isinstance(part, dict) and isinstance(part.get("text"), str):
            pieces.append(("text", part["text"]))
        elif isinstance(part, dict) and attachment_tokens(part):
            pieces.append(("file", part))


def openai_plan(
    provider: str, model: str, body: dict[str, Any], total: int, minimum: int | None
) -> tuple[CachePlan | None, dict[str, Any]]:
    """The implicit plan of a chat body (``minimum`` None: the provider caches nothing)
    and its marker, ``prompt_cache_key``."""
    key = body.get("prompt_cache_key")
    markers = {"prompt_cache_key": key} if key is not None else {}
    if minimum is None or total < minimum:
        return None, markers
    pieces: list[tuple[str, Any]] = []
    for m in body.get("messages") or ():
        if isinstance(m, dict):
            pieces.append(("mark", m.get("role")))
            _content_pieces(m.get("content"), pieces)
    namespace = json.dumps([provider, model, key])
    return _implicit(namespace, pieces, total, minimum), markers


def gemini_plan(
    model: str, body: dict[str, Any], total: int
) -> tuple[CachePlan | None, dict[str, Any]]:
    """The implicit plan of a GenerateContentRequest and its marker, ``cachedContent``
    (an explicit cache it names is answered from :mod:`.gemini_caches`; this plan is
    what the request's own prompt caches implicitly)."""
    name = body.get("cachedContent")
    markers = {"cachedContent": name} if name is not None else {}
    minimum = gemini_minimum(model)
    if total < minimum:
        return None, markers
    pieces: list[tuple[str, Any]] = [("mark", "system")]
    system = body.get("systemInstruction")
    _content_pieces((system or {}).get("parts") if isinstance(system, dict) else system, pieces)
    for c in body.get("contents") or ():
        if isinstance(c, dict):
            pieces.append(("mark", c.get("role")))
            _content_pieces(c.get("parts"), pieces)
    namespace = json.dumps(["gemini", model.removeprefix("models/"), name])
    return _implicit(namespace, pieces, total, minimum), markers

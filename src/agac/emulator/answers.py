"""Deterministic model answers for the emulator.

Contract: :func:`answer` is a pure function of its arguments. The same provider, model,
request body (messages, params, provider ``seed``) and emulator seed always give the same
:class:`Answer`; a different seed gives a different one. When a JSON schema is given the
text is a JSON value that conforms to it (see :func:`conforming_value`). Token counts are
``ceil(chars / 4)``, the estimate docs/workflow-reference.md uses when no tokenizer is at hand, plus 258
for each attached image or PDF page. An answer without a schema ends by naming the
attachments it saw (:mod:`agac.emulator.media`).

A request asking for a verdict (a judge's, its schema a boolean ``pass``) is graded
``pass: true`` unless its text holds ``[[emulator judges fail: TEXT]]`` and, outside the
markers, ``TEXT``: a judge that fails exactly the answers holding ``TEXT``.

A request asking which of two answers is ``better`` (a pairwise judge's) is answered
``tie``, unless its text holds ``[[emulator prefers: first]]`` (``second``), a judge biased
by position, or ``[[emulator prefers: TEXT]]``: the one answer holding ``TEXT``.

A prompt may script its answer: a request whose text holds ``[[emulator answers: TEXT]]``
is answered ``TEXT`` exactly (schema or not), unless ``TEXT`` is already a message of the
conversation — a model that answers badly once and, shown its answer and told what is
wrong, answers properly. Tests use it to make chosen records fail a check on purpose.

A prompt may script tool calls: ``[[emulator calls: NAME {JSON arguments}]]`` asks for a
call of the tool ``NAME`` (when the request offers it); several calls in one directive,
joined by `` | ``, are asked together in one turn, and each further directive is a turn
of its own, asked once the results of the turn before have been sent back. Once every
scripted turn has its results, the model answers: a scripted ``[[emulator answers: …]]``
with ``{result}`` replaced by the last result, or else its usual answer naming the
results (the first string field of a schema's object holds them).

Answer faults (``truncated``, ``invalid_json``, ``schema_violation``, ``refusal``) bend
the answer the way a real model misbehaves; provider modules render ``finish`` in their
own vocabulary (``length`` / ``max_tokens`` / ``MAX_TOKENS``).
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .media import attachment_tokens, seen_text
from .search import Source, WebSearchAsked, find_sources

__all__ = [
    "ANSWER_FAULTS",
    "Answer",
    "answer",
    "conforming_value",
    "count_tokens",
    "fingerprint",
    "judge_verdict",
    "pairwise_verdict",
    "prompt_tokens",
    "scripted_answer",
    "scripted_calls",
    "text_chars",
]

ANSWER_FAULTS = frozenset({"truncated", "invalid_json", "schema_violation", "refusal"})

_WORDS = [
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliet",
    "kilo",
    "lima",
    "mike",
    "november",
    "oscar",
    "papa",
    "quebec",
    "romeo",
    "sierra",
    "tango",
    "uniform",
    "victor",
    "whiskey",
    "xray",
    "yankee",
    "zulu",
]

REFUSAL_TEXT = "I'm sorry, but I can't help with that request."


@dataclass(frozen=True)
class Answer:
    """A provider-neutral model answer.

    ``finish`` is ``stop``, ``length`` (truncated at the token cap) or ``refusal``;
    ``text`` is ``None`` only for a refusal.
    """

    text: str | None
    finish: str
    input_tokens: int
    output_tokens: int
    cached_tokens: int = 0
    refusal: str | None = None
    reply: dict[str, Any] | None = None
    """A ``reply`` fault: how the provider module bends the body it renders (a stop value,
    extra blocks, usage fields, or the whole body; :mod:`agac.emulator.replies`)."""
    tool_calls: tuple[tuple[str, str], ...] = ()
    """A turn that calls tools: (name, arguments as JSON text) each; ``text`` is then None
    and ``finish`` is ``tool_calls``."""
    cache_write_5m: int = 0
    cache_write_1h: int = 0
    """``cached_tokens`` and the cache writes are the prompt cache's (:mod:`.caching`),
    set by the provider module after the answer is computed; all are part of
    ``input_tokens``, which counts the whole prompt."""
    sources: tuple[Source, ...] = ()
    """What the request's web searches found, one source per search (:mod:`.search`)."""


def count_tokens(chars: int) -> int:
    """Estimate tokens from a character count: ``ceil(chars / 4)``, at least 1."""
    return max(1, math.ceil(chars / 4))


def text_chars(value: Any, key: str | None = None) -> int:
    """Count the prompt characters of a JSON-like request part: every string under a
    ``content``, ``text`` or ``system`` key, or bare in a list (not roles or types)."""
    if isinstance(value, str):
        return len(value) if key in (None, "content", "text", "system") else 0
    if isinstance(value, dict):
        return sum(text_chars(v, k) for k, v in value.items())
    if isinstance(value, list):
        return sum(text_chars(v, key) for v in value)
    return 0


def prompt_tokens(prompt: Any, body: Any) -> int:
    """The input tokens of a request: its prompt's characters (:func:`text_chars`) and
    the attachments named in its canonical ``body``."""
    return count_tokens(text_chars(prompt)) + attachment_tokens(body)


def fingerprint(provider: str, model: str, body: Any) -> str:
    """Hash what determines an answer: provider, model and the canonical request body.

    The caller removes transport-only keys (``stream``, batch ``metadata``) first, so a
    live call and a batch item asking the same thing share a fingerprint.
    """
    canonical = json.dumps([provider, model, body], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def answer(
    *,
    provider: str,
    model: str,
    body: Any,
    prompt: Any,
    schema: dict[str, Any] | None,
    max_tokens: int | None,
    seed: int,
    fault: str | None = None,
    reply: dict[str, Any] | None = None,
    tools: frozenset[str] = frozenset(),
    results: tuple[str, ...] = (),
    turns: int = 0,
    search: WebSearchAsked | None = None,
) -> Answer:
    """Compute the answer to one request.

    ``body`` is the canonical request (what the fingerprint covers), ``prompt`` the part
    whose characters count as input, ``schema`` the requested JSON schema if any.
    ``max_tokens`` truncates a longer answer (``finish = "length"``). ``tools``: the names
    of the tools the request offers; ``results``: the tool results it sends back, in
    order; ``turns``: how many of its assistant turns called tools; ``search``: the web
    search it offers (the answer then carries what its searches found).
    """
    digest = hashlib.sha256(f"{seed}:{fingerprint(provider, model, body)}".encode()).digest()
    rng = random.Random(digest)
    input_tokens = prompt_tokens(prompt, body)
    if fault == "refusal":
        return Answer(
            None, "refusal", input_tokens, count_tokens(len(REFUSAL_TEXT)), 0, REFUSAL_TEXT, reply
        )
    verdict = pairwise_verdict(prompt, schema) or judge_verdict(prompt, schema)
    calls = scripted_calls(prompt, tools, turns) if tools and verdict is None else ()
    if calls and fault is None:
        out = sum(count_tokens(len(n) + len(a)) for n, a in calls)
        found = (
            find_sources(search, list(_strings(prompt)), digest.hex())
            if search is not None and search.every_turn
            else ()
        )
        return Answer(None, "tool_calls", input_tokens, out, 0, None, reply, calls, sources=found)
    last = results[-1] if results else None
    scripted = scripted_answer(prompt, last) if verdict is None else None
    if verdict is not None:
        text = json.dumps(verdict)
    elif scripted is not None:
        text = scripted
    elif schema is not None:
        text = json.dumps(_with_results(conforming_value(schema, rng, schema), schema, results))
    else:
        n = rng.randint(8, 20)
        text = (
            f"Emulated answer {digest.hex()[:8]}: "
            + " ".join(rng.choice(_WORDS) for _ in range(n))
            + "."
            + seen_text(body)
            + (" Tool results: " + "; ".join(results) + "." if results else "")
        )
    finish = "stop"
    if fault == "invalid_json":
        text = "{" + text.strip("{}") + ' "unterminated'
    elif fault == "schema_violation":
        text = json.dumps(_violating_value(schema))
    elif fault == "truncated":
        text = text[: max(1, len(text) // 2)]
        finish = "length"
    if max_tokens is not None and max_tokens > 0 and count_tokens(len(text)) > max_tokens:
        text = text[: max_tokens * 4]
        finish = "length"
    sources = (
        find_sources(search, list(_strings(prompt)), digest.hex()) if search is not None else ()
    )
    return Answer(
        text, finish, input_tokens, count_tokens(len(text)), 0, None, reply, sources=sources
    )


_SCRIPTED = re.compile(r"\[\[emulator answers: (.+?)\]\]", re.DOTALL)
_JUDGED = re.compile(r"\[\[emulator judges fail: (.+?)\]\]", re.DOTALL)
_MARKER = re.compile(r"\[\[emulator [a-z ]+: .+?\]\]", re.DOTALL)


_PREFERS = re.compile(r"\[\[emulator prefers: (.+?)\]\]", re.DOTALL)


def pairwise_verdict(prompt: Any, schema: dict[str, Any] | None) -> dict[str, Any] | None:
    """The emulator as a pairwise judge: a request whose schema asks which of two answers
    is ``better`` (``1``, ``2`` or ``tie``) is answered ``tie``, unless its text holds
    ``[[emulator prefers: first]]`` (or ``second``: a judge biased by position) or
    ``[[emulator prefers: TEXT]]``: the answer holding ``TEXT``, when only one does. None
    for a request that is not a pairwise judge's."""
    props = (schema or {}).get("properties")
    better = props.get("better") if isinstance(props, dict) else None
    if not isinstance(better, dict) or "1" not in (better.get("enum") or ()):
        return None
    texts = list(_strings(prompt))
    wanted = [m.group(1) for t in texts for m in _PREFERS.finditer(t)]
    choice = "tie"
    if wanted:
        choice = {"first": "1", "second": "2"}.get(wanted[0]) or _holding(texts, wanted[0])
    return {"better": choice, "reason": "the emulator's preference"}


def _holding(texts: list[str], wanted: str) -> str:
    """``1`` or ``2``: the one answer of the prompt that holds ``wanted``; else ``tie``."""
    for text in texts:
        head, sep, second = _MARKER.sub("", text).partition("\nAnswer 2:\n")
        if not sep:
            continue
        first = head.partition("\nAnswer 1:\n")[2]
        if (wanted in first) != (wanted in second):
            return "1" if wanted in first else "2"
    return "tie"


def judge_verdict(prompt: Any, schema: dict[str, Any] | None) -> dict[str, Any] | None:
    """The emulator as a judge: a request whose schema asks for a verdict (a boolean
    ``pass``) is answered ``pass: true``, unless its text holds ``[[emulator judges fail:
    TEXT]]`` and, outside such markers, ``TEXT`` (the graded answer holds it): then
    ``pass: false``, saying so. None for a request that is not a judge's."""
    props = (schema or {}).get("properties")
    kind = props.get("pass", {}).get("type") if isinstance(props, dict) else None
    if not isinstance(kind, str) or kind.lower() != "boolean":
        return None
    texts = list(_strings(prompt))
    wanted = [m.group(1) for t in texts for m in _JUDGED.finditer(t)]
    plain = [_MARKER.sub("", t) for t in texts]
    for text in wanted:
        if any(text in t for t in plain):
            return {"pass": False, "reason": f"the answer holds {text}"}
    return {"pass": True, "reason": "the answer looks right"}


def scripted_answer(prompt: Any, result: str | None = None) -> str | None:
    """The answer a prompt scripts (``[[emulator answers: TEXT]]``, ``{result}`` in it
    replaced by ``result``, the last tool result), or None: none is scripted, or the
    answer is already a message of the conversation (it was answered once)."""
    texts = list(_strings(prompt))
    for text in texts:
        found = _SCRIPTED.search(text)
        if found is not None:
            wanted = found.group(1)
            if result is not None:
                wanted = wanted.replace("{result}", result)
            return None if any(_same_answer(t, wanted) for t in texts) else wanted
    return None


def _same_answer(text: str, wanted: str) -> bool:
    """Whether a message of the conversation is the scripted answer: the same text, or the
    same JSON value however it is spaced (agac sends a stored answer back compact)."""
    if text.strip() == wanted.strip():
        return True
    try:
        return bool(json.loads(text) == json.loads(wanted))
    except ValueError:
        return False


_CALLS = re.compile(r"\[\[emulator calls: (.+?)\]\]", re.DOTALL)
_CALL = re.compile(r"\s*([A-Za-z0-9_-]+)\s*(.*?)\s*$", re.DOTALL)


def scripted_calls(prompt: Any, tools: frozenset[str], turns: int) -> tuple[tuple[str, str], ...]:
    """The calls the prompt scripts for the turn after ``turns`` tool-calling turns:
    the next ``[[emulator calls: …]]`` directive's, when every tool it names is offered;
    () when none is left (the model answers)."""
    directives = [m.group(1) for t in _strings(prompt) for m in _CALLS.finditer(t)]
    if turns >= len(directives):
        return ()
    calls = []
    for part in directives[turns].split(" | "):
        found = _CALL.match(part)
        if found is None or found.group(1) not in tools:
            return ()
        calls.append((found.group(1), found.group(2) or "{}"))
    return tuple(calls)


def _with_results(value: Any, schema: dict[str, Any], results: tuple[str, ...]) -> Any:
    """A schema's answer that names the tool results: in its object's first string field."""
    if not results or not isinstance(value, dict):
        return value
    for key, prop in (schema.get("properties") or {}).items():
        if isinstance(prop, dict) and prop.get("type") == "string" and "enum" not in prop:
            return {**value, key: "; ".join(results)}
    return value


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _violating_value(schema: dict[str, Any] | None) -> Any:
    """A JSON value of the wrong top-level type for ``schema``."""
    kind = _schema_type(schema or {})
    if kind == "object":
        return ["schema_violation"]
    return {"schema_violation": True}


def _schema_type(schema: dict[str, Any]) -> str | None:
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), kind[0] if kind else None)
    if isinstance(kind, str):
        return kind.lower()  # Gemini's OpenAPI subset spells types in capitals.
    if "properties" in schema:
        return "object"
    if "items" in schema:
        return "array"
    return None


def _resolve(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if not isinstance(ref, str) or not ref.startswith("#/"):
        return schema
    node: Any = root
    for part in ref[2:].split("/"):
        node = node.get(part, {}) if isinstance(node, dict) else {}
    return node if isinstance(node, dict) else {}


def conforming_value(
    schema: dict[str, Any], rng: random.Random, root: dict[str, Any], depth: int = 0
) -> Any:
    """Build a small JSON value that conforms to ``schema``.

    Covers what structured output uses: objects (every property, required or not),
    arrays of 1–2 items within min/maxItems, enums and consts (picked with ``rng``),
    strings within min/maxLength and common formats, integers and numbers within bounds,
    booleans, nulls, local ``$ref`` and ``anyOf``/``oneOf`` (first branch) / ``allOf``
    (merged). Both JSON Schema and Gemini's OpenAPI subset (``type: "STRING"``) work.
    """
    schema = _resolve(schema, root)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return rng.choice(list(schema["enum"]))
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            branches = [b for b in schema[key] if _schema_type(_resolve(b, root)) != "null"]
            return conforming_value((branches or schema[key])[0], rng, root, depth + 1)
    if schema.get("allOf"):
        merged: dict[str, Any] = {}
        for part in schema["allOf"]:
            part = _resolve(part, root)
            props = {**merged.get("properties", {}), **part.get("properties", {})}
            merged = {**merged, **part, "properties": props}
        return conforming_value(merged, rng, root, depth + 1)
    kind = _schema_type(schema)
    if kind == "object":
        props = schema.get("properties") or {}
        if depth > 8:
            props = {k: v for k, v in props.items() if k in schema.get("required", [])}
        return {k: conforming_value(v, rng, root, depth + 1) for k, v in props.items()}
    if kind == "array":
        low = int(schema.get("minItems", 1))
        high = int(schema.get("maxItems", max(low, 2)))
        count = min(max(low, rng.randint(1, 2)), high)
        items = schema.get("items") or {"type": "string"}
        return [conforming_value(items, rng, root, depth + 1) for _ in range(count)]
    if kind == "integer":
        return _number(schema, rng, integer=True)
    if kind == "number":
        return _number(schema, rng, integer=False)
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "null":
        return None
    return _string(schema, rng)


def _number(schema: dict[str, Any], rng: random.Random, *, integer: bool) -> int | float:
    low = schema.get("minimum", schema.get("exclusiveMinimum", 0))
    high = schema.get("maximum", schema.get("exclusiveMaximum", max(low, 0) + 100))
    if "exclusiveMinimum" in schema and "minimum" not in schema:
        low = low + 1 if integer else low + (high - low) / 100
    if "exclusiveMaximum" in schema and "maximum" not in schema:
        high = high - 1 if integer else high - (high - low) / 100
    if integer:
        low_i, high_i = math.ceil(low), math.floor(high)
        value = rng.randint(low_i, max(low_i, high_i))
        step = schema.get("multipleOf")
        if isinstance(step, int) and step > 0:
            value = max(low_i, (value // step) * step)
        return value
    return round(rng.uniform(low, high), 3)


def _string(schema: dict[str, Any], rng: random.Random) -> str:
    fmt = schema.get("format")
    if fmt == "date-time":
        return f"2024-01-{rng.randint(1, 28):02d}T12:00:00Z"
    if fmt == "date":
        return f"2024-01-{rng.randint(1, 28):02d}"
    if fmt == "email":
        return f"{rng.choice(_WORDS)}@example.com"
    if fmt in ("uri", "url"):
        return f"https://example.com/{rng.choice(_WORDS)}"
    if fmt == "uuid":
        return f"00000000-0000-4000-8000-{rng.getrandbits(48):012x}"
    low = int(schema.get("minLength", 1))
    high = int(schema.get("maxLength", max(low, 40)))
    text = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(1, 4)))
    while len(text) < low:
        text += " " + rng.choice(_WORDS)
    return text[:high]

"""Prompt caching on the wire (docs/providers.md, Prompt caching): what each adapter sends
for a request's cache hint, live on both transports and in its batch API, as the
emulator's journal saw it; the cache reads and writes read back into ``Response.usage``;
and a request without a hint sent as before, with no marker at all.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from typing import Any

import pytest
from provider_support import BATCH_SECONDS, MODELS, SCHEMA, is_model_call, poll_until

from agac.providers.base import CacheHint, Message, Request, Response, StoredRequests

SYSTEM = "You label product reviews."
#: The static head of every first user message: ~1,100 tokens, above the 1,024 minimum
#: of the models used here.
STATIC = "Read the review below and label its sentiment, score and tags. " * 70
MARKED = math.ceil((len(SYSTEM) + len(STATIC)) / 4)
"""The tokens of the prefix up to the user message's breakpoint (system included)."""


def _request(
    provider: str,
    rest: str = "Review: the blender works well.",
    *,
    hint: CacheHint | None = None,
    custom_id: str | None = None,
    system: str | None = SYSTEM,
    model: str | None = None,
) -> Request:
    messages = ((Message("system", system),) if system else ()) + (Message("user", STATIC + rest),)
    return Request(
        provider=provider,
        model=model or MODELS[provider],
        messages=messages,
        max_tokens=64,
        custom_id=custom_id,
        timeout=10.0,
        cache=hint,
    )


def _hint(**kw: Any) -> CacheHint:
    return CacheHint(**{"static_chars": len(STATIC), "key": "agac-k1", **kw})


def _chats(emulator: Any) -> list[dict[str, Any]]:
    return [
        r
        for r in emulator.requests()
        if r["op"] == "chat" and is_model_call(r["method"], r["path"])
    ]


def _entry(emulator: Any, op: str) -> dict[str, Any]:
    found = [r for r in emulator.requests() if r["op"] == op]
    assert found, emulator.requests()
    return found[-1]


def _no_markers(body: Any) -> None:
    text = json.dumps(body)
    for marker in ("cache_control", "prompt_cache_key", "cachedContent", "cached_content"):
        assert marker not in text, marker


# -- Anthropic ---------------------------------------------------------------


async def test_anthropic_marks_system_and_static_head_and_reads_back_writes_then_reads(
    make_provider: Any, emulator: Any
) -> None:
    provider = make_provider("anthropic")
    first = await provider.complete(_request("anthropic", hint=_hint()))
    body = _chats(emulator)[-1]["body"]
    assert body["system"] == [
        {"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}
    ]
    assert body["messages"][0]["content"] == [
        {"type": "text", "text": STATIC, "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "Review: the blender works well."},
    ]
    assert _chats(emulator)[-1]["cache"] == {
        "cache_control": [
            {"at": "system.0", "ttl": "5m"},
            {"at": "messages.0.content.0", "ttl": "5m"},
        ]
    }
    # The system breakpoint alone is under the model's minimum: only the second writes.
    assert (first.usage.cache_write_tokens, first.usage.cached_tokens) == (MARKED, 0)
    second = await provider.complete(_request("anthropic", "Review: too loud.", hint=_hint()))
    assert (second.usage.cache_write_tokens, second.usage.cached_tokens) == (0, MARKED)
    total = math.ceil((len(SYSTEM) + len(STATIC) + len("Review: too loud.")) / 4)
    assert second.usage.input_tokens == total - MARKED


async def test_anthropic_one_hour_ttl_and_no_static_head(make_provider: Any, emulator: Any) -> None:
    provider = make_provider("anthropic")
    await provider.complete(_request("anthropic", hint=_hint(ttl="1h", static_chars=0)))
    body = _chats(emulator)[-1]["body"]
    assert body["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    # static_chars 0: the system breakpoint only; the user message is sent as it was.
    assert body["messages"][0]["content"] == STATIC + "Review: the blender works well."
    await provider.complete(_request("anthropic", hint=_hint(system=False)))
    body = _chats(emulator)[-1]["body"]
    assert body["system"] == SYSTEM
    assert body["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral"}


@pytest.mark.parametrize("position", ["before", "after"])
async def test_anthropic_attachments_go_after_the_static_head(
    position: str, make_provider: Any, emulator: Any, tmp_path: Any
) -> None:
    from agac.media import describe_file
    from agac.samplefiles import png_bytes

    path = tmp_path / "photo.png"
    path.write_bytes(png_bytes())
    att = describe_file(str(path))
    request = Request(
        provider="anthropic",
        model=MODELS["anthropic"],
        max_tokens=64,
        timeout=10.0,
        cache=_hint(system=False),
        messages=(Message("user", STATIC + "What is this?", (att,), position),),
    )  # type: ignore[arg-type]
    await make_provider("anthropic").complete(request)
    kinds = [
        (b["type"], "cache_control" in b)
        for b in _chats(emulator)[-1]["body"]["messages"][0]["content"]
    ]
    if position == "before":
        assert kinds == [("text", True), ("image", False), ("text", False)]
    else:
        assert kinds == [("text", True), ("text", False), ("image", False)]


# -- OpenAI and Groq ---------------------------------------------------------


async def test_openai_sends_prompt_cache_key_and_reads_the_shared_prefix(
    make_provider: Any, emulator: Any
) -> None:
    provider = make_provider("openai")
    first = await provider.complete(_request("openai", hint=_hint()))
    entry = _chats(emulator)[-1]
    assert entry["body"]["prompt_cache_key"] == "agac-k1"
    assert entry["cache"] == {"prompt_cache_key": "agac-k1"}
    # Nothing else changes: the messages go as they would without a hint.
    assert entry["body"]["messages"][1]["content"] == STATIC + "Review: the blender works well."
    assert first.usage.cached_tokens == 0
    second = await provider.complete(_request("openai", "Review: too loud.", hint=_hint()))
    cached = second.usage.cached_tokens
    assert cached >= 1024 and cached % 128 == 0 and cached <= MARKED
    assert (
        second.usage.input_tokens
        == math.ceil((len(SYSTEM) + len(STATIC) + len("Review: too loud.")) / 4) - cached
    )
    # Another key is another cache: the same prefix is not read under it.
    other = await provider.complete(_request("openai", "Review: ok.", hint=_hint(key="k2")))
    assert other.usage.cached_tokens == 0


async def test_groq_takes_no_prompt_cache_key(make_provider: Any, emulator: Any) -> None:
    await make_provider("groq").complete(_request("groq", hint=_hint()))
    entry = _chats(emulator)[-1]
    _no_markers(entry["body"])
    assert "cache" not in entry


# -- Gemini ------------------------------------------------------------------


async def test_gemini_implicit_cache_sends_nothing_and_reads_a_repeated_prefix(
    make_provider: Any, emulator: Any
) -> None:
    provider = make_provider("gemini")
    first = await provider.complete(_request("gemini", hint=_hint()))
    _no_markers(_chats(emulator)[-1]["body"])
    assert first.usage.cached_tokens == 0
    second = await provider.complete(_request("gemini", "Review: too loud.", hint=_hint()))
    assert second.usage.cached_tokens >= 1024 and second.usage.cached_tokens <= MARKED


async def _gemini_cache(provider: Any) -> str:
    """The id of a context cache of the static prefix, made at the emulator (which, as
    Gemini, refuses a request naming a cache it does not hold)."""
    made = await provider.create_context_cache(MODELS["gemini"], SYSTEM, STATIC, 600, "t")
    return str(made.name).removeprefix("cachedContents/")


async def test_gemini_explicit_cache_names_it_and_sends_only_the_rest(
    make_provider: Any, emulator: Any
) -> None:
    provider = make_provider("gemini")
    name = await _gemini_cache(provider)
    answer = await provider.complete(_request("gemini", hint=_hint(name=name)))
    entry = _chats(emulator)[-1]
    body = entry["body"]
    assert body["cachedContent"] == f"cachedContents/{name}"
    assert entry["cache"] == {"cachedContent": f"cachedContents/{name}"}
    assert answer.usage.cached_tokens == MARKED  # what the cache holds
    assert "systemInstruction" not in body
    assert body["contents"] == [
        {"role": "user", "parts": [{"text": "Review: the blender works well."}]}
    ]


async def test_gemini_in_json_mode_goes_whole_without_the_explicit_cache(
    make_provider: Any, emulator: Any
) -> None:
    request = replace(_request("gemini", hint=_hint(name="abc123")), schema=SCHEMA)
    await make_provider("gemini", structured_output="json_mode").complete(request)
    body = _chats(emulator)[-1]["body"]
    assert "cachedContent" not in body
    assert SYSTEM in body["systemInstruction"]["parts"][0]["text"]
    assert body["contents"][0]["parts"][0]["text"].startswith(STATIC)


async def test_gemini_with_a_system_prompt_the_cache_lacks_goes_whole(
    make_provider: Any, emulator: Any
) -> None:
    await make_provider("gemini").complete(
        _request("gemini", hint=_hint(name="abc123", system=False))
    )
    body = _chats(emulator)[-1]["body"]
    assert "cachedContent" not in body
    assert body["systemInstruction"]["parts"][0]["text"] == SYSTEM


# -- without a hint ----------------------------------------------------------


@pytest.mark.parametrize("name", ["openai", "anthropic", "gemini", "groq", "ollama"])
async def test_a_request_without_a_hint_carries_no_marker(
    name: str, make_provider: Any, emulator: Any
) -> None:
    provider = make_provider(name)
    answer: Response = await provider.complete(_request(name))
    entry = _chats(emulator)[-1]
    _no_markers(entry["body"])
    assert "cache" not in entry
    assert answer.usage.cache_write_tokens == 0
    if name == "anthropic":  # nothing marked, nothing cached, even on a second sight
        assert entry["body"]["system"] == SYSTEM
        again = await provider.complete(_request(name))
        assert again.usage.cached_tokens == 0


@pytest.mark.parametrize("name", ["openai", "anthropic", "groq"])
async def test_a_hint_changes_no_answer(name: str, make_provider: Any, emulator: Any) -> None:
    provider = make_provider(name)
    hinted = await provider.complete(_request(name, hint=_hint()))
    plain = await provider.complete(_request(name))
    assert hinted.text == plain.text
    assert emulator.stats()["duplicate_answers"] == 1  # the same request, asked twice


# -- batches -----------------------------------------------------------------

#: (provider, adapter options) per batch variant.
BATCHES: dict[str, tuple[str, dict[str, Any]]] = {
    "openai": ("openai", {}),
    "anthropic": ("anthropic", {}),
    "gemini-inline": ("gemini", {"batch_input": "inline"}),
    "gemini-file": ("gemini", {"batch_input": "file"}),
    "groq": ("groq", {}),
}


async def _batch_usage(provider: Any, emulator: Any, requests: Any) -> dict[str, Any]:
    handle = await provider.submit_batch(requests, "key-cache")
    emulator.advance(BATCH_SECONDS + 1)
    await poll_until(provider, handle, ("ended",))
    usage = {}
    async for result in provider.batch_results(handle):
        assert result.type == "succeeded", result
        usage[result.custom_id] = result.response.usage
    return usage


def _batch(name: str, hint: CacheHint | None, count: int = 3) -> list[Request]:
    return [
        _request(name, f"Review {i}: fine.", hint=hint, custom_id=f"r{i}") for i in range(count)
    ]


@pytest.mark.parametrize("variant", list(BATCHES))
@pytest.mark.parametrize("stored", [False, True], ids=["requests", "stored"])
async def test_batch_lines_carry_the_markers_and_results_the_cache_usage(
    variant: str, stored: bool, make_provider: Any, emulator: Any
) -> None:
    name, options = BATCHES[variant]
    provider = make_provider(name, **options)
    hint = _hint(name=await _gemini_cache(provider)) if name == "gemini" else _hint()
    requests: Any = _batch(name, hint)
    if stored:  # as the engine submits them: the stored text and the action's hint
        requests = StoredRequests([(r.custom_id, r.canonical()) for r in requests], hint)
    usage = await _batch_usage(provider, emulator, requests)
    marks = {m["custom_id"]: m for m in _entry(emulator, "batch.create").get("cache", [])}
    if name == "openai":
        assert marks == {
            f"r{i}": {"custom_id": f"r{i}", "prompt_cache_key": "agac-k1"} for i in range(3)
        }
    elif name == "anthropic":
        assert set(marks) == {"r0", "r1", "r2"}
        assert marks["r1"]["cache_control"] == [
            {"at": "system.0", "ttl": "5m"},
            {"at": "messages.0.content.0", "ttl": "5m"},
        ]
        assert usage["r0"].cache_write_tokens == MARKED
        assert [usage[f"r{i}"].cached_tokens for i in (1, 2)] == [MARKED, MARKED]
    elif name == "gemini":
        assert {m["cachedContent"] for m in marks.values()} == {f"cachedContents/{hint.name}"}
        assert all(u.cached_tokens == MARKED for u in usage.values())
    else:
        assert marks == {}
    if name in ("openai", "groq"):  # implicit: the first writes, the later ones read
        assert usage["r0"].cached_tokens == 0
        assert all(usage[f"r{i}"].cached_tokens >= 1024 for i in (1, 2))


@pytest.mark.parametrize("variant", list(BATCHES))
async def test_batch_without_a_hint_carries_no_marker(
    variant: str, make_provider: Any, emulator: Any
) -> None:
    name, options = BATCHES[variant]
    provider = make_provider(name, **options)
    pairs = [(r.custom_id, r.canonical()) for r in _batch(name, None)]
    usage = await _batch_usage(provider, emulator, StoredRequests(pairs))
    assert "cache" not in _entry(emulator, "batch.create")
    assert all(u.cache_write_tokens == 0 for u in usage.values())
    if name == "anthropic":
        assert all(u.cached_tokens == 0 for u in usage.values())


async def test_gemini_implicit_cache_reads_in_batch_results(
    make_provider: Any, emulator: Any
) -> None:
    provider = make_provider("gemini", batch_input="inline")
    usage = await _batch_usage(provider, emulator, _batch("gemini", _hint()))
    assert usage["r0"].cached_tokens == 0
    assert all(usage[f"r{i}"].cached_tokens >= 1024 for i in (1, 2))


async def test_i35_10_a_vanished_gemini_cache_sends_the_call_whole_not_a_key_error(
    make_provider: Any, emulator: Any
) -> None:
    provider = make_provider("gemini")
    name = await _gemini_cache(provider)
    await provider.complete(_request("gemini", hint=_hint(name=name)))
    # Gone at Gemini mid-run (deleted, or lost before its expiry): Gemini answers 403
    # "CachedContent not found", which must not fail the unit as a bad key.
    await provider.delete_context_cache(f"cachedContents/{name}")
    answer = await provider.complete(_request("gemini", "Review: too loud.", hint=_hint(name=name)))
    assert answer.text and answer.usage.cached_tokens == 0
    whole = _chats(emulator)[-1]["body"]
    assert "cachedContent" not in whole
    assert whole["contents"][0]["parts"][0]["text"].startswith(STATIC)
    # Every later request naming it goes whole at once, without a refused try first.
    before = len(_chats(emulator))
    await provider.complete(_request("gemini", "Review: fine.", hint=_hint(name=name)))
    after = _chats(emulator)
    assert len(after) == before + 1 and "cachedContent" not in after[-1]["body"]

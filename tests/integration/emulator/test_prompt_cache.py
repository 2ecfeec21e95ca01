"""The emulator's prompt cache (agac.emulator.caching) through the official SDKs: Anthropic
caches only what ``cache_control`` marks, from the model's minimum, for five minutes or
an hour of emulator time; OpenAI and Gemini read a prefix seen before, in 128-token steps,
OpenAI's per ``prompt_cache_key``; the control API forgets the cache."""

from __future__ import annotations

import math
from typing import Any

import anthropic
import openai
from google import genai

from agac.emulator.testing import RunningEmulator

LONG = "Label the sentiment of the review that follows these instructions. " * 70
TOKENS = math.ceil(len(LONG) / 4)


def _claude(
    client: anthropic.Anthropic,
    ttl: str | None = None,
    text: str = LONG,
    model: str = "claude-sonnet-4-5",
) -> Any:
    control: dict[str, str] = {"type": "ephemeral", **({"ttl": ttl} if ttl else {})}
    return client.messages.create(
        model=model,
        max_tokens=20,
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": text, "cache_control": control},
                    {"type": "text", "text": "Review: fine."},
                ],
            }
        ],
    ).usage


def test_anthropic_writes_then_reads_a_marked_prefix(claude: anthropic.Anthropic) -> None:
    first = _claude(claude)
    assert (first.cache_creation_input_tokens, first.cache_read_input_tokens) == (TOKENS, 0)
    assert first.cache_creation.ephemeral_5m_input_tokens == TOKENS
    assert first.input_tokens == math.ceil((len(LONG) + len("Review: fine.")) / 4) - TOKENS
    second = _claude(claude)
    assert (second.cache_creation_input_tokens, second.cache_read_input_tokens) == (0, TOKENS)


def test_anthropic_caches_nothing_under_the_minimum_or_unmarked(
    claude: anthropic.Anthropic,
) -> None:
    for _ in range(2):  # Haiku 4.5 caches from 4,096 tokens: this prefix is too short
        usage = _claude(claude, model="claude-haiku-4-5")
        assert (usage.cache_creation_input_tokens, usage.cache_read_input_tokens) == (0, 0)
    for _ in range(2):
        usage = claude.messages.create(
            model="claude-sonnet-4-5", max_tokens=20, messages=[{"role": "user", "content": LONG}]
        ).usage
        assert (usage.cache_creation_input_tokens, usage.cache_read_input_tokens) == (0, 0)


def test_anthropic_entries_live_five_minutes_or_an_hour(
    claude: anthropic.Anthropic, emu: RunningEmulator
) -> None:
    _claude(claude)
    _claude(claude, ttl="1h", text=LONG + "Hour.")
    emu.advance(301)
    assert _claude(claude).cache_creation_input_tokens == TOKENS  # expired: written again
    hour = _claude(claude, ttl="1h", text=LONG + "Hour.")
    assert hour.cache_read_input_tokens > 0
    assert emu.cache()["entries"] == 2
    emu.clear_cache()
    assert emu.cache()["entries"] == 0
    assert _claude(claude).cache_read_input_tokens == 0


def test_openai_reads_in_128_token_steps_per_prompt_cache_key(
    oai: openai.OpenAI, emu: RunningEmulator
) -> None:
    def cached(key: str | None, tail: str) -> int:
        extra = {"prompt_cache_key": key} if key else {}
        reply = oai.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": LONG + tail}], **extra
        )  # type: ignore[arg-type]
        assert reply.usage is not None and reply.usage.prompt_tokens_details is not None
        return int(reply.usage.prompt_tokens_details.cached_tokens or 0)

    assert cached("k", "one") == 0
    shared = cached("k", "two")
    assert shared == 1024 + 128 * ((TOKENS - 1024) // 128)
    assert cached("other", "two") == 0  # another key, another cache
    assert cached(None, "two") == 0
    assert cached(None, "three") == shared
    journal = [r for r in emu.requests() if r["op"] == "chat"]
    assert [r.get("cache") for r in journal[:3]] == [
        {"prompt_cache_key": "k"},
        {"prompt_cache_key": "k"},
        {"prompt_cache_key": "other"},
    ]
    assert "cache" not in journal[3]


def test_gemini_reads_a_repeated_prefix(gem: genai.Client, emu: RunningEmulator) -> None:
    def cached(tail: str) -> int:
        reply = gem.models.generate_content(model="gemini-2.5-flash", contents=LONG + tail)
        assert reply.usage_metadata is not None
        return int(reply.usage_metadata.cached_content_token_count or 0)

    assert cached("one") == 0
    assert cached("two") == 1024 + 128 * ((TOKENS - 1024) // 128)
    emu.reset()
    assert cached("three") == 0


def _marked_body(system: str, head: str, *, system_ttl: str = "5m") -> dict[str, Any]:
    mark = {"type": "ephemeral", **({"ttl": "1h"} if system_ttl == "1h" else {})}
    return {
        "model": "claude-sonnet-4-5",
        "system": [{"type": "text", "text": system, "cache_control": mark}],
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": head, "cache_control": {"type": "ephemeral"}},
                    {"type": "text", "text": "Review: fine."},
                ],
            }
        ],
    }


def test_two_breakpoints_read_the_longest_live_prefix_and_write_the_rest() -> None:
    from agac.emulator.caching import PromptCache, anthropic_plan

    cache = PromptCache()
    system, head, other = "S" * 4400, "H" * 4400, "O" * 4400

    def use(body: dict[str, Any]) -> tuple[int, int, int]:
        plan, _ = anthropic_plan("claude-sonnet-4-5", body)
        got = cache.use(plan, now=1000.0)
        return got.read, got.write_5m, got.write_1h

    # Each breakpoint is past the minimum: the first request writes both segments, by ttl.
    assert use(_marked_body(system, head, system_ttl="1h")) == (0, 1100, 1100)
    # Another head after the same system: the system prefix is read, the new head written.
    assert use(_marked_body(system, other, system_ttl="1h")) == (1100, 1100, 0)
    assert use(_marked_body(system, other, system_ttl="1h")) == (2200, 0, 0)

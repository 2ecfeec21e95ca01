"""``cache_minimum(model)``: the fewest prefix tokens each provider caches (docs/providers.md,
Prompt caching), read through the provider spec (``spec.minimum_for``); the emulator's own
table (it imports no agac code) says the same for every model named here."""

from __future__ import annotations

import pytest

from agac.emulator import caching
from agac.providers.registry import provider_spec

CASES = [
    ("anthropic", "claude-sonnet-4-5", 1024),
    ("anthropic", "claude-opus-4-1-20250805", 1024),
    ("anthropic", "claude-3-7-sonnet-latest", 1024),
    ("anthropic", "claude-3-5-sonnet-20241022", 1024),
    ("anthropic", "claude-3-5-haiku-20241022", 2048),
    ("anthropic", "claude-3-haiku-20240307", 2048),
    ("anthropic", "claude-opus-4-5-20251101", 4096),
    ("anthropic", "claude-haiku-4-5", 4096),
    ("anthropic", "claude-someday-9", 1024),
    ("openai", "gpt-4o-mini", 1024),
    ("openai", "gpt-5", 1024),
    ("gemini", "gemini-2.5-flash", 1024),
    ("gemini", "models/gemini-2.5-flash-lite", 1024),
    ("gemini", "gemini-2.5-pro", 4096),
    ("gemini", "gemini-1.5-pro", 4096),
]


@pytest.mark.parametrize(("provider", "model", "tokens"), CASES)
def test_each_adapter_says_its_cache_minimum(provider: str, model: str, tokens: int) -> None:
    assert provider_spec(provider).minimum_for(model) == tokens


@pytest.mark.parametrize("provider", ["groq", "ollama", "mock"])
def test_providers_agac_cannot_ask_to_cache_have_none(provider: str) -> None:
    assert provider_spec(provider).minimum_for("any-model") is None


@pytest.mark.parametrize(("provider", "model", "tokens"), [c for c in CASES if c[0] != "openai"])
def test_the_emulator_caches_from_the_same_minimum(provider: str, model: str, tokens: int) -> None:
    emulated = caching.anthropic_minimum if provider == "anthropic" else caching.gemini_minimum
    assert emulated(model) == tokens
    assert caching.OPENAI_MINIMUM == provider_spec("openai").minimum_for("gpt-4o")

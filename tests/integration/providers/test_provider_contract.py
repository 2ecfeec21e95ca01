"""The provider contract (docs/providers.md), online half: every adapter — the five official
SDKs against the emulator, and the offline mock — answers a schema request with
parsed JSON that validates, reports usage with input excluding cached tokens, and
normalizes truncation and refusal.
"""

from __future__ import annotations

import math
from typing import Any

import jsonschema
import pytest
from provider_support import MODELS, SCHEMA, SDK_PROVIDERS, make_request

from agac.errors import UnsupportedError
from agac.providers.base import Provider, ProviderSettings, Response
from agac.providers.registry import provider_class
from agac.providers.spec import ProviderSpec

ALL_PROVIDERS = (*SDK_PROVIDERS, "mock")
#: Providers that cache prompts without being asked (Anthropic caches only blocks marked
#: with cache_control, sent only with a cache hint; Ollama and the mock report no cache).
CACHING = ("openai", "gemini", "groq")
#: The emulator reads a prompt of 1,024+ tokens seen before, in 128-token steps.
LONG_TEXT = "The blender is loud but it crushes ice in seconds. " * 120


@pytest.mark.parametrize("name", ALL_PROVIDERS)
def test_each_adapter_declares_its_spec(name: str) -> None:
    spec = provider_class(name).spec
    assert isinstance(spec, ProviderSpec) and spec.name == name
    assert isinstance(spec.extra, str)
    assert spec.sdk_module is None or isinstance(spec.sdk_module, str)
    assert isinstance(spec.credential_env, tuple)
    batch = ("openai", "azure", "anthropic", "gemini", "groq", "mistral", "together")
    assert (spec.batch is not None) is (name in batch)


@pytest.mark.parametrize("name", ALL_PROVIDERS)
async def test_live_call_with_schema_returns_parsed_json_that_validates(
    name: str, make_provider: Any
) -> None:
    provider = make_provider(name)
    assert isinstance(provider, Provider)
    response = await provider.complete(make_request(name))
    assert isinstance(response, Response)
    jsonschema.validate(response.parsed, SCHEMA)
    assert response.stop_reason == "end"
    assert response.model
    assert response.usage.input_tokens > 0 and response.usage.output_tokens > 0
    assert response.latency_ms >= 0
    assert response.refusal is None


@pytest.mark.parametrize("name", SDK_PROVIDERS)
async def test_live_call_without_schema_returns_text(name: str, make_provider: Any) -> None:
    # No per-request timeout: the adapter's default applies.
    response = await make_provider(name).complete(make_request(name, schema=None, timeout=None))
    assert response.text and response.stop_reason == "end"
    assert response.latency_ms > 0


@pytest.mark.parametrize("name", ALL_PROVIDERS)
async def test_usage_input_excludes_cached_tokens(name: str, make_provider: Any) -> None:
    request = make_request(name, LONG_TEXT, system="Label it.")
    provider = make_provider(name)
    await provider.complete(request)  # the first sight of the prompt caches it
    usage = (await provider.complete(request)).usage
    prompt_tokens = math.ceil((len(LONG_TEXT) + len("Label it.")) / 4)
    if name in CACHING:
        assert usage.cached_tokens > 0
        assert usage.input_tokens < prompt_tokens - usage.cached_tokens / 2
    counted = usage.input_tokens + usage.cached_tokens + usage.cache_write_tokens
    # Roles and envelope strings may add a few tokens; double counting would add hundreds.
    assert abs(counted - prompt_tokens) <= 16, usage


@pytest.mark.parametrize("name", SDK_PROVIDERS)
async def test_truncated_answer_stops_with_max_tokens(
    name: str, emulator: Any, make_provider: Any
) -> None:
    emulator.add_fault({"provider": name, "op": "chat", "fault": {"answer": "truncated"}})
    response = await make_provider(name).complete(make_request(name))
    assert response.stop_reason == "max_tokens"


@pytest.mark.parametrize("name", SDK_PROVIDERS)
async def test_small_token_cap_stops_with_max_tokens(name: str, make_provider: Any) -> None:
    response = await make_provider(name).complete(make_request(name, max_tokens=3))
    assert response.stop_reason == "max_tokens"


@pytest.mark.parametrize("name", ("openai", "anthropic", "groq"))
async def test_refusal_has_its_own_stop_reason(
    name: str, emulator: Any, make_provider: Any
) -> None:
    emulator.add_fault({"provider": name, "op": "chat", "fault": {"answer": "refusal"}})
    response = await make_provider(name).complete(make_request(name))
    assert response.stop_reason == "refusal"
    assert response.refusal
    assert response.parsed is None


@pytest.mark.parametrize("name", SDK_PROVIDERS)
async def test_invalid_json_answer_parses_to_none(
    name: str, emulator: Any, make_provider: Any
) -> None:
    emulator.add_fault({"provider": name, "op": "chat", "fault": {"answer": "invalid_json"}})
    response = await make_provider(name).complete(make_request(name))
    assert response.parsed is None
    assert response.text


@pytest.mark.parametrize("name", ("ollama", "mock"))
async def test_providers_without_batch_refuse_batches(name: str, make_provider: Any) -> None:
    provider = make_provider(name)
    assert provider.spec.batch is None
    with pytest.raises(UnsupportedError):
        await provider.submit_batch([make_request(name, custom_id="r1")], "key")


@pytest.mark.parametrize("name", ("openai", "anthropic", "gemini", "groq"))
def test_missing_credentials_is_unsupported_and_names_the_variable(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    cls = provider_class(name)
    for var in cls.spec.credential_env:
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(UnsupportedError) as caught:
        cls(ProviderSettings(name=name))
    assert caught.value.code == "missing_credentials"
    assert cls.spec.credential_env[0] in str(caught.value)


def test_models_cover_every_provider() -> None:
    # DeepSeek (JSON mode only), OpenRouter, vLLM, xAI and Fireworks have their own suites
    # (test_deepseek.py, test_openrouter.py, test_vllm.py, test_xai.py, test_fireworks.py).
    own = {"deepseek", "openrouter", "vllm", "xai", "fireworks"}
    assert set(MODELS) == {*ALL_PROVIDERS, *own}


async def test_anthropic_auth_token_is_enough(
    emulator: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "emulator-token")
    provider = provider_class("anthropic")(ProviderSettings(name="anthropic"))
    try:
        response = await provider.complete(make_request("anthropic"))
    finally:
        await provider.aclose()
    jsonschema.validate(response.parsed, SCHEMA)


async def test_base_url_from_settings_wins_over_the_environment(
    emulator: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # nothing listens there
    settings = ProviderSettings(name="openai", base_url=emulator.url + "/v1")
    provider = provider_class("openai")(settings)
    try:
        assert (await provider.complete(make_request("openai"))).parsed is not None
    finally:
        await provider.aclose()


@pytest.mark.parametrize("name", ("openai", "anthropic", "gemini", "groq"))
def test_batch_providers_state_their_batch_limits(name: str) -> None:
    batch = provider_class(name).spec.batch
    assert batch is not None
    assert batch.max_requests >= 50_000
    assert batch.max_bytes >= 200 * 1024 * 1024

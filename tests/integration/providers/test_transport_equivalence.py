"""P1: both online transports send the same request (docs/providers.md).

For each provider the same :class:`Request` goes out once through agac's lean HTTP
client and once through the official SDK; the emulator records what it received, and
the two must agree on everything that decides the answer or the account: method, path
and query, the whole JSON body (model, messages, system prompt, schema or response
format, token limit, temperature, seed), and the headers that authenticate and pick the
API version. Headers that only name the client (user agent, the SDKs' telemetry) may
differ.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from provider_support import SDK_PROVIDERS, is_model_call, make_request

from agac.providers.base import ProviderSettings, Request
from agac.providers.registry import provider_class

#: Per provider: the headers that must be equal (lower-case), beyond Content-Type.
HEADERS: dict[str, tuple[str, ...]] = {
    "openai": ("authorization", "openai-organization", "openai-project"),
    "groq": ("authorization",),
    "azure": ("api-key", "authorization"),
    "anthropic": ("authorization", "x-api-key", "anthropic-version", "x-custom"),
    "gemini": ("x-goog-api-key", "x-server-timeout"),
    "ollama": ("authorization",),
    "mistral": ("authorization",),
    "together": ("authorization",),
}
#: Where each provider's live calls go (the SDKs' endpoints under the emulator's root).
PATHS = {
    "openai": "/v1/chat/completions",
    "groq": "/openai/v1/chat/completions",
    "azure": "/azure/openai/deployments/gpt-4o-mini-batch/chat/completions",
    "anthropic": "/v1/messages",
    "gemini": "/v1/models/gemini-2.5-flash:generateContent",
    "ollama": "/api/chat",
    "mistral": "/mistral/v1/chat/completions",
    "together": "/together/v1/chat/completions",
}
#: Keys an SDK adds to the body that change nothing (the ollama SDK's empty tool list,
#: the mistralai SDK's ``stream: false``).
SDK_ONLY_KEYS: dict[str, tuple[str, ...]] = {"ollama": ("tools",), "mistral": ("stream",)}
#: Options that select each provider's fallback form of structured output.
FALLBACK = {
    "openai": "json_mode",
    "azure": "json_mode",
    "groq": "json_mode",
    "gemini": "json_mode",
    "ollama": "json_mode",
    "mistral": "json_mode",
    "together": "json_mode",
    "anthropic": "tool",
}


@pytest.fixture
def credentials_env(monkeypatch: pytest.MonkeyPatch, emulator: Any) -> None:
    """Optional headers each SDK reads from its environment, set so they are compared."""
    monkeypatch.setenv("OPENAI_ORG_ID", "org-agac")
    monkeypatch.setenv("OPENAI_PROJECT_ID", "proj_agac")
    monkeypatch.setenv("OLLAMA_API_KEY", "ollama-key")
    monkeypatch.setenv("ANTHROPIC_CUSTOM_HEADERS", "X-Custom: one")


async def _received(
    emulator: Any, name: str, request: Request, **options: Any
) -> dict[str, dict[str, Any]]:
    """What the emulator received for ``request`` sent over each transport."""
    out: dict[str, dict[str, Any]] = {}
    for transport in ("lean", "sdk"):
        emulator.reset_stats()
        settings = ProviderSettings(name=name, options=options, transport=transport)
        adapter = provider_class(name)(settings)
        try:
            response = await adapter.complete(request)
        finally:
            await adapter.aclose()
        assert response.text
        (entry,) = [e for e in emulator.requests() if is_model_call(e["method"], e["path"])]
        out[transport] = entry
    return out


def _assert_same(name: str, sent: dict[str, dict[str, Any]]) -> None:
    lean, sdk = sent["lean"], sent["sdk"]
    assert (lean["method"], lean["path"], lean["query"]) == (
        sdk["method"],
        sdk["path"],
        sdk["query"],
    )
    sdk_body = {k: v for k, v in sdk["body"].items() if k not in SDK_ONLY_KEYS.get(name, ())}
    assert lean["body"] == sdk_body
    for header in (*HEADERS[name], "content-type"):
        assert lean["headers"].get(header) == sdk["headers"].get(header), header


@pytest.mark.parametrize("name", SDK_PROVIDERS)
async def test_p1_both_transports_send_the_same_request(
    name: str, emulator: Any, credentials_env: None
) -> None:
    request = dataclasses.replace(make_request(name), temperature=0.3, seed=2, max_tokens=77)
    sent = await _received(emulator, name, request)
    _assert_same(name, sent)
    lean = sent["lean"]
    assert lean["path"] == PATHS[name]
    # The comparison is not vacuous: the request's parts are in what was compared.
    assert "77" in str(lean["body"]) and "The blender works well." in str(lean["body"])
    assert any(v for h, v in lean["headers"].items() if h in HEADERS[name])


@pytest.mark.parametrize("name", SDK_PROVIDERS)
async def test_p1_same_request_without_schema_or_system(name: str, emulator: Any) -> None:
    request = make_request(name, schema=None, system=None, timeout=None)
    _assert_same(name, await _received(emulator, name, request))


@pytest.mark.parametrize("name", SDK_PROVIDERS)
async def test_p1_same_request_in_the_fallback_form(name: str, emulator: Any) -> None:
    sent = await _received(emulator, name, make_request(name), structured_output=FALLBACK[name])
    _assert_same(name, sent)

"""P1: what the lean transport promises beyond sending the SDKs' requests (docs/providers.md):
one pooled keep-alive session per adapter with at most ``connections`` open, no SDK
import on the online path, and a missing aiohttp reported naming the extra.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from typing import Any

import pytest
from provider_support import SDK_PROVIDERS, make_request

from agac.errors import ConfigError
from agac.providers.base import ProviderSettings
from agac.providers.factory import open_providers
from agac.providers.registry import provider_class


def _clients(emulator: Any) -> list[str]:
    return [entry["client"] for entry in emulator.requests() if entry["op"] == "chat"]


@pytest.mark.parametrize("name", SDK_PROVIDERS)
async def test_p1_connections_are_pooled_and_bounded(name: str, emulator: Any) -> None:
    """Nine calls at once through an adapter allowed three connections use three; the
    calls after them reuse those (keep-alive)."""
    emulator.add_fault({"provider": name, "op": "chat", "fault": {"delay_ms": 150}, "times": 9})
    adapter = provider_class(name)(ProviderSettings(name=name, connections=3))
    try:
        answers = await asyncio.gather(
            *(adapter.complete(make_request(name, f"r{i}")) for i in range(9))
        )
        first = set(_clients(emulator))
        for i in range(3):
            await adapter.complete(make_request(name, f"again {i}"))
    finally:
        await adapter.aclose()
    assert all(a.parsed is not None for a in answers)
    assert len(first) == 3, first
    assert set(_clients(emulator)) == first


def test_p1_missing_aiohttp_names_the_extra(emulator: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "aiohttp", None)  # as if it were not installed
    with pytest.raises(ConfigError) as caught:
        open_providers(["openai", "anthropic"], None)
    assert len(caught.value.problems) == 2
    for problem in caught.value.problems:
        assert problem.code == "provider_not_installed"
        assert "aiohttp" in problem.message
        assert problem.hint is not None and "pip install -e '.[" in problem.hint
        assert "http extra" in problem.hint and "clone" in problem.hint
        assert "transport: sdk" in problem.hint
    # The SDK transport does without it.
    adapter = provider_class("openai")(ProviderSettings(name="openai", transport="sdk"))
    assert adapter.settings.transport == "sdk"


def test_p1_online_calls_do_not_import_the_sdk(emulator: Any) -> None:
    """A lean adapter answers a live call without importing its SDK (whose import costs
    0.3-1.5 s of every run's start-up); the SDK comes in for batch calls only."""
    code = (
        "import asyncio, json, sys\n"
        "from agac.providers.base import Message, ProviderSettings, Request\n"
        "from agac.providers.registry import provider_class\n"
        "models = {'openai': 'gpt-4o-mini', 'anthropic': 'claude-sonnet-4-5',\n"
        "          'gemini': 'gemini-2.5-flash', 'groq': 'llama-3.3-70b-versatile',\n"
        "          'ollama': 'llama3.2'}\n"
        "async def main():\n"
        "    for name, model in models.items():\n"
        "        adapter = provider_class(name)(ProviderSettings(name=name))\n"
        "        answer = await adapter.complete(Request(name, model, (Message('user', 'hi'),)))\n"
        "        assert answer.text\n"
        "        await adapter.aclose()\n"
        "asyncio.run(main())\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in\n"
        "      ('openai', 'anthropic', 'google', 'groq', 'ollama', 'httpx', 'httpx2'))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**emulator.env(), "PATH": "/usr/bin:/bin"},
    ).stdout
    assert json.loads(out) == []


def test_p1_a_run_with_batches_loads_the_sdk_up_front() -> None:
    """With ``batch`` set (the run has batch actions on the provider) the SDK is loaded
    when the adapter is built, so a paced submission is not delayed between its slot and
    its send by the SDK's import (B12 counts sends)."""
    code = (
        "import json, sys\n"
        "from agac.providers.base import ProviderSettings\n"
        "from agac.providers.registry import provider_class\n"
        "provider_class('openai')(ProviderSettings(name='openai', api_key='x', batch=True))\n"
        "print(json.dumps('openai' in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert json.loads(out) is True


async def test_p1_proxy_from_the_environment(
    emulator: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """HTTP_PROXY is honoured as the SDKs' clients honour it: the emulator stands in
    for the proxy of a host that does not resolve; NO_PROXY still bypasses it."""
    monkeypatch.setenv("HTTP_PROXY", emulator.url)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    settings = ProviderSettings(name="openai", base_url="http://api.openai.invalid/v1")
    adapter = provider_class("openai")(settings)
    try:
        answer = await adapter.complete(make_request("openai"))
    finally:
        await adapter.aclose()
    assert answer.parsed is not None
    (entry,) = emulator.requests()
    assert entry["path"] == "/v1/chat/completions"
    assert entry["headers"]["host"] == "api.openai.invalid"


def test_p1_no_proxy_bypasses(monkeypatch: pytest.MonkeyPatch) -> None:
    from agac.providers._http import env_proxy

    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("NO_PROXY", "internal.example")
    assert env_proxy("https://api.anthropic.com/v1/messages") == "http://proxy.example:3128"
    assert env_proxy("https://llm.internal.example/v1/chat/completions") is None


async def test_i29_9_a_model_name_reaches_the_provider_encoded(emulator: Any) -> None:
    """A Gemini model name holding ``:`` goes into the URL percent-encoded: the server
    sees one model segment (``tuned:v1``) before the method, not a second method."""
    import dataclasses

    adapter = provider_class("gemini")(ProviderSettings(name="gemini"))
    try:
        request = dataclasses.replace(make_request("gemini"), model="tuned:v1")
        answer = await adapter.complete(request)
    finally:
        await adapter.aclose()
    assert answer.parsed is not None
    (entry,) = [e for e in emulator.requests() if e["op"] == "chat"]
    assert entry["path"].endswith("/models/tuned:v1:generateContent"), entry

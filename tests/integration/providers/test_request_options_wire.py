"""An action's ``provider_options`` on the wire (docs/providers.md, Provider specs): each
option the spec declares goes in the request body under the provider's own name, on both
online transports, and a request without options sends none."""

from __future__ import annotations

from typing import Any

import pytest
from provider_support import MODELS, is_model_call

from agac.providers.base import Message, Request


def _request(provider: str, options: tuple[tuple[str, Any], ...] = ()) -> Request:
    return Request(
        provider=provider,
        model=MODELS[provider],
        messages=(Message("user", "Label: the blender works well."),),
        max_tokens=64,
        timeout=10.0,
        options=options,
    )


def _last_chat(emulator: Any) -> dict[str, Any]:
    chats = [
        r
        for r in emulator.requests()
        if r["op"] == "chat" and is_model_call(r["method"], r["path"])
    ]
    assert chats, emulator.requests()
    body: dict[str, Any] = chats[-1]["body"]
    return body


@pytest.mark.parametrize("provider", ["openai", "groq"])
async def test_reasoning_effort_goes_as_the_provider_names_it(
    provider: str, make_provider: Any, emulator: Any
) -> None:
    adapter = make_provider(provider)
    answer = await adapter.complete(_request(provider, (("reasoning_effort", "low"),)))
    assert answer.text
    assert _last_chat(emulator)["reasoning_effort"] == "low"
    await adapter.complete(_request(provider))
    assert "reasoning_effort" not in _last_chat(emulator)

"""Issue 29, item 9, on the wire: a model name goes into a URL percent-encoded on both
online transports and in batch creation (Gemini's ``models/{name}:generateContent`` and
``:batchGenerateContent``, Anthropic's model lookup), and in the JSON body as written
everywhere else; a name with a dot segment never leaves the adapter."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest
from provider_support import SDK_PROVIDERS, is_model_call, make_request, poll_until

from agac.errors import FatalError

#: Names validation allows that are special in a URL path (``:`` ends Gemini's model
#: segment and starts its method; ``@`` and ``+`` are legal but easy to misread).
SPECIAL = {
    "openai": "ft:gpt-4o-mini:acme::9xYz",
    "anthropic": "claude-sonnet-4-5@2025+1",
    "gemini": "tuned:v1",
    "groq": "meta-llama/llama-4:scout",
    "azure": "gpt-4o:batch@2",
    "ollama": "hf.co/org/model:Q4_K_M",
    "mistral": "ft:open-mistral-7b:587a6b29:20240514:7e773925",
    "together": "acme/Llama-3-8b-ft@v2:step-100",
}


def _calls(emulator: Any) -> list[dict[str, Any]]:
    return [
        e
        for e in emulator.requests()
        if e["op"] == "chat" and is_model_call(e["method"], e["path"])
    ]


@pytest.mark.parametrize("name", SDK_PROVIDERS)
async def test_i29_9_an_allowed_url_special_name_is_encoded_on_the_wire(
    name: str, make_provider: Any, emulator: Any
) -> None:
    adapter = make_provider(name)
    model = SPECIAL[name]
    answer = await adapter.complete(dataclasses.replace(make_request(name), model=model))
    assert answer.parsed is not None
    (entry,) = _calls(emulator)
    if name == "gemini":
        assert entry["raw_path"].endswith("/models/tuned%3Av1:generateContent"), entry
        assert entry["path"].endswith("/models/tuned:v1:generateContent"), entry
    elif name == "azure":
        # The deployment is a path segment (the SDK leaves ':' and '@' as they are, the
        # lean transport encodes them: the same path either way) and the body's model.
        assert entry["path"].endswith(f"/deployments/{model}/chat/completions"), entry
        assert entry["body"]["model"] == model
    else:
        assert model not in entry["raw_path"], entry
        assert entry["body"]["model"] == model


async def test_i29_9_a_gemini_batch_names_its_model_encoded(
    make_provider: Any, emulator: Any
) -> None:
    adapter = make_provider("gemini")
    requests = [
        dataclasses.replace(make_request("gemini", custom_id=f"r{i}"), model=SPECIAL["gemini"])
        for i in range(2)
    ]
    handle = await adapter.submit_batch(requests, "i29-9-key")
    created = [e for e in emulator.requests() if e["raw_path"].endswith(":batchGenerateContent")]
    assert [e["raw_path"].rsplit("/", 1)[-1] for e in created] == [
        "tuned%3Av1:batchGenerateContent"
    ], created
    emulator.advance(3600)
    status = await poll_until(adapter, handle, ("ended",))
    assert status.state == "ended"
    results = [r async for r in adapter.batch_results(handle)]
    assert sorted(r.custom_id for r in results) == ["r0", "r1"]


@pytest.mark.parametrize("model", ["../../_emulator/reset", "models/./x", "a//b", "x/.."])
async def test_i29_9_a_dot_segment_never_leaves_the_adapter(
    model: str, make_provider: Any, emulator: Any
) -> None:
    """Validation refuses these names; a request built another way (a plugin, the
    Python API) is refused by the adapter before anything is sent, since HTTP clients
    would resolve the dot segments into another path of the provider's host."""
    gemini = make_provider("gemini")
    with pytest.raises(FatalError, match="not a model name"):
        await gemini.complete(dataclasses.replace(make_request("gemini"), model=model))
    assert emulator.requests() == []
    # Anthropic takes the name in the body; its one lookup of the model's lifecycle,
    # which puts the name in a URL, is not sent.
    anthropic = make_provider("anthropic")
    await anthropic.complete(dataclasses.replace(make_request("anthropic"), model=model))
    await asyncio.sleep(0.2)
    assert [e["method"] for e in emulator.requests()] == ["POST"]

"""Structured output in each provider's native form, and the fallback for a model
that cannot take a schema: a 400 naming the schema parameter makes the adapter ask
again once in JSON mode (Anthropic: a forced tool call) and remember the model."""

from __future__ import annotations

from typing import Any

import pytest
from provider_support import SDK_PROVIDERS, make_request

from agac.errors import FatalError

#: A 400 message that names each provider's structured-output parameter.
REJECTIONS = {
    "openai": "Invalid parameter: 'response_format' of type 'json_schema' is not supported.",
    "groq": "response_format json_schema is not supported with this model",
    "azure": "Invalid parameter: 'response_format' of type 'json_schema' is not supported.",
    "anthropic": "output_config.format: structured output is not supported for this model",
    "gemini": "responseJsonSchema is not supported for this model",
    "ollama": "this model does not support format schemas",
    "mistral": "Invalid response_format: json_schema is not supported for this model",
    "together": "response_format json_schema is not supported for this model",
}


@pytest.mark.parametrize("name", SDK_PROVIDERS)
async def test_model_that_rejects_the_schema_falls_back_and_is_remembered(
    name: str, emulator: Any, make_provider: Any
) -> None:
    emulator.add_fault(
        {
            "provider": name,
            "op": "chat",
            "times": 1,
            "fault": {"http": 400, "message": REJECTIONS[name]},
        }
    )
    provider = make_provider(name)
    first = await provider.complete(make_request(name))
    assert first.stop_reason == "end"
    second = await provider.complete(make_request(name))
    assert second.stop_reason == "end"
    # 1 rejected + 1 fallback + 1 straight to the fallback form.
    assert emulator.stats()["requests"][name]["chat"] == 3


@pytest.mark.parametrize("name", SDK_PROVIDERS)
async def test_other_400s_do_not_fall_back(name: str, emulator: Any, make_provider: Any) -> None:
    emulator.add_fault(
        {
            "provider": name,
            "op": "chat",
            "times": 1,
            "fault": {"http": 400, "message": "messages: too many messages"},
        }
    )
    with pytest.raises(FatalError):
        await make_provider(name).complete(make_request(name))
    assert emulator.stats()["requests"][name]["chat"] == 1


@pytest.mark.parametrize("name", ("openai", "groq", "gemini", "ollama"))
async def test_json_mode_option_answers_without_native_schema(
    name: str, make_provider: Any
) -> None:
    response = await make_provider(name, structured_output="json_mode").complete(make_request(name))
    assert response.stop_reason == "end"


async def test_anthropic_forced_tool_option(make_provider: Any) -> None:
    response = await make_provider("anthropic", structured_output="tool").complete(
        make_request("anthropic")
    )
    assert response.stop_reason in ("end", "tool_use")


async def test_gemini_auto_batch_goes_to_a_file_above_the_inline_limit(
    emulator: Any, make_provider: Any
) -> None:
    provider = make_provider("gemini", inline_max_bytes=200)
    requests = [make_request("gemini", f"review {i}", custom_id=f"r{i}") for i in range(3)]
    handle = await provider.submit_batch(requests, "key-auto")
    assert handle.meta["input"] == "file"
    assert emulator.stats()["requests"]["gemini"].get("file.upload", 0) >= 1
    small = await make_provider("gemini").submit_batch(requests[:1], "key-small")
    assert small.meta["input"] == "inline"

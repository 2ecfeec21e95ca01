"""DeepSeek (live only): both transports against the emulator's DeepSeek routes, its
usage fields, its reasoner's thinking kept out of the answer, its stop reasons, and its
spec (no batch API, no flex tier)."""

from __future__ import annotations

from typing import Any

import pytest
from provider_support import SCHEMA

from agac.providers.base import Message, Request
from agac.providers.registry import batch_providers, provider_spec


def _request(model: str = "deepseek-chat", *, schema: Any = SCHEMA) -> Request:
    return Request(
        provider="deepseek",
        model=model,
        messages=(Message("system", "You label reviews."), Message("user", "It works.")),
        max_tokens=200,
        schema=schema,
        timeout=10.0,
    )


def _chats(emulator: Any) -> list[dict[str, Any]]:
    return [e for e in emulator.requests() if e["op"] == "chat"]


async def test_deepseek_live_on_both_transports(make_provider: Any, emulator: Any) -> None:
    """A structured call goes to ``<base>/chat/completions`` with ``max_tokens`` and JSON
    mode (DeepSeek refuses ``json_schema``), the schema in the system prompt, the key as a
    bearer token; the answer parses and its usage is read."""
    provider = make_provider("deepseek")
    response = await provider.complete(_request())
    assert response.stop_reason == "end"
    assert isinstance(response.parsed, dict)  # JSON mode: the emulator answers an object
    assert response.usage.input_tokens > 0 and response.usage.output_tokens > 0
    [chat] = _chats(emulator)
    assert chat["path"] == "/chat/completions"
    assert chat["headers"]["authorization"] == "Bearer emulator-key"
    body = chat["body"]
    assert body["response_format"] == {"type": "json_object"}
    assert body["max_tokens"] == 200 and "max_completion_tokens" not in body
    assert "sentiment" in body["messages"][0]["content"]


async def test_deepseek_cache_hit_tokens_are_cached_input(
    make_provider: Any, emulator: Any
) -> None:
    """``prompt_cache_hit_tokens`` is the cached part of ``prompt_tokens``: counted as
    cached, not as uncached input."""
    emulator.add_fault(
        {
            "provider": "deepseek",
            "op": "chat",
            "fault": {"reply": {"usage": {"cache_read_tokens": 640}}},
            "times": 1,
        }
    )
    provider = make_provider("deepseek")
    response = await provider.complete(_request(schema=None))
    assert response.usage.cached_tokens == 640
    plain = await provider.complete(_request(schema=None))
    assert plain.usage.cached_tokens == 0
    # The same prompt, once with 640 tokens read from the cache: the uncached part shrank.
    assert response.usage.input_tokens + 640 >= plain.usage.input_tokens


async def test_deepseek_reasoner_thinking_stays_out_of_the_answer(
    make_provider: Any, emulator: Any
) -> None:
    """``deepseek-reasoner`` sends ``reasoning_content`` beside the content: the answer is
    the content alone and parses; the reasoning tokens it reports are reasoning."""
    emulator.add_fault(
        {
            "provider": "deepseek",
            "op": "chat",
            "fault": {"reply": {"usage": {"reasoning_tokens": 7}}},
        }
    )
    provider = make_provider("deepseek")
    response = await provider.complete(_request("deepseek-reasoner"))
    assert "think it through" not in response.text
    assert isinstance(response.parsed, dict)  # JSON mode: the emulator answers an object
    assert response.usage.reasoning_tokens == 7
    [chat] = _chats(emulator)
    assert chat["body"]["model"] == "deepseek-reasoner"


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("stop", "end"),
        ("length", "max_tokens"),
        ("content_filter", "content_filter"),
        ("insufficient_system_resource", "unexpected"),
        ("a_new_reason", "unexpected"),
    ],
)
async def test_deepseek_stop_reasons(
    make_provider: Any, emulator: Any, raw: str, reason: str
) -> None:
    """Each documented finish reason has its rule; ``insufficient_system_resource`` (the
    service ran out of capacity mid-answer) and an unknown value are never an answer."""
    emulator.add_fault({"provider": "deepseek", "op": "chat", "fault": {"reply": {"stop": raw}}})
    response = await make_provider("deepseek").complete(_request())
    assert response.stop_reason == reason
    assert response.raw_stop == raw
    assert (response.parsed is not None) == (reason == "end")
    if reason == "unexpected":
        assert raw in (response.stop_detail or "")


def test_deepseek_spec_is_live_only() -> None:
    """No batch API, no flex tier, both transports on the openai SDK, its own key."""
    spec = provider_spec("deepseek")
    assert spec.batch is None and spec.flex is None and spec.batch_support == "none"
    assert spec.transports == ("lean", "sdk")
    assert spec.sdk_module == "openai" and spec.credential_env == ("DEEPSEEK_API_KEY",)
    assert spec.attachments is None
    assert "deepseek" not in batch_providers()

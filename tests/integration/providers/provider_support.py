"""Helpers of the provider contract suite (imported by its test modules; this folder
is on sys.path because tests/ has no packages)."""

from __future__ import annotations

import asyncio
from typing import Any

from agac.providers.base import BatchHandle, BatchStatus, Message, Request

#: Providers whose adapters talk to the emulator, and a model name for each.
MODELS: dict[str, str] = {
    "openai": "gpt-4o-mini",
    "anthropic": "claude-sonnet-4-5",
    "gemini": "gemini-2.5-flash",
    "groq": "llama-3.3-70b-versatile",
    "azure": "gpt-4o-mini-batch",
    "ollama": "llama3.2",
    "deepseek": "deepseek-chat",
    "mistral": "mistral-small-latest",
    "together": "meta-llama/Llama-3.3-70B-Instruct-Turbo",
    "openrouter": "openai/gpt-4o-mini",
    "vllm": "Qwen/Qwen2.5-7B-Instruct",
    "xai": "grok-3-mini",
    "fireworks": "accounts/fireworks/models/llama-v3p1-8b-instruct",
    "mock": "any",
}
SDK_PROVIDERS = ("openai", "azure", "anthropic", "gemini", "groq", "mistral", "together", "ollama")
BATCH_PROVIDERS = ("openai", "azure", "anthropic", "gemini", "groq", "mistral", "together")

#: A schema in the strict-compatible form (every property required, no extras).
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "sentiment": {"type": "string", "enum": ["pos", "neg", "neutral"]},
        "score": {"type": "integer", "minimum": 0, "maximum": 10},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["sentiment", "score", "tags"],
    "additionalProperties": False,
}

#: Emulator time a batch takes from creation to its end.
BATCH_SECONDS = 60.0


def is_model_call(method: str, path: str) -> bool:
    """Whether a request a server received is a model call, not the Anthropic adapter's one
    lookup of a model's lifecycle (``GET /v1/models/{id}``, once per model after its first
    answer, on the transport in use)."""
    return not (method == "GET" and "/models/" in path)


def make_request(
    provider: str,
    text: str = "The blender works well.",
    *,
    schema: dict[str, Any] | None = SCHEMA,
    custom_id: str | None = None,
    max_tokens: int = 256,
    system: str | None = "You label product reviews.",
    timeout: float | None = 10.0,
) -> Request:
    messages = ((Message("system", system),) if system else ()) + (Message("user", text),)
    return Request(
        provider=provider,
        model=MODELS[provider],
        messages=messages,
        max_tokens=max_tokens,
        schema=schema,
        custom_id=custom_id,
        timeout=timeout,
    )


async def poll_until(
    provider: Any,
    handle: BatchHandle,
    states: tuple[str, ...],
    *,
    tries: int = 50,
) -> BatchStatus:
    """Poll until the batch's normalized state is one of ``states``."""
    status = await provider.poll_batch(handle)
    for _ in range(tries):
        if status.state in states:
            return status
        await asyncio.sleep(0.02)
        status = await provider.poll_batch(handle)
    raise AssertionError(f"batch {handle.id} stayed {status.raw_status!r}, wanted {states}")

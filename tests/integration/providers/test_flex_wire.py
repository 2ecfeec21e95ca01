"""The flex tier on the wire (docs/providers.md, Tiers): a request that asks for the flex
tier sends ``service_tier: "flex"`` (Gemini: the body's ``serviceTier``) on both
transports and reads the tier back from the answer; a flex capacity refusal (Groq's HTTP
498 ``capacity_exceeded``, OpenAI's and Azure's 429 ``resource_unavailable``, Gemini's 503
``UNAVAILABLE`` on a flex request) is a wait, which spends no attempt; the specs say who
sells flex, at which rate, and for which models."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from provider_support import is_model_call, make_request

from agac.errors import FatalError, RetryableError, WaitError
from agac.providers.registry import provider_spec

FLEX = ("openai", "azure", "groq", "gemini")
MODELS = {
    "openai": "o4-mini",
    "azure": "gpt-4o-mini-batch",
    "groq": "llama-3.3-70b-versatile",
    "gemini": "gemini-2.5-flash",
}
#: The body field that asks for a tier (Gemini's REST body is camelCase).
FIELD = {"gemini": "serviceTier"}


def _flex(provider: str) -> Any:
    return dataclasses.replace(make_request(provider), model=MODELS[provider], tier="flex")


def _last_chat(emulator: Any) -> dict[str, Any]:
    chats = [
        e
        for e in emulator.requests()
        if e["op"] == "chat" and is_model_call(e["method"], e["path"])
    ]
    body: dict[str, Any] = chats[-1]["body"]
    return body


@pytest.mark.parametrize("provider", FLEX)
async def test_flex_sends_service_tier_flex_and_reads_the_tier_back(
    provider: str, make_provider: Any, emulator: Any
) -> None:
    adapter = make_provider(provider)
    field = FIELD.get(provider, "service_tier")
    answer = await adapter.complete(_flex(provider))
    assert _last_chat(emulator)[field] == "flex"
    assert answer.service_tier == "flex" and answer.parsed is not None
    standard = await adapter.complete(dataclasses.replace(_flex(provider), tier=None))
    assert field not in _last_chat(emulator) and standard.service_tier != "flex"


@pytest.mark.parametrize(
    ("provider", "fault"),
    [
        ("groq", {"http": 498, "code": "capacity_exceeded"}),
        ("openai", {"http": 429, "code": "resource_unavailable"}),
        ("azure", {"http": 429, "code": "resource_unavailable", "retry_after": 3}),
        ("gemini", {"http": 503}),
    ],
)
async def test_flex_capacity_refusal_is_a_wait_spending_no_attempt(
    provider: str, fault: dict[str, Any], make_provider: Any, emulator: Any
) -> None:
    emulator.add_fault({"provider": provider, "op": "chat", "times": 1, "fault": fault})
    adapter = make_provider(provider)
    with pytest.raises(WaitError) as caught:
        await adapter.complete(_flex(provider))
    assert caught.value.kind == "wait"
    assert caught.value.retry_after == (3 if "retry_after" in fault else 30.0)
    assert (await adapter.complete(_flex(provider))).service_tier == "flex"


async def test_gemini_flex_503_on_a_standard_request_stays_retryable(
    make_provider: Any, emulator: Any
) -> None:
    emulator.add_fault({"provider": "gemini", "op": "chat", "times": 1, "fault": {"http": 503}})
    adapter = make_provider("gemini")
    with pytest.raises(RetryableError):
        await adapter.complete(dataclasses.replace(_flex("gemini"), tier=None))


async def test_gemini_flex_for_a_model_gemini_does_not_serve_on_flex_is_refused(
    make_provider: Any, emulator: Any
) -> None:
    adapter = make_provider("gemini")
    request = dataclasses.replace(_flex("gemini"), model="gemini-2.0-flash")
    with pytest.raises(FatalError):
        await adapter.complete(request)


def test_flex_specs_say_who_sells_it_and_at_which_rate() -> None:
    openai, azure, groq, gemini = (provider_spec(n) for n in FLEX)
    assert openai.flex is not None and openai.flex.billed == "batch"
    assert azure.flex is not None and azure.flex.billed == "batch"
    assert groq.flex is not None and groq.flex.billed == "online"
    assert gemini.flex is not None and gemini.flex.billed == "batch"
    assert openai.flex_serves("o4-mini") and openai.flex_serves("gpt-5-mini")
    assert not openai.flex_serves("gpt-4o-mini")
    assert gemini.flex_serves("gemini-2.5-flash") and gemini.flex_serves("gemini-3-pro")
    assert not gemini.flex_serves("gemini-2.0-flash")
    assert provider_spec("anthropic").flex is None and provider_spec("mock").flex is None

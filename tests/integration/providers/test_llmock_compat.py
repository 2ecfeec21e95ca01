"""Third-party compatibility: the adapters against LLMock, an independent multi-provider
mock server (the ``llmock`` dev dependency, its own pytest fixture), for OpenAI,
Anthropic and Groq chat, on both online transports.

Our emulator and our lean transport were written by the same hands; LLMock was not. It
shows that the lean transport reads another implementation of each wire protocol —
answers, error envelopes, ``Retry-After`` / ``retry-after-ms`` — as the SDKs do: every
case expects the same result on both transports, and both send the same body.
"""

from __future__ import annotations

import asyncio
from typing import Any

import jsonschema
import pytest
from provider_support import MODELS, SCHEMA, is_model_call, make_request

from agac.errors import FatalError, ProviderError, RetryableError, WaitError
from agac.providers.base import TRANSPORTS, ProviderSettings, Transport
from agac.providers.registry import provider_class

PROVIDERS = ("openai", "anthropic", "groq")
#: Where each adapter's base URL points on LLMock (the groq SDK adds ``/openai/v1``).
BASE = {"openai": "openai", "anthropic": "anthropic", "groq": "groq"}


def _base_url(llmock: Any, name: str) -> str:
    if name == "groq":
        return llmock.url + "/groq"
    return str(llmock.base_url(BASE[name]))


def _calls(llmock: Any) -> list[Any]:
    """The model calls LLMock received."""
    return [r for r in llmock.requests if is_model_call(r.method, r.path)]


@pytest.fixture(params=TRANSPORTS)
def transport(request: pytest.FixtureRequest) -> Transport:
    value: Transport = request.param
    return value


@pytest.fixture
async def adapters(llmock: Any, transport: Transport) -> Any:
    """Build adapters pointed at LLMock (closed after the test)."""
    built: list[Any] = []

    def make(name: str) -> Any:
        settings = ProviderSettings(
            name=name, base_url=_base_url(llmock, name), api_key="llmock-key", transport=transport
        )
        adapter = provider_class(name)(settings)
        built.append(adapter)
        return adapter

    yield make
    for adapter in built:
        await adapter.aclose()


@pytest.mark.parametrize("name", PROVIDERS)
async def test_text_answer(name: str, adapters: Any, llmock: Any) -> None:
    response = await adapters(name).complete(make_request(name, schema=None))
    assert response.text
    assert response.stop_reason == "end"
    assert response.model == MODELS[name]
    assert response.usage.input_tokens > 0 and response.usage.output_tokens > 0
    (record,) = _calls(llmock)
    assert record.status == 200 and record.model == MODELS[name]


@pytest.mark.parametrize("name", ("openai", "groq"))
async def test_schema_answer_parses_and_validates(name: str, adapters: Any) -> None:
    response = await adapters(name).complete(make_request(name))
    jsonschema.validate(response.parsed, SCHEMA)


async def test_anthropic_schema_request_is_answered(adapters: Any, llmock: Any) -> None:
    """LLMock reads only the older ``output_format``; ``output_config`` still goes
    through as a valid Messages request and is answered."""
    response = await adapters("anthropic").complete(make_request("anthropic"))
    assert response.text and response.stop_reason == "end"
    (record,) = _calls(llmock)
    assert record.body["output_config"]["format"]["schema"] == SCHEMA


@pytest.mark.parametrize("name", PROVIDERS)
async def test_many_calls_in_flight(name: str, adapters: Any, llmock: Any) -> None:
    adapter = adapters(name)
    requests = [make_request(name, f"review {i}", schema=None) for i in range(24)]
    answers = await asyncio.gather(*(adapter.complete(r) for r in requests))
    assert all(a.text for a in answers)
    assert len(_calls(llmock)) == 24


#: (case, how LLMock is told to fail, expected class, expected retry_after or None).
FAULTS: list[Any] = [
    pytest.param({"status": 429, "retry_after": 2}, WaitError, 2.0, id="429-retry-after"),
    pytest.param({"status": 429, "retry_after": 0.25}, WaitError, 0.25, id="429-retry-after-ms"),
    pytest.param({"status": 500}, RetryableError, None, id="500"),
    pytest.param({"status": 503}, RetryableError, 1.0, id="503"),
    pytest.param({"status": 400}, FatalError, None, id="400"),
    pytest.param({"status": 401}, FatalError, None, id="401"),
    pytest.param({"status": 404}, FatalError, None, id="404"),
    pytest.param({"status": 429, "code": "insufficient_quota"}, FatalError, None, id="quota"),
]


@pytest.mark.parametrize("name", PROVIDERS)
@pytest.mark.parametrize(("fault", "expected", "retry_after"), FAULTS)
async def test_error_maps_to_the_taxonomy(
    name: str,
    fault: dict[str, Any],
    expected: type[ProviderError],
    retry_after: Any,
    adapters: Any,
    llmock: Any,
) -> None:
    if fault.get("code") == "insufficient_quota" and name == "anthropic":
        fault = {**fault, "code": "billing_error"}  # Anthropic's word for it
    llmock.fail(fault["status"], retry_after=fault.get("retry_after"), code=fault.get("code"))
    adapter = adapters(name)
    with pytest.raises(ProviderError) as caught:
        await adapter.complete(make_request(name, schema=None))
    error = caught.value
    assert type(error) is expected, f"{type(error).__name__}: {error}"
    assert error.status == fault["status"]
    assert error.__cause__ is not None
    if retry_after is not None:
        assert error.retry_after == pytest.approx(retry_after, abs=0.01)
    assert (await adapter.complete(make_request(name, schema=None))).text


async def test_anthropic_529_overloaded(adapters: Any, llmock: Any) -> None:
    llmock.fail(529)
    with pytest.raises(WaitError) as caught:  # LLMock sends Retry-After with every 529
        await adapters("anthropic").complete(make_request("anthropic", schema=None))
    assert caught.value.status == 529


@pytest.mark.parametrize("name", PROVIDERS)
async def test_timeout_is_retryable(name: str, adapters: Any, llmock: Any) -> None:
    llmock.delay(2.0)
    with pytest.raises(RetryableError):
        await adapters(name).complete(make_request(name, schema=None, timeout=0.3))


@pytest.mark.parametrize("name", PROVIDERS)
async def test_both_transports_send_the_same_body(name: str, llmock: Any) -> None:
    request = make_request(name, max_tokens=55)
    bodies = []
    for transport in TRANSPORTS:
        settings = ProviderSettings(
            name=name, base_url=_base_url(llmock, name), api_key="llmock-key", transport=transport
        )
        adapter = provider_class(name)(settings)
        try:
            await adapter.complete(request)
        finally:
            await adapter.aclose()
        bodies.append((_calls(llmock)[-1].path, _calls(llmock)[-1].body))
    assert bodies[0] == bodies[1]

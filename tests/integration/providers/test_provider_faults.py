"""Every injected fault maps to the right class of the error taxonomy (docs/providers.md):
wait / retryable / fatal, read by each adapter from its own SDK's exceptions, headers
(Retry-After, retry-after-ms) and bodies (OpenAI ``insufficient_quota``, Anthropic's
spend cap and 529, Gemini ``RetryInfo`` versus ``QuotaFailure``).
"""

from __future__ import annotations

from typing import Any

import pytest
from provider_support import BATCH_PROVIDERS, SDK_PROVIDERS, make_request

from agac.errors import FatalError, ProviderError, RetryableError, TransportError, WaitError

Case = tuple[str, dict[str, Any], type[ProviderError]]

#: (case id, FAULT, expected class) valid for every provider unless overridden below.
COMMON: list[Case] = [
    ("429-retry-after", {"http": 429, "retry_after": 7}, WaitError),
    ("429-no-hint", {"http": 429}, RetryableError),
    ("500", {"http": 500}, RetryableError),
    ("503", {"http": 503}, RetryableError),
    ("409", {"http": 409}, RetryableError),
    ("drop-connection", {"drop_connection": True}, TransportError),
    ("400", {"http": 400}, FatalError),
    ("401", {"http": 401}, FatalError),
    ("403", {"http": 403}, FatalError),
    ("404", {"http": 404}, FatalError),
]

#: Per provider: cases added or replaced (same id) on top of COMMON.
SPECIFIC: dict[str, list[Case]] = {
    "openai": [("quota", {"http": 429, "code": "insufficient_quota"}, FatalError)],
    "groq": [("quota", {"http": 429, "code": "insufficient_quota"}, FatalError)],
    "anthropic": [
        ("529-no-hint", {"http": 529}, RetryableError),
        ("529-retry-after", {"http": 529, "retry_after": 3}, WaitError),
        # The spend cap: a 429 with no Retry-After, marked in error.details.error_code.
        ("spend-cap", {"http": 429, "code": "enforced_spend_limit_reached"}, FatalError),
    ],
    "gemini": [
        # Every Gemini 429 carries a QuotaFailure: with RetryInfo it is a wait, without
        # one a daily quota (fatal).
        ("429-no-hint", {"http": 429}, FatalError),
        ("quota", {"http": 429, "code": "RESOURCE_EXHAUSTED"}, FatalError),
    ],
    # Ollama sends no retry hints, and its SDK drops the headers anyway.
    "ollama": [("429-retry-after", {"http": 429, "retry_after": 7}, RetryableError)],
}


#: Cases the emulator cannot stage yet, with the reason.
EMULATOR_GAPS: dict[str, str] = {}


def _cases() -> list[Any]:
    params = []
    for provider in SDK_PROVIDERS:
        cases = {case_id: (fault, cls) for case_id, fault, cls in COMMON}
        for case_id, fault, cls in SPECIFIC.get(provider, []):
            cases[case_id] = (fault, cls)
        for case_id, (fault, cls) in cases.items():
            case = f"{provider}-{case_id}"
            gap = EMULATOR_GAPS.get(case)
            marks = [pytest.mark.xfail(reason=gap, strict=False)] if gap else []
            params.append(pytest.param(provider, fault, cls, id=case, marks=marks))
    return params


@pytest.mark.parametrize(("name", "fault", "expected"), _cases())
async def test_live_fault_maps_to_taxonomy(
    name: str,
    fault: dict[str, Any],
    expected: type[ProviderError],
    emulator: Any,
    make_provider: Any,
) -> None:
    emulator.add_fault({"provider": name, "op": "chat", "times": 1, "fault": fault})
    provider = make_provider(name)
    with pytest.raises(ProviderError) as caught:
        await provider.complete(make_request(name))
    error = caught.value
    assert type(error) is expected, f"{type(error).__name__}: {error}"
    assert error.__cause__ is not None  # raised from the SDK's exception
    if expected is WaitError:
        assert error.retry_after == pytest.approx(fault["retry_after"], abs=0.5)
    if expected is FatalError:
        assert error.reason == "provider_error"
    if "http" in fault:
        assert error.status == fault["http"]
    # The rule fired once: the next call goes through (the SDK did not retry).
    assert (await provider.complete(make_request(name))).parsed is not None
    assert emulator.stats()["requests"][name]["chat"] == 2


@pytest.mark.parametrize("name", SDK_PROVIDERS)
async def test_timeout_is_retryable(name: str, emulator: Any, make_provider: Any) -> None:
    emulator.add_fault({"provider": name, "op": "chat", "times": 1, "fault": {"delay_ms": 2000}})
    with pytest.raises(RetryableError):
        await make_provider(name).complete(make_request(name, timeout=0.3))


@pytest.mark.parametrize("name", ("openai", "anthropic", "groq"))
async def test_fractional_retry_hint_is_kept(name: str, emulator: Any, make_provider: Any) -> None:
    emulator.add_fault(
        {"provider": name, "op": "chat", "times": 1, "fault": {"http": 429, "retry_after": 1.5}}
    )
    with pytest.raises(WaitError) as caught:
        await make_provider(name).complete(make_request(name))
    assert caught.value.retry_after == pytest.approx(1.5, abs=0.01)


BATCH_OP_CASES: list[Any] = [
    pytest.param("batch.create", {"http": 429, "retry_after": 5}, WaitError, id="create-429"),
    pytest.param("batch.create", {"http": 400}, FatalError, id="create-400"),
    pytest.param("batch.create", {"drop_connection": True}, TransportError, id="create-drop"),
    pytest.param("batch.get", {"http": 500}, RetryableError, id="get-500"),
    pytest.param("batch.get", {"drop_connection": True}, TransportError, id="get-drop"),
]


@pytest.mark.parametrize("name", BATCH_PROVIDERS)
@pytest.mark.parametrize(("op", "fault", "expected"), BATCH_OP_CASES)
async def test_batch_call_fault_maps_to_taxonomy(
    name: str,
    op: str,
    fault: dict[str, Any],
    expected: type[ProviderError],
    emulator: Any,
    make_provider: Any,
) -> None:
    provider = make_provider(name)
    requests = [make_request(name, custom_id=f"r{i}") for i in range(2)]
    handle = None
    if op != "batch.create":
        handle = await provider.submit_batch(requests, f"key-{name}-{op}")
    # aiohttp (google-genai's transport) re-sends an idempotent request once when a reused
    # keep-alive connection closes (RFC 9112 §9.3.1): a GET needs two drops to fail.
    times = 2 if name == "gemini" and op == "batch.get" and "drop_connection" in fault else 1
    emulator.add_fault({"provider": name, "op": op, "times": times, "fault": fault})
    with pytest.raises(ProviderError) as caught:
        if handle is None:
            await provider.submit_batch(requests, f"key-{name}-{op}")
        else:
            await provider.poll_batch(handle)
    assert type(caught.value) is expected, f"{type(caught.value).__name__}: {caught.value}"

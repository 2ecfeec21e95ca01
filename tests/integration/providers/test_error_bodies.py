"""Issue 28 item 5: error bodies as the providers send them, read on both transports.

Each row is an error body written from the provider's API reference (the emulator sends
it as given: its ``http`` fault's ``body``) with what a person must read: the provider's
message with its type (and code, and the parameter it names), never a bare ``[429]``,
and the request id (from the ``request-id`` / ``x-request-id`` header or the body's
``request_id``) on the error and at the end of its message. Also in batch result lines.
"""

from __future__ import annotations

from typing import Any

import pytest
from provider_support import BATCH_SECONDS, make_request, poll_until

from agac.errors import FatalError, ProviderError, RetryableError, WaitError

ROWS: list[
    tuple[str, str, int, Any, dict[str, str], type[ProviderError], list[str], str | None]
] = [
    (
        "openai-rate-limit",
        "openai",
        429,
        {
            "error": {
                "message": "Rate limit reached for gpt-4o-mini in organization org-x on "
                "requests per min (RPM): Limit 3, Used 3, Requested 1.",
                "type": "requests",
                "param": None,
                "code": "rate_limit_exceeded",
            }
        },
        {"x-request-id": "req_9f1c", "retry-after": "1"},
        WaitError,
        ["HTTP 429 requests [rate_limit_exceeded]: Rate limit reached for gpt-4o-mini"],
        "req_9f1c",
    ),
    (
        "openai-int-code-and-param",
        "openai",
        400,
        {
            "error": {
                "message": "Invalid value for 'max_completion_tokens'.",
                "type": "invalid_request_error",
                "param": "max_completion_tokens",
                "code": 400,
            }
        },
        {"x-request-id": "req_77"},
        FatalError,
        [
            (
                "HTTP 400 invalid_request_error: Invalid value for 'max_completion_tokens'. "
                "(param: max_completion_tokens)"
            )
        ],
        "req_77",
    ),
    (
        "openai-null-code",
        "openai",
        500,
        {
            "error": {
                "message": "The server had an error while processing your request.",
                "type": "server_error",
                "param": None,
                "code": None,
            }
        },
        {},
        RetryableError,
        ["HTTP 500 server_error: The server had an error"],
        None,
    ),
    (
        "openai-quota",
        "openai",
        429,
        {
            "error": {
                "message": "You exceeded your current quota, please check your plan and "
                "billing details.",
                "type": "insufficient_quota",
                "param": None,
                "code": "insufficient_quota",
            }
        },
        {"x-request-id": "req_q"},
        FatalError,
        ["HTTP 429 insufficient_quota: You exceeded your current quota", "quota or spend cap"],
        "req_q",
    ),
    (
        "groq-rate-limit",
        "groq",
        429,
        {
            "error": {
                "message": "Rate limit reached for model `llama-3.3-70b-versatile`.",
                "type": "tokens",
                "code": "rate_limit_exceeded",
            }
        },
        {"x-request-id": "req_01jq"},
        RetryableError,
        ["HTTP 429 tokens [rate_limit_exceeded]: Rate limit reached for model"],
        "req_01jq",
    ),
    (
        "anthropic-overloaded",
        "anthropic",
        529,
        {
            "type": "error",
            "error": {"type": "overloaded_error", "message": "Overloaded"},
            "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy",
        },
        {},
        RetryableError,
        ["HTTP 529 overloaded_error: Overloaded"],
        "req_011CSHoEeqs5C35K2UUqR7Fy",
    ),
    (
        "anthropic-invalid",
        "anthropic",
        400,
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "messages.0.content: Field required",
            },
            "request_id": "req_011",
        },
        {"request-id": "req_011"},
        FatalError,
        ["HTTP 400 invalid_request_error: messages.0.content: Field required"],
        "req_011",
    ),
    (
        "gemini-bad-key",
        "gemini",
        400,
        {
            "error": {
                "code": 400,
                "message": "API key not valid. Please pass a valid API key.",
                "status": "INVALID_ARGUMENT",
                "details": [
                    {
                        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                        "reason": "API_KEY_INVALID",
                        "domain": "googleapis.com",
                        "metadata": {"service": "generativelanguage.googleapis.com"},
                    }
                ],
            }
        },
        {},
        FatalError,
        ["HTTP 400 INVALID_ARGUMENT [API_KEY_INVALID]: API key not valid."],
        None,
    ),
    (
        "gemini-overloaded",
        "gemini",
        503,
        {
            "error": {
                "code": 503,
                "message": "The model is overloaded. Please try again later.",
                "status": "UNAVAILABLE",
            }
        },
        {},
        RetryableError,
        ["HTTP 503 UNAVAILABLE: The model is overloaded."],
        None,
    ),
    (
        "ollama-not-found",
        "ollama",
        404,
        {"error": 'model "llama3.2" not found, try pulling it first'},
        {},
        FatalError,
        ['HTTP 404: model "llama3.2" not found, try pulling it first'],
        None,
    ),
]


@pytest.mark.parametrize(
    ("provider", "status", "body", "headers", "kind", "said", "request_id"),
    [row[1:] for row in ROWS],
    ids=[row[0] for row in ROWS],
)
async def test_i28_5_an_error_body_reads_as_the_provider_wrote_it(
    provider: str,
    status: int,
    body: Any,
    headers: dict[str, str],
    kind: type,
    said: list[str],
    request_id: str | None,
    emulator: Any,
    make_provider: Any,
) -> None:
    emulator.add_fault(
        {
            "provider": provider,
            "op": "chat",
            "fault": {"http": status, "body": body, "headers": headers},
        }
    )
    adapter = make_provider(provider)

    with pytest.raises(ProviderError) as caught:
        await adapter.complete(make_request(provider))

    err = caught.value
    assert type(err) is kind and err.status == status
    text = str(err)
    for part in said:
        assert part in text, text
    assert f"[{status}]" not in text
    assert err.request_id == request_id
    if request_id:
        assert text.endswith(f"(request id {request_id})"), text


BATCH_ERRORS = {
    "openai": {
        "error": {
            "message": "Invalid 'messages[0].content': empty.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": None,
        }
    },
    "anthropic": {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": "max_tokens: must be at least 1"},
        "request_id": "req_batch_1",
    },
}


@pytest.mark.parametrize("provider", tuple(BATCH_ERRORS))
async def test_i28_5_an_errored_batch_item_reads_its_error_body(
    provider: str, emulator: Any, make_provider: Any
) -> None:
    emulator.add_fault(
        {
            "provider": provider,
            "op": "batch.create",
            "match": {"custom_id": "r0"},
            "fault": {"http": 400, "body": BATCH_ERRORS[provider]},
        }
    )
    adapter = make_provider(provider)
    handle = await adapter.submit_batch(
        [make_request(provider, custom_id="r0"), make_request(provider, "Other.", custom_id="r1")],
        "k",
    )
    emulator.advance(BATCH_SECONDS + 1)
    await poll_until(adapter, handle, ("ended",))

    results = {r.custom_id: r async for r in adapter.batch_results(handle)}

    assert results["r1"].type == "succeeded"
    errored = results["r0"]
    assert errored.type == "errored" and isinstance(errored.error, FatalError)
    text = str(errored.error)
    assert "HTTP 400 invalid_request_error" in text
    if provider == "openai":
        assert "(param: messages)" in text and errored.error.request_id.startswith("req_")
    else:
        assert text.endswith("(request id req_batch_1)")

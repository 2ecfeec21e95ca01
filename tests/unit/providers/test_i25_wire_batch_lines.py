"""Issue 25: a batch result line's body is read with plain dict lookups
(``chat_response(..., wire=True)``) and gives the very Response the general reader gives."""

from __future__ import annotations

import pytest

from agac.providers._openai_compat import chat_response

BODIES = [
    {
        "model": "gpt-4o-mini",
        "choices": [{"message": {"content": '{"a": 1}'}, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": 20,
            "completion_tokens": 5,
            "prompt_tokens_details": {"cached_tokens": 4, "cache_write_tokens": 2},
        },
    },
    {
        "model": "m",
        "choices": [{"message": {"content": "not json"}, "finish_reason": "length"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 7},
        "service_tier": "default",
    },
    {
        "model": "m",
        "choices": [{"message": {"content": None, "refusal": "no"}, "finish_reason": "stop"}],
    },
    {"choices": []},
    {},
    {"choices": [{"message": "odd"}]},
    {"choices": [{"message": {"content": "1"}}], "usage": "odd"},
    {
        "choices": [{"message": {"content": "{}"}, "finish_reason": "content_filter"}],
        "usage": {
            "prompt_tokens": 9,
            "completion_tokens": 2,
            "completion_tokens_details": {"reasoning_tokens": 1},
        },
    },
    {"choices": [{"finish_reason": "tool_calls"}]},
    {"choices": ["odd"]},
    None,
]


@pytest.mark.parametrize("body", BODIES)
@pytest.mark.parametrize("tier", ["batch", None])
def test_i25_2_wire_batch_line_reads_as_the_general_reader(body: object, tier: str | None) -> None:
    for provider in ("openai", "groq"):
        assert chat_response(
            body,
            provider=provider,
            latency_ms=12.5,
            service_tier=tier,
            request_id="req_1",
            wire=True,
        ) == chat_response(
            body, provider=provider, latency_ms=12.5, service_tier=tier, request_id="req_1"
        )

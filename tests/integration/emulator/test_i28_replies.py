"""Issue 28 item 7: the emulator sends real provider traffic on request (its ``reply``
fault and error bodies as given), live and in batch results, seen through the SDKs."""

from __future__ import annotations

from typing import Any

import anthropic
import openai
import pytest
from emulator_support import BATCH_SECONDS
from test_faults import USER, chat, file_lines, openai_batch, rule

from agac.emulator.faults import RuleError, parse_rule
from agac.emulator.testing import RunningEmulator


def test_i28_7_a_reply_rule_is_checked() -> None:
    with pytest.raises(RuleError, match="reply must be an object"):
        parse_rule(rule("openai", "chat", {"reply": {"stopp": "x"}}))
    with pytest.raises(RuleError, match="reply faults apply to chat or batch.create"):
        parse_rule(rule("openai", "batch.get", {"reply": {"stop": "x"}}))
    with pytest.raises(RuleError, match="headers must be an object of strings"):
        parse_rule(rule("openai", "chat", {"http": 500, "headers": {"x": 1}}))


def test_i28_7_anthropic_blocks_stop_details_usage_and_request_id(
    emu: RunningEmulator, claude: anthropic.Anthropic
) -> None:
    emu.add_fault(
        rule(
            "anthropic",
            "chat",
            {
                "reply": {
                    "stop": "refusal",
                    "blocks": ["thinking", "preamble", "server_tool_use", "text"],
                    "stop_details": {"type": "refusal", "category": "cyber", "explanation": "no"},
                    "usage": {
                        "cache_write_tokens": 9,
                        "reasoning_tokens": 4,
                        "web_search_requests": 2,
                    },
                }
            },
        )
    )
    raw = claude.messages.with_raw_response.create(
        model="claude-sonnet-4-5", max_tokens=64, messages=USER
    )  # type: ignore[arg-type]
    message = raw.parse()
    assert raw.headers["request-id"].startswith("req_")
    assert [b.type for b in message.content] == ["thinking", "text", "server_tool_use", "text"]
    assert message.stop_reason == "refusal"
    assert message.stop_details is not None and message.stop_details.category == "cyber"
    usage = message.usage
    assert usage.cache_creation_input_tokens == 9
    assert usage.server_tool_use is not None and usage.server_tool_use.web_search_requests == 2
    assert usage.output_tokens_details is not None
    assert usage.output_tokens_details.thinking_tokens == 4


def test_i28_7_openai_finish_reason_refusal_and_reasoning(
    emu: RunningEmulator, oai: openai.OpenAI
) -> None:
    emu.add_fault(
        rule(
            "openai",
            "chat",
            {
                "reply": {
                    "stop": "tool_calls",
                    "content": None,
                    "blocks": ["tool_calls"],
                    "usage": {"reasoning_tokens": 12, "cache_write_tokens": 3},
                }
            },
        )
    )
    completion = chat(oai)
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    assert choice.message.tool_calls
    assert completion.usage is not None
    details = completion.usage.completion_tokens_details
    assert details is not None and details.reasoning_tokens == 12
    assert completion._request_id and completion._request_id.startswith("req_")


def test_i28_7_an_error_body_as_given(emu: RunningEmulator, oai: openai.OpenAI) -> None:
    body = {"error": {"message": "slow", "type": "requests", "param": "model", "code": 429}}
    emu.add_fault(
        rule(
            "openai", "chat", {"http": 429, "body": body, "headers": {"x-request-id": "req_given"}}
        )
    )
    with pytest.raises(openai.RateLimitError) as caught:
        chat(oai)
    assert caught.value.body == body["error"]
    assert caught.value.request_id == "req_given"


def test_i28_7_reply_and_error_bodies_in_openai_batch_lines(
    emu: RunningEmulator, oai: openai.OpenAI
) -> None:
    emu.add_fault(
        rule(
            "openai",
            "batch.create",
            {"reply": {"stop": "content_filter"}},
            match={"custom_id": "r0"},
        ),
        rule(
            "openai",
            "batch.create",
            {
                "http": 400,
                "body": {
                    "error": {
                        "message": "bad",
                        "type": "invalid_request_error",
                        "param": None,
                        "code": None,
                    }
                },
            },
            match={"custom_id": "r1"},
        ),
    )
    batch = openai_batch(oai, 3)
    emu.advance(BATCH_SECONDS + 1)
    done = oai.batches.retrieve(batch.id)
    out = {x["custom_id"]: x for x in file_lines(oai, done.output_file_id)}
    err = {x["custom_id"]: x for x in file_lines(oai, done.error_file_id)}
    assert out["r0"]["response"]["body"]["choices"][0]["finish_reason"] == "content_filter"
    assert out["r2"]["response"]["body"]["choices"][0]["finish_reason"] == "stop"
    line: dict[str, Any] = err["r1"]["response"]
    assert line["status_code"] == 400 and line["body"]["error"]["message"] == "bad"
    assert line["request_id"].startswith("req_")

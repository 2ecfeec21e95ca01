"""Issue 35, items 3 and 4, read off single bodies: reasoning never reaches an answer and a
tool call nobody asked for is never an answer, on every normalizer (live and batch lines
read alike)."""

from __future__ import annotations

from typing import Any

import pytest

from agac.providers._anthropic_wire import message_response
from agac.providers._openai_compat import chat_response
from agac.providers._reasoning import Split, reasoning_share, split_reasoning, thinks_inline
from agac.providers.ollama import chat_response as ollama_response


@pytest.mark.parametrize(
    ("content", "apart", "split"),
    [
        ("<think>\nweigh it\n</think>\n\nThe answer.", None, Split("The answer.", "weigh it")),
        ("  <think></think>Answer", None, Split("Answer", "")),
        ("<think>cut off while thinking", None, Split("", "cut off while thinking")),
        ("Plain answer", "thought apart", Split("Plain answer", "thought apart")),
        ("<think>inline</think>A", "apart", Split("A", "apart\ninline")),
        ("An answer that quotes <think>tags</think>.", None,
         Split("An answer that quotes <think>tags</think>.", "")),
        ("", None, Split("", "")),
    ],
)  # fmt: skip
def test_i35_3_split_reasoning(content: str, apart: str | None, split: Split) -> None:
    assert split_reasoning(content, apart) == split


def test_i35_3_reasoning_share_is_reported_or_the_share_by_characters() -> None:
    split = Split("a" * 25, "r" * 75)
    assert reasoning_share(split, 100, 0) == 75
    assert reasoning_share(split, 100, 12) == 12  # the provider's own count wins
    assert reasoning_share(Split("answer"), 100, 0) == 0
    assert reasoning_share(Split("", "r"), 7, 0) == 7


@pytest.mark.parametrize(
    ("model", "inline"),
    [
        ("deepseek-r1-distill-llama-70b", True),
        ("deepseek-r1:8b", True),
        ("qwen/qwen3-32b", True),
        ("qwen3:14b", True),
        ("qwen-qwq-32b", True),
        ("llama-3.3-70b-versatile", False),
        ("openai/gpt-oss-120b", False),
        ("qwen2.5:7b", False),
        ("my-deepseek-r1-finetune", False),
    ],
)
def test_i35_3_models_that_think_inline_by_name(model: str, inline: bool) -> None:
    assert thinks_inline(model) is inline


def _chat(message: dict[str, Any], finish: str = "stop") -> dict[str, Any]:
    return {
        "model": "m",
        "choices": [{"message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 40},
    }


@pytest.mark.parametrize("wire", [True, False])
def test_i35_3_chat_completions_reasoning_fields_stay_out_of_the_answer(wire: bool) -> None:
    for field in ("reasoning", "reasoning_content"):
        body = _chat({"content": '{"a": 1}', field: "x" * 30})
        got = chat_response(body, provider="groq", latency_ms=0, wire=wire)
        assert got.text == '{"a": 1}' and got.parsed == {"a": 1}
        assert got.usage.reasoning_tokens == 32  # 30 of 38 characters of 40 tokens


def test_i35_3_ollama_thinking_and_inline_think_stay_out_of_the_answer() -> None:
    body = {
        "model": "deepseek-r1:8b",
        "message": {"role": "assistant", "content": "<think>hmm</think>\n\n{}"},
        "done_reason": "stop",
        "eval_count": 10,
    }
    got = ollama_response(body, latency_ms=0)
    assert (got.text, got.parsed, got.stop_reason) == ("{}", {}, "end")
    assert got.usage.reasoning_tokens == 6


@pytest.mark.parametrize("wire", [True, False])
def test_i35_4_a_tool_call_with_finish_stop_is_unexpected(wire: bool) -> None:
    call = {"type": "function", "function": {"name": "lookup", "arguments": "{}"}}
    body = _chat({"content": None, "tool_calls": [call]})
    got = chat_response(body, provider="openai", latency_ms=0, wire=wire)
    assert got.stop_reason == "unexpected" and "'lookup'" in str(got.stop_detail)


def test_i35_4_ollama_tool_call_is_unexpected() -> None:
    body = {
        "message": {"role": "assistant", "content": "", "tool_calls": [
            {"function": {"name": "lookup", "arguments": {}}}
        ]},
        "done_reason": "stop",
    }  # fmt: skip
    got = ollama_response(body, latency_ms=0)
    assert got.stop_reason == "unexpected" and "'lookup'" in str(got.stop_detail)


def test_i35_4_anthropic_tool_use_block_with_end_turn_is_unexpected() -> None:
    message = {
        "content": [{"type": "tool_use", "id": "t1", "name": "lookup", "input": {}}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 3, "output_tokens": 4},
    }
    got = message_response(message, latency_ms=0)
    assert got.stop_reason == "unexpected" and "'lookup'" in str(got.stop_detail)
    forced = {**message, "content": [{"type": "tool_use", "name": "answer", "input": {"a": 1}}]}
    assert message_response(forced, latency_ms=0).parsed == {"a": 1}

"""Issue 28 item 8: response bodies as the providers send them, and the reading agac must
make of each, on both transports (the ``transport`` fixture: lean and the SDKs) and in
batch result files (Anthropic, OpenAI, Groq and Gemini batches).

Each row is a body written from the provider's API reference (the emulator sends it as
given: its ``reply`` fault's ``body``) with what agac reads: the normalized stop, the
answer's text, usage, and what the detail must say. Adding a stop reason later is one row
here and one in agac.providers.stops. The last tests feed every stop value each SDK
documents (read from the SDK's own types) through live and batch reading.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass, field
from typing import Any

import pytest
from provider_support import BATCH_SECONDS, MODELS, make_request, poll_until

from agac.providers.base import Response
from agac.providers.stops import STOP_TABLES, read_stop


@dataclass(frozen=True)
class Row:
    """One body and its reading. ``stop`` is what live reading gives (after agac
    continues a paused turn), ``batch_stop`` what a batch result gives (a paused turn is
    continued by the engine, live: the adapter reads it ``paused``)."""

    id: str
    provider: str
    body: dict[str, Any]
    stop: str
    text: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    detail: tuple[str, ...] = ()
    batch_stop: str | None = None
    legs: int = 0


# -- Anthropic: Messages API ------------------------------------------------------------------


def _message(
    content: list[dict[str, Any]],
    stop: str | None,
    usage: dict[str, Any] | None = None,
    **more: Any,
) -> dict[str, Any]:
    return {
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": usage
        or {
            "input_tokens": 25,
            "output_tokens": 12,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
        **more,
    }


HI = [{"type": "text", "text": "Hi! My name is Claude."}]
SEARCH = [
    {"type": "text", "text": "I'll search for that."},
    {
        "type": "server_tool_use",
        "id": "srvtoolu_01",
        "name": "web_search",
        "input": {"query": "weather in Paris"},
    },
]

ANTHROPIC = [
    Row(
        "a_end_turn",
        "anthropic",
        _message(HI, "end_turn"),
        "end",
        "Hi! My name is Claude.",
        {"input_tokens": 25, "output_tokens": 12},
    ),
    Row(
        "a_stop_sequence",
        "anthropic",
        {**_message(HI, "stop_sequence"), "stop_sequence": "\n\n"},
        "end",
        "Hi! My name is Claude.",
    ),
    Row("a_max_tokens", "anthropic", _message(HI, "max_tokens"), "max_tokens"),
    Row(
        "a_context_window", "anthropic", _message(HI, "model_context_window_exceeded"), "max_tokens"
    ),
    Row(
        "a_refusal",
        "anthropic",
        _message(
            [],
            "refusal",
            stop_details={
                "type": "refusal",
                "category": "cyber",
                "explanation": "The request asks for working exploit code.",
            },
        ),
        "refusal",
        detail=("category cyber", "working exploit code"),
    ),
    Row(
        "a_tool_use_unasked",
        "anthropic",
        _message(
            [
                {"type": "text", "text": "Let me look."},
                {
                    "type": "tool_use",
                    "id": "toolu_01A09q90qw90lq917835lq9",
                    "name": "get_weather",
                    "input": {"location": "Paris"},
                },
            ],
            "tool_use",
        ),
        "unexpected",
        detail=("'tool_use'", "did not ask for"),
    ),
    Row(
        "a_pause_turn",
        "anthropic",
        _message(
            SEARCH,
            "pause_turn",
            usage={
                "input_tokens": 40,
                "output_tokens": 20,
                "server_tool_use": {"web_search_requests": 1, "web_fetch_requests": 0},
            },
        ),
        "end",
        batch_stop="paused",
        legs=1,
    ),
    Row(
        "a_unknown",
        "anthropic",
        _message(HI, "compaction_2027"),
        "unexpected",
        detail=("'compaction_2027'", "does not know"),
    ),
    Row("a_no_stop", "anthropic", _message(HI, None), "unexpected", detail=("no stop reason",)),
    Row(
        "a_thinking",
        "anthropic",
        _message(
            [
                {
                    "type": "thinking",
                    "thinking": "The user greets me.",
                    "signature": "EqQBCgIYAhIM",
                },
                {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"},
                {"type": "text", "text": "Hello there."},
            ],
            "end_turn",
            usage={
                "input_tokens": 10,
                "output_tokens": 90,
                "output_tokens_details": {"thinking_tokens": 70},
            },
        ),
        "end",
        "Hello there.",
        {"output_tokens": 90, "reasoning_tokens": 70},
    ),
    Row(
        "a_text_blocks",
        "anthropic",
        _message(
            [
                {"type": "text", "text": "Paris is "},
                {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_01", "content": []},
                {"type": "text", "text": "sunny today.", "citations": None},
            ],
            "end_turn",
            usage={
                "input_tokens": 10,
                "output_tokens": 9,
                "server_tool_use": {"web_search_requests": 2, "web_fetch_requests": 1},
            },
        ),
        "end",
        "Paris is sunny today.",
        {"server_tools": {"web_fetch": 1, "web_search": 2}},
    ),
    Row(
        "a_cache",
        "anthropic",
        _message(
            HI,
            "end_turn",
            usage={
                "input_tokens": 50,
                "output_tokens": 10,
                "cache_creation_input_tokens": 248,
                "cache_read_input_tokens": 1800,
                "cache_creation": {
                    "ephemeral_5m_input_tokens": 248,
                    "ephemeral_1h_input_tokens": 0,
                },
            },
        ),
        "end",
        "Hi! My name is Claude.",
        {"input_tokens": 50, "cached_tokens": 1800, "cache_write_tokens": 248},
    ),
]


# -- OpenAI and Groq: Chat Completions --------------------------------------------------------


def _completion(
    message: dict[str, Any], finish: str | None, usage: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
        "object": "chat.completion",
        "created": 1741569952,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
        "usage": usage
        or {
            "prompt_tokens": 19,
            "completion_tokens": 10,
            "total_tokens": 29,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0},
        },
        "service_tier": "default",
    }


HELLO = {
    "role": "assistant",
    "content": "Hello! How can I help?",
    "refusal": None,
    "annotations": [],
}
CALL = {
    "role": "assistant",
    "content": None,
    "refusal": None,
    "tool_calls": [
        {
            "id": "call_abc123",
            "type": "function",
            "function": {"name": "get_current_weather", "arguments": '{"location": "Boston"}'},
        }
    ],
}


def _chat_rows(provider: str, p: str) -> list[Row]:
    return [
        Row(
            f"{p}_stop",
            provider,
            _completion(HELLO, "stop"),
            "end",
            "Hello! How can I help?",
            {"input_tokens": 19, "output_tokens": 10},
        ),
        Row(f"{p}_length", provider, _completion(HELLO, "length"), "max_tokens"),
        Row(
            f"{p}_tool_calls",
            provider,
            _completion(CALL, "tool_calls"),
            "unexpected",
            detail=("'tool_calls'", "did not ask for"),
        ),
        Row(
            f"{p}_function_call",
            provider,
            _completion(
                {
                    "role": "assistant",
                    "content": None,
                    "function_call": {"name": "get_current_weather", "arguments": "{}"},
                },
                "function_call",
            ),
            "unexpected",
            detail=("'function_call'",),
        ),
        Row(
            f"{p}_unknown",
            provider,
            _completion(HELLO, "end_of_stream"),
            "unexpected",
            detail=("'end_of_stream'",),
        ),
        Row(
            f"{p}_no_finish",
            provider,
            _completion(HELLO, None),
            "unexpected",
            detail=("no stop reason",),
        ),
    ]


OPENAI = [
    *_chat_rows("openai", "o"),
    Row(
        "o_content_filter",
        "openai",
        _completion({"role": "assistant", "content": None, "refusal": None}, "content_filter"),
        "content_filter",
    ),
    Row(
        "o_refusal",
        "openai",
        _completion(
            {
                "role": "assistant",
                "content": None,
                "refusal": "I'm sorry, I can't assist with that.",
            },
            "stop",
        ),
        "refusal",
        detail=("I'm sorry, I can't assist with that.",),
    ),
    Row(
        "o_usage",
        "openai",
        _completion(
            HELLO,
            "stop",
            usage={
                "prompt_tokens": 2006,
                "completion_tokens": 300,
                "total_tokens": 2306,
                "prompt_tokens_details": {
                    "cached_tokens": 1920,
                    "cache_write_tokens": 6,
                    "audio_tokens": 0,
                },
                "completion_tokens_details": {
                    "reasoning_tokens": 256,
                    "audio_tokens": 0,
                    "accepted_prediction_tokens": 0,
                    "rejected_prediction_tokens": 0,
                },
            },
        ),
        "end",
        "Hello! How can I help?",
        {
            "input_tokens": 80,
            "cached_tokens": 1920,
            "cache_write_tokens": 6,
            "output_tokens": 300,
            "reasoning_tokens": 256,
        },
    ),
]

GROQ = [
    *_chat_rows("groq", "g"),
    Row(
        "g_timings",
        "groq",
        {
            **_completion(
                HELLO,
                "stop",
                usage={
                    "queue_time": 0.037,
                    "prompt_tokens": 18,
                    "prompt_time": 0.000680,
                    "completion_tokens": 556,
                    "completion_time": 0.463,
                    "total_tokens": 574,
                    "total_time": 0.464,
                },
            ),
            "x_groq": {"id": "req_01jbd6g2qdfw2adyrt2az8hz4w"},
        },
        "end",
        "Hello! How can I help?",
        {"input_tokens": 18, "output_tokens": 556},
    ),
]


# -- Gemini: generateContent ------------------------------------------------------------------


def _generate(
    candidate: dict[str, Any] | None, usage: dict[str, Any] | None = None, **more: Any
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "usageMetadata": usage
        or {"promptTokenCount": 8, "candidatesTokenCount": 5, "totalTokenCount": 13},
        "modelVersion": "gemini-2.5-flash",
        "responseId": "LnrPaOeaK8Sz7M8P3cmE8Qw",
        **more,
    }
    if candidate is not None:
        body["candidates"] = [candidate]
    return body


def _candidate(
    finish: str | None, parts: list[dict[str, Any]] | None = None, **more: Any
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "content": {
            "parts": parts if parts is not None else [{"text": "Hello! How are you?"}],
            "role": "model",
        },
        "index": 0,
        **more,
    }
    if finish is not None:
        out["finishReason"] = finish
    return out


GEMINI = [
    Row(
        "m_stop",
        "gemini",
        _generate(_candidate("STOP")),
        "end",
        "Hello! How are you?",
        {"input_tokens": 8, "output_tokens": 5},
    ),
    Row("m_max_tokens", "gemini", _generate(_candidate("MAX_TOKENS")), "max_tokens"),
    Row(
        "m_safety",
        "gemini",
        _generate(
            _candidate(
                "SAFETY",
                parts=[],
                safetyRatings=[
                    {
                        "category": "HARM_CATEGORY_DANGEROUS_CONTENT",
                        "probability": "HIGH",
                        "blocked": True,
                    },
                    {"category": "HARM_CATEGORY_HARASSMENT", "probability": "NEGLIGIBLE"},
                ],
            )
        ),
        "content_filter",
        detail=("HARM_CATEGORY_DANGEROUS_CONTENT (HIGH)",),
    ),
    Row("m_recitation", "gemini", _generate(_candidate("RECITATION")), "content_filter"),
    Row(
        "m_prompt_blocked",
        "gemini",
        _generate(
            None,
            promptFeedback={
                "blockReason": "PROHIBITED_CONTENT",
                "blockReasonMessage": "The prompt contains prohibited content.",
            },
        ),
        "content_filter",
        detail=("the prompt was blocked", "The prompt contains prohibited content."),
    ),
    Row(
        "m_unexpected_tool",
        "gemini",
        _generate(_candidate("UNEXPECTED_TOOL_CALL")),
        "unexpected",
        detail=("'UNEXPECTED_TOOL_CALL'", "did not ask for"),
    ),
    Row("m_other", "gemini", _generate(_candidate("OTHER")), "unexpected", detail=("'OTHER'",)),
    Row(
        "m_unknown",
        "gemini",
        _generate(_candidate("PLANETARY_ALIGNMENT")),
        "unexpected",
        detail=("'PLANETARY_ALIGNMENT'", "does not know"),
    ),
    Row(
        "m_thoughts",
        "gemini",
        _generate(
            _candidate(
                "STOP",
                parts=[
                    {"text": "The user greets me; answer kindly.", "thought": True},
                    {"text": "Hello! "},
                    {"text": "How are you?"},
                ],
            ),
            usage={
                "promptTokenCount": 120,
                "cachedContentTokenCount": 100,
                "candidatesTokenCount": 5,
                "thoughtsTokenCount": 40,
                "totalTokenCount": 165,
            },
        ),
        "end",
        "Hello! How are you?",
        {"input_tokens": 20, "cached_tokens": 100, "output_tokens": 45, "reasoning_tokens": 40},
    ),
    Row(
        "m_grounding",
        "gemini",
        _generate(
            _candidate(
                "STOP",
                groundingMetadata={
                    "webSearchQueries": ["uefa euro 2024 winner", "who won euro 2024"],
                    "searchEntryPoint": {"renderedContent": "<div></div>"},
                },
            )
        ),
        "end",
        "Hello! How are you?",
        # Gemini 2.5 bills grounding per grounded prompt, however many queries it made.
        {"server_tools": {"web_search": 1}},
    ),
]


# -- Ollama: /api/chat ------------------------------------------------------------------------


def _ollama(done_reason: str | None, **message: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "llama3.2",
        "created_at": "2023-12-12T14:13:43.416799Z",
        "message": {"role": "assistant", "content": "Hello! How are you today?", **message},
        "done": True,
        "total_duration": 5191566416,
        "load_duration": 2154458,
        "prompt_eval_count": 26,
        "prompt_eval_duration": 383809000,
        "eval_count": 298,
        "eval_duration": 4799921000,
    }
    if done_reason is not None:
        body["done_reason"] = done_reason
    return body


OLLAMA = [
    Row(
        "l_stop",
        "ollama",
        _ollama("stop"),
        "end",
        "Hello! How are you today?",
        {"input_tokens": 26, "output_tokens": 298},
    ),
    Row("l_length", "ollama", _ollama("length"), "max_tokens"),
    Row("l_load", "ollama", _ollama("load"), "unexpected", detail=("'load'",)),
    Row("l_unknown", "ollama", _ollama("interrupted"), "unexpected", detail=("'interrupted'",)),
    Row(
        "l_thinking",
        "ollama",
        _ollama("stop", thinking="The user says hello."),
        "end",
        "Hello! How are you today?",
    ),
]

ROWS = [*ANTHROPIC, *OPENAI, *GROQ, *GEMINI, *OLLAMA]
BATCHED = ("anthropic", "openai", "groq", "gemini")


def _check(row: Row, answer: Response, stop: str) -> None:
    assert answer.stop_reason == stop, (row.id, answer.stop_reason, answer.stop_detail)
    if row.text is not None and stop == "end":
        assert answer.text == row.text
    usage = answer.usage.to_dict()
    usage.setdefault("server_tools", {})
    for key, value in row.usage.items():
        assert usage[key] == value, (row.id, key, usage)
    for part in row.detail:
        assert part in (answer.stop_detail or ""), (row.id, answer.stop_detail)


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
async def test_i28_8_a_body_reads_right_live(row: Row, emulator: Any, make_provider: Any) -> None:
    times = {"times": 1} if row.legs else {}
    emulator.add_fault(
        {"provider": row.provider, "op": "chat", "fault": {"reply": {"body": row.body}}, **times}
    )
    adapter = make_provider(row.provider)

    answer = await adapter.complete(make_request(row.provider, schema=None))

    _check(row, answer, row.stop)
    assert len(answer.legs) == row.legs
    if row.legs:  # the paused leg's text and usage stay with the turn
        assert answer.text.startswith("I'll search for that.")
        assert answer.legs[0].usage.server_tools == (("web_search", 1),)


@pytest.mark.parametrize("provider", BATCHED)
async def test_i28_8_the_same_bodies_read_right_in_batch_results(
    provider: str, emulator: Any, make_provider: Any
) -> None:
    rows = [r for r in ROWS if r.provider == provider]
    for r in rows:
        emulator.add_fault(
            {
                "provider": provider,
                "op": "batch.create",
                "match": {"custom_id": r.id},
                "fault": {"reply": {"body": r.body}},
            }
        )
    adapter = make_provider(provider)
    handle = await adapter.submit_batch(
        [make_request(provider, f"row {r.id}", schema=None, custom_id=r.id) for r in rows],
        f"table-{provider}",
    )
    emulator.advance(BATCH_SECONDS + 1)
    await poll_until(adapter, handle, ("ended",))

    results = {r.custom_id: r async for r in adapter.batch_results(handle)}

    assert set(results) == {r.id for r in rows}
    for r in rows:
        result = results[r.id]
        assert result.type == "succeeded" and result.response is not None, r.id
        assert result.response.service_tier == "batch"
        _check(r, result.response, r.batch_stop or r.stop)


# -- every documented stop value, from the SDKs' own types ------------------------------------


def _documented() -> dict[str, set[str]]:
    """The stop/finish values each provider's SDK documents."""
    from anthropic.types import StopReason
    from google.genai import types as genai_types
    from groq.types.chat.chat_completion import Choice as GroqChoice
    from mistralai.client.models import ChatCompletionChoice as MistralChoice
    from openai.types.chat.chat_completion import Choice as OpenAIChoice
    from together.types.chat.chat_completion import Choice as TogetherChoice

    def literal(annotation: Any) -> set[str]:
        return {a for a in typing.get_args(annotation) if isinstance(a, str)}

    return {
        "anthropic": literal(StopReason),
        "openai": literal(OpenAIChoice.model_fields["finish_reason"].annotation),
        "groq": literal(GroqChoice.model_fields["finish_reason"].annotation),
        # Azure OpenAI: the openai SDK's own finish reasons.
        "azure": literal(OpenAIChoice.model_fields["finish_reason"].annotation),
        "gemini": {m.value for m in genai_types.FinishReason},
        # The mistralai SDK: a Literal in a Union with "any other string".
        "mistral": literal(
            typing.get_args(MistralChoice.model_fields["finish_reason"].annotation)[0]
        ),
        "together": literal(TogetherChoice.model_fields["finish_reason"].annotation),
        # The ollama SDK types done_reason as a plain string; its API documents these.
        "ollama": {"stop", "length", "load", "unload"},
        # OpenRouter normalizes every provider's finish reason to these (its API reference).
        "openrouter": {"stop", "length", "content_filter", "tool_calls", "error"},
        # xAI and Fireworks are read through the openai SDK: its finish reasons.
        "xai": literal(OpenAIChoice.model_fields["finish_reason"].annotation),
        "fireworks": literal(OpenAIChoice.model_fields["finish_reason"].annotation),
        # DeepSeek has no SDK; its API reference lists these finish reasons.
        "deepseek": {
            "stop",
            "length",
            "content_filter",
            "tool_calls",
            "insufficient_system_resource",
        },
        # vLLM has no SDK; its engine's finish reasons (``FINISH_REASON_STRINGS``) and the
        # OpenAI server's tool_calls.
        "vllm": {"stop", "length", "abort", "error", "tool_calls"},
        # Bedrock's Converse: the StopReason enum of botocore's own service model.
        "bedrock": _botocore_enum("bedrock-runtime", "StopReason"),
    }


def _botocore_enum(service: str, shape: str) -> set[str]:
    import botocore.session

    model = botocore.session.get_session().get_service_model(service)
    return set(model.shape_for(shape).enum)


def test_i28_8_every_documented_stop_value_has_an_explicit_rule() -> None:
    for provider, values in _documented().items():
        missing = values - set(STOP_TABLES[provider])
        assert not missing, f"{provider} documents stop values agac has no rule for: {missing}"


def _reply(provider: str, value: str) -> dict[str, Any]:
    """An answer that stops with ``value`` (and, for a tool stop, a tool call in it)."""
    reply: dict[str, Any] = {"stop": value}
    if provider == "anthropic" and value == "tool_use":
        reply["blocks"] = ["text", "tool_use"]
    tool_stops = ("tool_calls", "function_call")
    compatible = (
        "openai",
        "groq",
        "deepseek",
        "mistral",
        "together",
        "openrouter",
        "vllm",
        "xai",
        "fireworks",
    )
    if provider in compatible and value in tool_stops:
        reply.update(blocks=["tool_calls"], content=None)
    return reply


def _expected(provider: str, value: str) -> str:
    return read_stop(provider, value).reason


# Bedrock's stops are read live by its own suite, through boto3 against the emulator's
# Converse (tests/integration/bedrock: test_bedrock_converse_stop_reason_read_per_table).
@pytest.mark.parametrize("provider", sorted(set(STOP_TABLES) - {"bedrock"}))
async def test_i28_8_every_documented_stop_value_reads_by_its_rule_live(
    provider: str, emulator: Any, make_provider: Any
) -> None:
    adapter = make_provider(provider)
    for value in sorted(_documented()[provider] | set(STOP_TABLES[provider])):
        emulator.clear_faults()
        emulator.add_fault(
            {
                "provider": provider,
                "op": "chat",
                "times": 1,
                "fault": {"reply": _reply(provider, value)},
            }
        )
        answer = await adapter.complete(make_request(provider, schema=None))
        want = _expected(provider, value)
        if want == "paused":  # continued by the adapter: the next leg answers
            assert (answer.stop_reason, len(answer.legs)) == ("end", 1), value
            continue
        assert answer.stop_reason == want, (value, answer.stop_detail)
        assert answer.raw_stop == value
        if want == "unexpected":
            assert value in (answer.stop_detail or "")


@pytest.mark.parametrize("provider", BATCHED)
async def test_i28_8_every_documented_stop_value_reads_by_its_rule_in_a_batch(
    provider: str, emulator: Any, make_provider: Any
) -> None:
    values = sorted(_documented()[provider] | set(STOP_TABLES[provider]))
    ids = {value: f"v{i}" for i, value in enumerate(values)}
    for value, custom_id in ids.items():
        emulator.add_fault(
            {
                "provider": provider,
                "op": "batch.create",
                "match": {"custom_id": custom_id},
                "fault": {"reply": _reply(provider, value)},
            }
        )
    adapter = make_provider(provider)
    handle = await adapter.submit_batch(
        [make_request(provider, f"stop {v}", schema=None, custom_id=c) for v, c in ids.items()],
        f"stops-{provider}",
    )
    emulator.advance(BATCH_SECONDS + 1)
    await poll_until(adapter, handle, ("ended",))

    results = {r.custom_id: r async for r in adapter.batch_results(handle)}

    for value, custom_id in ids.items():
        response = results[custom_id].response
        assert response is not None, value
        assert response.stop_reason == _expected(provider, value), value
        assert response.raw_stop == value
    assert {MODELS[provider]}  # one model per batch (Gemini's rule)

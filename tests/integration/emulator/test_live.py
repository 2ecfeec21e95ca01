"""Live calls through each official SDK: schema-conforming, deterministic answers with
plausible usage, in every provider's own structured-output form."""

from __future__ import annotations

import json
import math

import anthropic
import groq
import jsonschema
import ollama
import openai
from google import genai

from agac.emulator.testing import RunningEmulator

SCHEMA = {
    "type": "object",
    "properties": {
        "sentiment": {"enum": ["pos", "neg", "neutral"]},
        "score": {"type": "number", "minimum": 0, "maximum": 1},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
        "count": {"type": "integer"},
        "ok": {"type": "boolean"},
    },
    "required": ["sentiment", "score", "tags", "count", "ok"],
    "additionalProperties": False,
}
MESSAGES = [
    {"role": "system", "content": "You label reviews."},
    {"role": "user", "content": "Classify: the kettle broke after two days."},
]


def _openai_schema_call(client: openai.OpenAI | groq.Groq, seed: int | None = None) -> object:
    extra = {} if seed is None else {"seed": seed}
    return client.chat.completions.create(
        model="gpt-4o-mini",
        messages=MESSAGES,
        max_completion_tokens=200,  # type: ignore[arg-type]
        response_format={
            "type": "json_schema",  # type: ignore[arg-type]
            "json_schema": {"name": "label", "schema": SCHEMA, "strict": True},
        },
        **extra,
    )


def test_openai_live_schema_answer_conforms_and_is_deterministic(oai: openai.OpenAI) -> None:
    first = _openai_schema_call(oai)
    again = _openai_schema_call(oai)
    other_seed = _openai_schema_call(oai, seed=7)
    content = first.choices[0].message.content  # type: ignore[attr-defined]
    jsonschema.validate(json.loads(content), SCHEMA)
    assert again.choices[0].message.content == content  # type: ignore[attr-defined]
    assert other_seed.choices[0].message.content != content  # type: ignore[attr-defined]
    assert first.choices[0].finish_reason == "stop"  # type: ignore[attr-defined]
    usage = first.usage  # type: ignore[attr-defined]
    chars = sum(len(m["content"]) for m in MESSAGES)
    assert usage.prompt_tokens == math.ceil(chars / 4)
    assert usage.completion_tokens == math.ceil(len(content) / 4)
    assert usage.prompt_tokens_details.cached_tokens == 0


def test_openai_max_tokens_truncates_with_length(oai: openai.OpenAI) -> None:
    reply = oai.chat.completions.create(
        model="gpt-4o-mini",
        messages=MESSAGES,  # type: ignore[arg-type]
        max_completion_tokens=3,
    )
    assert reply.choices[0].finish_reason == "length"
    assert len(reply.choices[0].message.content or "") <= 12


def test_openai_long_prompt_reports_cached_tokens(oai: openai.OpenAI) -> None:
    long = "word " * 2000
    first = oai.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": long}]
    )
    assert first.usage.prompt_tokens_details.cached_tokens == 0  # type: ignore[union-attr]
    reply = oai.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": long}]
    )
    details = reply.usage.prompt_tokens_details  # type: ignore[union-attr]
    assert details is not None and details.cached_tokens
    assert details.cached_tokens % 128 == 0
    assert details.cached_tokens < reply.usage.prompt_tokens  # type: ignore[union-attr]


def test_groq_live_schema_answer(gq: groq.Groq) -> None:
    reply = _openai_schema_call(gq)
    jsonschema.validate(json.loads(reply.choices[0].message.content), SCHEMA)  # type: ignore[attr-defined]
    assert reply.usage.queue_time is not None  # type: ignore[attr-defined]


def test_anthropic_live_structured_output(claude: anthropic.Anthropic) -> None:
    reply = claude.messages.create(
        model="claude-emulated",
        max_tokens=300,
        system="You label reviews.",
        messages=[{"role": "user", "content": MESSAGES[1]["content"]}],
        output_config={"format": {"type": "json_schema", "schema": SCHEMA}},
    )
    assert reply.stop_reason == "end_turn"
    text = "".join(block.text for block in reply.content if block.type == "text")
    jsonschema.validate(json.loads(text), SCHEMA)
    assert reply.usage.cache_read_input_tokens == 0
    assert reply.usage.input_tokens == math.ceil(
        (len("You label reviews.") + len(MESSAGES[1]["content"])) / 4
    )


def test_anthropic_max_tokens_stop_reason(claude: anthropic.Anthropic) -> None:
    reply = claude.messages.create(
        model="claude-emulated", max_tokens=2, messages=[{"role": "user", "content": "Say a lot."}]
    )
    assert reply.stop_reason == "max_tokens"


def test_gemini_live_response_json_schema(gem: genai.Client) -> None:
    reply = gem.models.generate_content(
        model="gemini-2.5-flash",
        contents=MESSAGES[1]["content"],
        config={
            "system_instruction": "You label reviews.",
            "response_mime_type": "application/json",
            "response_json_schema": SCHEMA,
        },
    )
    jsonschema.validate(json.loads(reply.text or ""), SCHEMA)
    assert reply.candidates and reply.candidates[0].finish_reason == "STOP"
    assert reply.usage_metadata and reply.usage_metadata.prompt_token_count


def test_gemini_live_openapi_response_schema(gem: genai.Client) -> None:
    schema = {
        "type": "OBJECT",
        "properties": {"label": {"type": "STRING", "enum": ["a", "b"]}, "n": {"type": "INTEGER"}},
        "required": ["label", "n"],
    }
    reply = gem.models.generate_content(
        model="gemini-2.5-flash",
        contents="Pick one.",
        config={"response_mime_type": "application/json", "response_schema": schema},
    )
    value = json.loads(reply.text or "")
    assert value["label"] in ("a", "b") and isinstance(value["n"], int)


def test_gemini_max_output_tokens(gem: genai.Client) -> None:
    reply = gem.models.generate_content(
        model="gemini-2.5-flash", contents="Talk.", config={"max_output_tokens": 2}
    )
    assert reply.candidates and reply.candidates[0].finish_reason == "MAX_TOKENS"


def test_ollama_live_format_schema_and_stream(oll: ollama.Client) -> None:
    reply = oll.chat(model="llama3.2", messages=MESSAGES, format=SCHEMA)
    jsonschema.validate(json.loads(reply.message.content or ""), SCHEMA)
    assert reply.done and reply.done_reason == "stop"
    assert reply.prompt_eval_count and reply.eval_count
    plain = oll.chat(model="llama3.2", messages=MESSAGES)
    streamed = list(oll.chat(model="llama3.2", messages=MESSAGES, stream=True))
    assert len(streamed) > 2 and streamed[-1].done
    assert "".join(part.message.content or "" for part in streamed) == plain.message.content


def test_ollama_num_predict_truncates(oll: ollama.Client) -> None:
    reply = oll.chat(model="llama3.2", messages=MESSAGES, options={"num_predict": 2})
    assert reply.done_reason == "length"


def test_latency_delays_live_answers(emulator_server: RunningEmulator) -> None:
    import time

    with RunningEmulator(latency_ms=150) as slow:
        client = openai.OpenAI(base_url=slow.env()["OPENAI_BASE_URL"], api_key="x", max_retries=0)
        started = time.perf_counter()
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        assert time.perf_counter() - started >= 0.15
        client.close()


def test_openai_streaming_matches_non_streaming(oai: openai.OpenAI) -> None:
    plain = oai.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)  # type: ignore[arg-type]
    stream = oai.chat.completions.create(
        model="gpt-4o-mini",
        messages=MESSAGES,  # type: ignore[arg-type]
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == plain.choices[0].message.content
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == plain.usage.completion_tokens  # type: ignore[union-attr]

"""Tools per record: the emulator speaks OpenAI's Responses API (``/v1/responses``)
through the official SDK — its ``web_search`` tool (deterministic sources on the allowed
domain, ``web_search_call`` items, ``url_citation`` annotations, each search billed), a
function-calling turn answered once its output comes back in the resent input, OpenAI's
400 for an output no call names, the faults of ``chat`` on it, and ``/v1/responses`` as a
batch endpoint whose every line must name it."""

from __future__ import annotations

import io
import json
from typing import Any

import openai
import pytest
from emulator_support import BATCH_SECONDS
from openai.types.responses import Response as SdkResponse

from agac.emulator.testing import RunningEmulator

SEARCH: Any = {"type": "web_search", "filters": {"allowed_domains": ["who.int"]}}
LOOKUP: Any = {
    "type": "function",
    "name": "lookup",
    "description": "Find an order.",
    "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}},
    "strict": False,
}
PROMPT = 'Where is order A1? [[emulator calls: lookup {"order_id": "A1"}]]'


def test_i40_openai_responses_emulator_searches_cites_and_bills(
    emu: RunningEmulator, oai: openai.OpenAI
) -> None:
    answer = oai.responses.create(
        model="gpt-5-mini",
        input="The tallest tower? [[emulator searches: 2]]",
        tools=[SEARCH],
        store=False,
    )
    assert answer.status == "completed"
    kinds = [item.type for item in answer.output]
    assert kinds == ["web_search_call", "web_search_call", "message"]
    cited = [a for part in answer.output[-1].content for a in part.annotations]  # type: ignore[union-attr]
    assert [a.type for a in cited] == ["url_citation", "url_citation"]
    assert all(a.url.startswith("https://who.int/emulated/") for a in cited)  # type: ignore[union-attr]
    assert answer.output_text and answer.usage is not None
    assert answer.usage.input_tokens >= answer.usage.input_tokens_details.cached_tokens
    assert emu.stats()["searches"]["openai"] == 2
    # max_tool_calls bounds the searches.
    bounded = oai.responses.create(
        model="gpt-5-mini",
        input="The tallest tower? [[emulator searches: 2]]",
        tools=[SEARCH],
        max_tool_calls=1,
    )
    assert [i.type for i in bounded.output].count("web_search_call") == 1
    assert emu.stats()["searches"]["openai"] == 3
    # Every field the SDK's own model requires is there (the SDK parses without checking).
    raw = oai.responses.with_raw_response.create(
        model="gpt-5-mini", input=PROMPT, tools=[LOOKUP, SEARCH]
    )
    SdkResponse.model_validate(raw.http_response.json())
    SdkResponse.model_validate(answer.model_dump())


def test_i40_openai_responses_emulator_function_loop_is_stateless(
    emu: RunningEmulator, oai: openai.OpenAI
) -> None:
    first = oai.responses.create(model="gpt-5-mini", input=PROMPT, tools=[LOOKUP, SEARCH])
    kinds = [i.type for i in first.output]
    assert kinds == ["web_search_call", "function_call"]  # it searched, then asked
    call = first.output[-1]
    assert call.type == "function_call" and call.name == "lookup"
    assert json.loads(call.arguments) == {"order_id": "A1"}
    resent: Any = [
        {"role": "user", "content": PROMPT},
        {
            "type": "function_call",
            "call_id": call.call_id,
            "name": "lookup",
            "arguments": call.arguments,
        },
        {"type": "function_call_output", "call_id": call.call_id, "output": '"shipped"'},
    ]
    final = oai.responses.create(model="gpt-5-mini", input=resent, tools=[LOOKUP, SEARCH])
    assert final.output[-1].type == "message" and '"shipped"' in final.output_text
    assert emu.stats()["searches"]["openai"] == 2
    # An output whose call the input does not hold: the service keeps no conversation.
    with pytest.raises(openai.BadRequestError) as caught:
        oai.responses.create(model="gpt-5-mini", input=resent[2:], tools=[LOOKUP])
    assert "No tool call found" in str(caught.value)


def test_i40_openai_responses_emulator_faults_and_truncation(
    emu: RunningEmulator, oai: openai.OpenAI
) -> None:
    emu.add_fault(
        {"provider": "openai", "op": "chat", "fault": {"http": 429, "retry_after": 3}, "times": 1}
    )
    with pytest.raises(openai.RateLimitError) as caught:
        oai.responses.create(model="gpt-5-mini", input="hi", tools=[SEARCH])
    assert caught.value.response.headers["retry-after"] == "3"
    for kind in ("truncated", "refusal"):
        emu.add_fault({"provider": "openai", "op": "chat", "fault": {"answer": kind}, "times": 1})
    truncated = oai.responses.create(model="gpt-5-mini", input="hi", tools=[SEARCH])
    assert truncated.status == "incomplete"
    assert truncated.incomplete_details is not None
    assert truncated.incomplete_details.reason == "max_output_tokens"
    refused = oai.responses.create(model="gpt-5-mini", input="hi")
    parts = refused.output[-1].content  # type: ignore[union-attr]
    assert [p.type for p in parts] == ["refusal"]


def _line(custom_id: str, url: str, body: dict[str, Any]) -> str:
    return json.dumps({"custom_id": custom_id, "method": "POST", "url": url, "body": body})


def test_i40_openai_responses_emulator_batch_endpoint(
    emu: RunningEmulator, oai: openai.OpenAI
) -> None:
    body = {"model": "gpt-5-mini", "input": "The tallest tower?", "tools": [SEARCH]}
    content = "\n".join(
        _line(f"r{i}", "/v1/responses", body | {"input": f"q{i}"}) for i in range(2)
    )
    upload = oai.files.create(file=("in.jsonl", io.BytesIO(content.encode())), purpose="batch")
    batch = oai.batches.create(
        input_file_id=upload.id, endpoint="/v1/responses", completion_window="24h"
    )
    emu.advance_batch(batch.id)
    done = oai.batches.retrieve(batch.id)
    assert done.status == "completed" and done.output_file_id
    lines = [json.loads(x) for x in oai.files.content(done.output_file_id).text.splitlines()]
    assert {line["response"]["body"]["object"] for line in lines} == {"response"}
    for line in lines:
        items = line["response"]["body"]["output"]
        assert [i["type"] for i in items] == ["web_search_call", "message"]
        assert line["response"]["body"]["service_tier"] == "batch"
    assert emu.stats()["searches"]["openai"] == 2

    # One endpoint per file: a chat line in a /v1/responses batch fails it, naming the line.
    chat = {"model": "gpt-5-mini", "messages": [{"role": "user", "content": "hi"}]}
    mixed = _line("a", "/v1/responses", body) + "\n" + _line("b", "/v1/chat/completions", chat)
    upload = oai.files.create(file=("mixed.jsonl", io.BytesIO(mixed.encode())), purpose="batch")
    batch = oai.batches.create(
        input_file_id=upload.id, endpoint="/v1/responses", completion_window="24h"
    )
    emu.advance(BATCH_SECONDS / 4)
    failed = oai.batches.retrieve(batch.id)
    assert failed.status == "failed" and failed.errors and failed.errors.data
    (error,) = failed.errors.data
    assert error.line == 2 and "/v1/chat/completions" in (error.message or "")

"""Tools per record: OpenAI's web search through the Responses API, on the wire — the
``/v1/responses`` body a searching request becomes (live and as a batch line, from a
Request and from its stored text alike), and how a ``response`` reads (as a wire dict and
as the official SDK's own ``Response`` model): citations, searches, usage, stops, calls."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from openai.types.responses import Response as SdkResponse

from agac.errors import FatalError
from agac.media import Attachment
from agac.providers._batch_endpoint import batch_endpoint, one_endpoint
from agac.providers._common import dump_line
from agac.providers._responses_wire import read_response, responses_body
from agac.providers.base import (
    Message,
    ProviderSettings,
    Request,
    StoredRequests,
    ToolCall,
    ToolDef,
)
from agac.providers.openai import OpenAIProvider
from agac.providers.servertools import Citation, WebSearch

LOOKUP = ToolDef(
    "lookup",
    "Find an order.",
    {
        "type": "object",
        "properties": {"order_id": {"type": "string"}},
        "required": ["order_id"],
        "additionalProperties": False,
    },
)
SCHEMA: dict[str, Any] = {"type": "object", "properties": {"source": {"type": "string"}}}
SEARCH = WebSearch(2, ("who.int",), (), (("city", "Lyon"), ("country", "FR")))


def _request(**more: Any) -> Request:
    call = ToolCall("call_1", "lookup", '{"order_id": "A1"}')
    fields: dict[str, Any] = {
        "provider": "openai",
        "model": "gpt-5-mini",
        "messages": (
            Message("system", "Be brief."),
            Message("user", "Where is A1?"),
            Message("assistant", "Looking.", tool_calls=(call,)),
            Message("tool", '{"status": "shipped"}', tool_call_id="call_1", name="lookup"),
        ),
        "max_tokens": 300,
        "temperature": 0.2,
        "seed": 7,
        "schema": SCHEMA,
        "tools": (LOOKUP,),
        "web_search": SEARCH,
        "options": (("reasoning_effort", "low"),),
        "custom_id": "r0a1",
    }
    fields.update(more)
    return Request(**fields)


def test_i40_openai_responses_body_carries_the_search_and_the_conversation() -> None:
    body = responses_body(_request(), native=True, fallback=None)

    assert body["instructions"] == "Be brief."
    assert body["input"] == [
        {"role": "user", "content": "Where is A1?"},
        {"role": "assistant", "content": "Looking."},
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "lookup",
            "arguments": '{"order_id": "A1"}',
        },
        {"type": "function_call_output", "call_id": "call_1", "output": '{"status": "shipped"}'},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "name": "lookup",
            "description": "Find an order.",
            "parameters": LOOKUP.parameters,
            "strict": True,
        },
        {
            "type": "web_search",
            "filters": {"allowed_domains": ["who.int"]},
            "user_location": {"type": "approximate", "city": "Lyon", "country": "FR"},
        },
    ]
    assert body["max_tool_calls"] == 2 and body["max_output_tokens"] == 300
    assert body["store"] is False and "previous_response_id" not in body
    assert body["text"] == {
        "format": {"type": "json_schema", "name": "answer", "schema": SCHEMA, "strict": False}
    }
    assert body["reasoning"] == {"effort": "low"} and "reasoning_effort" not in body
    assert "seed" not in body and "messages" not in body
    # JSON mode: the schema told in the instructions.
    fallback = responses_body(_request(), native=False, fallback="Answer in JSON.")
    assert fallback["text"] == {"format": {"type": "json_object"}}
    assert fallback["instructions"] == "Answer in JSON."


def test_i40_openai_responses_batch_line_names_the_responses_endpoint() -> None:
    provider = OpenAIProvider(ProviderSettings("openai", api_key="sk-test"))
    searching, plain = _request(), _request(web_search=None, tools=(), custom_id="r1a1")
    stored = [(r.custom_id or "", r.canonical()) for r in (searching,)]

    line = json.loads(dump_line(provider._batch_line(searching)))
    assert line["url"] == "/v1/responses" and "input" in line["body"]
    assert json.loads(dump_line(provider._batch_line(plain)))["url"] == "/v1/chat/completions"
    # Written from the stored text, the same line.
    (from_store,) = list(provider._stored_lines(stored))
    assert isinstance(from_store, bytes) and json.loads(from_store) == line
    endpoint, again = batch_endpoint(StoredRequests(stored), provider._line_endpoint, "x")
    assert endpoint == "/v1/responses" and len(list(again)) == 1
    # A search model keeps Chat Completions: its batch is refused at validation.
    model = _request(model="gpt-4o-search-preview", tools=(), web_search=WebSearch())
    assert provider._line_endpoint(model) == "/v1/chat/completions"


def test_i40_openai_responses_one_endpoint_per_batch_file() -> None:
    provider = OpenAIProvider(ProviderSettings("openai", api_key="sk-test"))
    lines = list(provider._batch_lines([_request(), _request(web_search=None, custom_id="b")]))
    endpoint, _ = batch_endpoint([_request()], provider._line_endpoint, "x")
    checked = one_endpoint(lines, endpoint)
    assert next(checked)  # the Responses line
    with pytest.raises(FatalError, match="one batch file holds one endpoint"):
        next(checked)


ANSWER_TEXT = "The Burj Khalifa is the tallest."


def _wire(**more: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": "resp_1",
        "object": "response",
        "created_at": 1,
        "model": "gpt-5-mini-2025-08-07",
        "status": "completed",
        "incomplete_details": None,
        "error": None,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "output": [
            {
                "id": "ws_1",
                "type": "web_search_call",
                "status": "completed",
                "action": {"type": "search", "query": "tallest tower"},
            },
            {
                "id": "ws_2",
                "type": "web_search_call",
                "status": "completed",
                "action": {"type": "search", "query": "burj height"},
            },
            {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [
                    {
                        "type": "output_text",
                        "text": ANSWER_TEXT,
                        "annotations": [
                            {
                                "type": "url_citation",
                                "url": "https://who.int/a",
                                "title": "A",
                                "start_index": 4,
                                "end_index": 16,
                            },
                            {
                                "type": "url_citation",
                                "url": "https://who.int/a",
                                "title": "A",
                                "start_index": 4,
                                "end_index": 16,
                            },
                        ],
                    }
                ],
            },
        ],
        "usage": {
            "input_tokens": 1000,
            "input_tokens_details": {"cached_tokens": 200, "cache_write_tokens": 0},
            "output_tokens": 50,
            "output_tokens_details": {"reasoning_tokens": 20},
            "total_tokens": 1050,
        },
    }
    body.update(more)
    return body


@pytest.mark.parametrize("form", ["wire", "sdk"])
def test_i40_openai_responses_answer_reads_citations_searches_and_usage(form: str) -> None:
    body: Any = _wire() if form == "wire" else SdkResponse.model_validate(_wire())

    got = read_response(body, provider="openai", latency_ms=5.0, parse=False)

    assert got.stop_reason == "end" and got.text == ANSWER_TEXT
    assert got.citations == (Citation("https://who.int/a", "A", "Burj Khalifa"),)
    assert got.usage.server_tools == (("web_search", 2),)
    assert (got.usage.input_tokens, got.usage.cached_tokens) == (800, 200)
    assert (got.usage.output_tokens, got.usage.reasoning_tokens) == (50, 20)


def test_i40_openai_responses_answer_stops_and_calls() -> None:
    calls = [
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_9",
            "name": "lookup",
            "arguments": '{"order_id": "A1"}',
            "status": "completed",
        }
    ]
    asked = read_response(
        _wire(output=calls), provider="openai", latency_ms=0, offered=frozenset({"lookup"})
    )
    assert asked.stop_reason == "tool_use"
    assert asked.tool_calls == (ToolCall("call_9", "lookup", '{"order_id": "A1"}'),)
    unasked = read_response(_wire(output=calls), provider="openai", latency_ms=0)
    assert unasked.stop_reason == "unexpected" and not unasked.tool_calls
    cut = _wire(status="incomplete", incomplete_details={"reason": "max_output_tokens"})
    assert read_response(cut, provider="openai", latency_ms=0).stop_reason == "max_tokens"
    filtered = _wire(status="incomplete", incomplete_details={"reason": "content_filter"})
    assert read_response(filtered, provider="openai", latency_ms=0).stop_reason == (
        "content_filter"
    )
    failed = read_response(_wire(status="failed"), provider="openai", latency_ms=0)
    assert failed.stop_reason == "unexpected" and "'failed'" in (failed.stop_detail or "")
    refusal = [
        {
            "id": "msg_2",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "refusal", "refusal": "I can't help with that."}],
        }
    ]
    refused = read_response(_wire(output=refusal), provider="openai", latency_ms=0)
    assert refused.stop_reason == "refusal" and refused.refusal == "I can't help with that."


def _sha(path: Any) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_i40_openai_responses_body_sends_attachments_as_input_parts(tmp_path: Any) -> None:
    """A record's files go with its search: ``input_image`` (a data URL) and
    ``input_file`` (a PDF by name), beside an ``input_text`` part."""
    image, pdf = tmp_path / "a.png", tmp_path / "b.pdf"
    image.write_bytes(b"\x89PNG")
    pdf.write_bytes(b"%PDF-1.4")
    files = (
        Attachment("image/png", _sha(image), 4, str(image), "a.png"),
        Attachment("application/pdf", _sha(pdf), 8, str(pdf), "b.pdf"),
    )
    message = Message("user", "What do these show?", attachments=files)
    body = responses_body(
        _request(messages=(message,), tools=(), schema=None), native=True, fallback=None
    )

    (item,) = body["input"]
    assert [p["type"] for p in item["content"]] == ["input_image", "input_file", "input_text"]
    assert item["content"][0]["image_url"] == "data:image/png;base64,iVBORw=="
    assert item["content"][1]["filename"] == "b.pdf"
    assert item["content"][1]["file_data"].startswith("data:application/pdf;base64,")

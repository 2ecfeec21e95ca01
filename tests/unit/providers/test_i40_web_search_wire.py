"""Tools per record: the web search answers read on each wire. Gemini's from a response
recorded from the real API (tests/fixtures/recorded/gemini_grounding_usage.json: six
grounding supports over three web chunks); Anthropic's and OpenAI's as their SDKs' types
parse them (the shapes of ``anthropic.types`` and ``openai.types.chat``)."""

from __future__ import annotations

import json
from pathlib import Path

import anthropic.types as at
import openai.types.chat as ot

from agac.providers._anthropic_wire import message_response
from agac.providers._gemini_wire import content_response
from agac.providers._openai_compat import chat_response

RECORDED = Path(__file__).resolve().parents[2] / "fixtures" / "recorded"


def test_i40_web_search_gemini_grounding_of_a_recorded_answer() -> None:
    body = json.loads((RECORDED / "gemini_grounding_usage.json").read_text(encoding="utf-8"))
    grounding = body["candidates"][0]["groundingMetadata"]
    chunks = [c["web"] for c in grounding["groundingChunks"]]

    answer = content_response(body, latency_ms=1.0)

    cited = answer.citations
    # One citation per (segment, chunk) the supports name, each once, in the answer's order.
    expected = []
    for support in grounding["groundingSupports"]:
        for i in support["groundingChunkIndices"]:
            entry = (chunks[i]["uri"], chunks[i]["title"], support["segment"]["text"])
            if entry not in expected:
                expected.append(entry)
    assert [(c.url, c.title, c.cited_text) for c in cited] == expected
    assert {c.url for c in cited} == {c["uri"] for c in chunks}
    # gemini-2.5-pro bills the grounded prompt once, whatever its queries.
    assert answer.usage.server_tools == (("web_search", 1),)


def test_i40_web_search_anthropic_citations_from_sdk_types() -> None:
    cite = at.CitationsWebSearchResultLocation(
        type="web_search_result_location",
        url="https://www.toureiffel.paris/en",
        title="Eiffel Tower",
        cited_text="The tower is 330 metres tall.",
        encrypted_index="x",
    )
    message = at.Message.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": [
                {
                    "type": "server_tool_use",
                    "id": "srvtoolu_1",
                    "name": "web_search",
                    "input": {"query": "eiffel tower height"},
                },
                {
                    "type": "web_search_tool_result",
                    "tool_use_id": "srvtoolu_1",
                    "content": [
                        {
                            "type": "web_search_result",
                            "url": "https://www.toureiffel.paris/en",
                            "title": "Eiffel Tower",
                            "encrypted_content": "x",
                            "page_age": None,
                        }
                    ],
                },
                {"type": "text", "text": "It is ", "citations": None},
                {"type": "text", "text": "330 m tall.", "citations": [cite.model_dump()]},
                {"type": "text", "text": " Yes.", "citations": [cite.model_dump()]},
            ],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {
                "input_tokens": 2000,
                "output_tokens": 20,
                "server_tool_use": {"web_search_requests": 1, "web_fetch_requests": 0},
            },
        }
    )

    answer = message_response(message, latency_ms=1.0)

    assert answer.text == "It is 330 m tall. Yes."
    assert [(c.url, c.title, c.cited_text) for c in answer.citations] == [
        ("https://www.toureiffel.paris/en", "Eiffel Tower", "The tower is 330 metres tall.")
    ]
    assert answer.usage.server_tools == (("web_search", 1),)


def test_i40_web_search_openai_url_citations_from_sdk_types() -> None:
    text = "The Eiffel Tower is 330 m tall (toureiffel.paris)."
    completion = ot.ChatCompletion.model_validate(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1,
            "model": "gpt-4o-search-preview",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {
                        "role": "assistant",
                        "content": text,
                        "annotations": [
                            {
                                "type": "url_citation",
                                "url_citation": {
                                    "url": "https://www.toureiffel.paris/en",
                                    "title": "Eiffel Tower",
                                    "start_index": 0,
                                    "end_index": 30,
                                },
                            }
                        ],
                    },
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 12, "total_tokens": 22},
        }
    )

    answer = chat_response(completion, provider="openai", latency_ms=1.0, searched=True)

    ((url, title, span),) = [(c.url, c.title, c.cited_text) for c in answer.citations]
    assert (url, title, span) == ("https://www.toureiffel.paris/en", "Eiffel Tower", text[:30])
    assert answer.usage.server_tools == (("web_search", 1),)

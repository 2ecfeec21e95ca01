"""Tools per record, web search on Groq's wire: how a request offers it (browser search as
a GPT-OSS model's tool; a Compound system's ``search_settings`` and enabled tools) and how
an answer's ``executed_tools`` read — its searches and page visits as the uses Groq bills,
their sources as the answer's citations — from a batch line's JSON and from the ``groq``
SDK's typed completion alike; and what each use costs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from groq.types.chat import ChatCompletion

from agac.providers._openai_compat import chat_response
from agac.providers._search_wire import executed_citations, executed_counts, groq_web_search
from agac.providers.base import Usage
from agac.providers.pricing import PriceLibrary, PriceTable
from agac.providers.servertools import Citation, WebSearch


def _tool(i: int, kind: str, **fields: Any) -> dict[str, Any]:
    return {"index": i, "type": kind, "arguments": '{"query": "q"}', "output": "...", **fields}


def _results(*urls: str) -> dict[str, Any]:
    return {
        "results": [
            {"title": f"T {u}", "url": u, "content": f"about {u}", "score": 0.5} for u in urls
        ]
    }


BROWSED = [
    _tool(0, "browser.search", search_results=_results("https://a.org/1", "https://b.org/2")),
    _tool(
        1,
        "browser.open",
        browser_results=[{"title": "Page", "url": "https://a.org/1", "content": "page text"}],
    ),
    _tool(2, "browser.search", search_results=_results("https://c.org/3")),
    _tool(3, "browser.open", browser_results=[{"title": "C", "url": "https://c.org/9"}]),
]
COMPOUND = [
    _tool(0, "search", search_results=_results("https://who.int/x")),
    _tool(1, "visit", browser_results=[{"title": "W", "url": "https://who.int/y"}]),
    _tool(2, "python", code_results=[{"text": "4"}]),
]


def _completion(executed: list[dict[str, Any]], model: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": model,
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {
                    "role": "assistant",
                    "content": "The answer.",
                    "annotations": [],
                    "executed_tools": executed,
                },
            }
        ],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
    }


def test_i40_groq_web_search_offered_in_groqs_form() -> None:
    assert groq_web_search("openai/gpt-oss-120b", WebSearch()) == {
        "tools": [{"type": "browser_search"}]
    }
    narrow = WebSearch(None, ("who.int",), (), (("country", "United States"),))
    assert groq_web_search("groq/compound", narrow) == {
        "compound_custom": {"tools": {"enabled_tools": ["web_search", "visit_website"]}},
        "search_settings": {"include_domains": ["who.int"], "country": "united states"},
    }
    assert groq_web_search("groq/compound-mini", WebSearch(None, (), ("x.com",)))[
        "search_settings"
    ] == {"exclude_domains": ["x.com"]}


def test_i40_groq_web_search_counts_searches_and_visits_as_billed() -> None:
    assert executed_counts(BROWSED) == (("visit_website", 2), ("web_search", 2))
    # Code execution is billed by the hour, which no answer reports: not a use here.
    assert executed_counts(COMPOUND) == (("visit_website", 1), ("web_search", 1))
    assert executed_counts(None) == ()


def test_i40_groq_web_search_citations_are_the_sources_each_once() -> None:
    assert executed_citations(BROWSED) == (
        Citation("https://a.org/1", "T https://a.org/1", "about https://a.org/1"),
        Citation("https://b.org/2", "T https://b.org/2", "about https://b.org/2"),
        Citation("https://c.org/3", "T https://c.org/3", "about https://c.org/3"),
        Citation("https://c.org/9", "C", None),
    )


def test_i40_groq_web_search_answer_reads_alike_from_a_batch_line_and_the_sdk() -> None:
    body = _completion(BROWSED, "openai/gpt-oss-120b")
    from_line = chat_response(body, provider="groq", latency_ms=1.0, wire=True)
    typed = ChatCompletion.model_validate(body)
    from_sdk = chat_response(typed, provider="groq", latency_ms=1.0)
    for r in (from_line, from_sdk):
        assert r.text == "The answer."
        assert r.usage.server_tools == (("visit_website", 2), ("web_search", 2))
        assert [c.url for c in r.citations] == [
            "https://a.org/1",
            "https://b.org/2",
            "https://c.org/3",
            "https://c.org/9",
        ]
    # An answer that ran no tool bills none and cites nothing.
    plain = chat_response(_completion([], "openai/gpt-oss-120b"), provider="groq", latency_ms=1)
    assert plain.usage.server_tools == () and plain.citations == ()


def test_i40_groq_web_search_prices_each_search_and_visit(tmp_path: Path) -> None:
    table = PriceTable(
        {"groq/groq/compound": {"input": 0.15, "output": 0.6}},
        library=PriceLibrary(tmp_path),
    )
    browser = table.get("groq/openai/gpt-oss-120b")
    compound = table.get("groq/groq/compound")
    assert browser is not None and compound is not None
    assert dict(browser.tools) == {"visit_website": 0.001, "web_search": 0.005}
    # agac.yml prices the Compound system's tokens; its tools keep agac's fees.
    assert dict(compound.tools) == {"visit_website": 0.001, "web_search": 0.008}
    used = Usage(0, 0, server_tools=(("visit_website", 3), ("web_search", 2)))
    assert table.cost("groq/openai/gpt-oss-120b", used) == pytest.approx(0.013)
    # Never discounted with a batch's tokens.
    assert table.cost("groq/openai/gpt-oss-120b", used, "batch") == pytest.approx(0.013)
    own = PriceTable({"groq/groq/compound": {"input": 0.15, "output": 0.6, "web_search": 10}})
    assert dict(own.get("groq/groq/compound").tools)["web_search"] == 0.01  # type: ignore[union-attr]

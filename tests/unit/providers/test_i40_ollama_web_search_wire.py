"""Tools per record, web search for Ollama actions: the pieces agac runs a search with —
the ``web_search`` function's arguments, Ollama's search answer read into hits, the
domain filters applied to them and a hit as a citation."""

from __future__ import annotations

import pytest

from agac.errors import RetryableError
from agac.providers._ollama_search import CONTENT_CHARS, read_hits
from agac.providers.ollama import OllamaProvider
from agac.providers.servertools import (
    CITED_CHARS,
    SearchHit,
    SupportsWebSearch,
    WebSearch,
    domain_allowed,
    hit_citation,
)
from agac.tools.websearch import SEARCH_DEF, SearchAsked, read_search_call


def test_i40_ollama_web_search_reads_the_calls_arguments() -> None:
    assert read_search_call('{"query": " tallest tower "}') == SearchAsked("tallest tower", 5)
    assert read_search_call('{"query": "x", "max_results": 10}') == SearchAsked("x", 10)
    for bad, why in [
        ("not json", "not JSON"),
        ("[1]", "JSON object"),
        ('{"query": ""}', "non-empty string"),
        ('{"q": "x"}', "non-empty string"),
        ('{"query": "x", "max_results": 11}', "from 1 to 10"),
        ('{"query": "x", "max_results": true}', "from 1 to 10"),
    ]:
        found = read_search_call(bad)
        assert isinstance(found, str) and why in found, (bad, found)
    assert SEARCH_DEF.name == "web_search"
    assert SEARCH_DEF.parameters["required"] == ["query"]


def test_i40_ollama_web_search_answer_becomes_hits() -> None:
    long = "x" * (CONTENT_CHARS + 50)
    hits = read_hits(
        {
            "results": [
                {"title": "A", "url": "https://a.example/1", "content": long},
                {"title": "no address", "content": "dropped"},
                "not a result",
                {"url": "https://b.example/2"},
            ]
        }
    )
    assert hits == (
        SearchHit("https://a.example/1", "A", "x" * CONTENT_CHARS),
        SearchHit("https://b.example/2", None, None),
    )
    assert read_hits({"results": []}) == ()
    with pytest.raises(RetryableError, match="no results list"):
        read_hits({"error": "gateway"})


def test_i40_ollama_web_search_domain_filters_match_hosts_and_subdomains() -> None:
    allowed = WebSearch(allowed_domains=("who.int",))
    assert domain_allowed("https://who.int/a", allowed)
    assert domain_allowed("https://www.WHO.int/a", allowed)
    assert not domain_allowed("https://notwho.int/a", allowed)
    assert not domain_allowed("https://who.int.evil.example/a", allowed)
    blocked = WebSearch(blocked_domains=("spam.example",))
    assert not domain_allowed("https://x.spam.example/", blocked)
    assert domain_allowed("https://ham.example/", blocked)
    assert domain_allowed("https://anything.example/", WebSearch())


def test_i40_ollama_web_search_hit_as_citation_and_the_adapter_searches() -> None:
    cited = hit_citation(SearchHit("https://a.example/", "A", "y" * (CITED_CHARS + 10)))
    assert cited.url == "https://a.example/" and cited.title == "A"
    assert cited.cited_text == "y" * CITED_CHARS + "…"
    assert hit_citation(SearchHit("https://a.example/", "", "  ")).cited_text is None
    spec = OllamaProvider.spec.web_search
    assert spec is not None and spec.in_loop and spec.key_env == ("OLLAMA_API_KEY",)
    assert "user_location" not in spec.options
    assert issubclass(OllamaProvider, SupportsWebSearch)

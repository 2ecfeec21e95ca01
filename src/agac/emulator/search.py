"""The emulator's web search: what a request offering the provider's search finds.

Deterministic and offline: a request offering web search makes one search (or the
number its prompt asks for with ``[[emulator searches: N]]``, at most its ``max_uses``),
each finding one source whose address is derived from the request (on its first
``allowed_domains`` entry when it has one, never on a ``blocked_domains`` one). Each
provider module renders the searches in its protocol — Anthropic's ``server_tool_use``
and ``web_search_tool_result`` blocks with citations on the text, OpenAI's
``url_citation`` annotations, Gemini's ``groundingMetadata``, Groq's ``executed_tools``
— and counts them for the bill (:attr:`Stats.searches <agac.emulator.state.Stats.searches>`).

Groq searches when a GPT-OSS model is offered ``browser_search``, and a Compound system
(``groq/compound…``) whenever its enabled tools include ``web_search`` (all of them by
default), within its ``search_settings`` domains; ``groq/compound-mini`` makes one tool
call a request.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Source",
    "WebSearchAsked",
    "anthropic_asked",
    "billed_searches",
    "executed_tools",
    "find_sources",
    "gemini_asked",
    "groq_asked",
    "groq_refusal",
    "openai_asked",
    "url_annotations",
]

_SEARCHES = re.compile(r"\[\[emulator searches: (\d+)\]\]")


@dataclass(frozen=True)
class WebSearchAsked:
    """A request's web search as its provider's wire offered it."""

    max_uses: int | None = None
    allowed_domains: tuple[str, ...] = ()
    blocked_domains: tuple[str, ...] = ()
    every_turn: bool = False
    """The model searches on a turn that calls functions too (OpenAI's Responses API);
    else only on the turn that answers."""


@dataclass(frozen=True)
class Source:
    """One source a search found: its query, address, title and the passage cited."""

    query: str
    url: str
    title: str
    passage: str


def find_sources(asked: WebSearchAsked, prompt_texts: list[str], digest: str) -> tuple[Source, ...]:
    """The sources of a request's searches, one per search, in order."""
    wanted = [int(m.group(1)) for t in prompt_texts for m in _SEARCHES.finditer(t)]
    n = wanted[0] if wanted else 1
    if asked.max_uses is not None:
        n = min(n, asked.max_uses)
    domain = asked.allowed_domains[0] if asked.allowed_domains else "example.com"
    if domain in asked.blocked_domains:
        domain = "example.org"
    return tuple(
        Source(
            f"emulated query {i}",
            f"https://{domain}/emulated/{digest[:8]}/{i}",
            f"Emulated source {i}",
            f"Emulated passage {i} of {domain}.",
        )
        for i in range(1, n + 1)
    )


def billed_searches(provider: str, model: str, sources: tuple[Source, ...]) -> int:
    """The searches a provider bills for an answer's: OpenAI one per call of a search
    model (each ``web_search_call`` of the Responses API), Gemini before 3 one per
    grounded prompt, the others (and Gemini 3) each."""
    if not sources:
        return 0
    if provider in ("openai", "azure") and "search" in model:
        return 1
    if provider in ("gemini", "vertex") and not model.startswith("gemini-3"):
        return 1
    return len(sources)


def gemini_asked(tools: Any) -> WebSearchAsked | None:
    """A GenerateContentRequest's Google Search grounding tool, or None."""
    for t in tools or ():
        if isinstance(t, dict) and ("googleSearch" in t or "google_search" in t):
            return WebSearchAsked()
    return None


def openai_asked(body: Any) -> WebSearchAsked | None:
    """A chat completion's ``web_search_options``, or None."""
    if isinstance(body, dict) and isinstance(body.get("web_search_options"), dict):
        return WebSearchAsked()
    return None


def anthropic_asked(tools: Any) -> WebSearchAsked | None:
    """A Messages body's web search tool (``type: web_search_…``), or None."""
    for t in tools or ():
        if isinstance(t, dict) and str(t.get("type", "")).startswith("web_search_"):
            return WebSearchAsked(
                t.get("max_uses"),
                tuple(t.get("allowed_domains") or ()),
                tuple(t.get("blocked_domains") or ()),
            )
    return None


def url_annotations(sources: tuple[Source, ...], content: Any) -> list[dict[str, Any]]:
    """A search model's ``url_citation`` annotations: each source cited for the whole
    answer (``start_index``/``end_index`` in characters)."""
    if not isinstance(content, str):
        return []
    return [
        {
            "type": "url_citation",
            "url_citation": {
                "url": s.url,
                "title": s.title,
                "start_index": 0,
                "end_index": len(content),
            },
        }
        for s in sources
    ]


def groq_asked(body: Any, model: str) -> WebSearchAsked | None:
    """A Groq chat body's search: ``browser_search`` among its tools, or a Compound
    system's web search (within its ``search_settings``), or None."""
    if not isinstance(body, dict):
        return None
    tools = [t for t in body.get("tools") or () if isinstance(t, dict)]
    if any(t.get("type") == "browser_search" for t in tools):
        return WebSearchAsked()
    if not model.startswith("groq/compound"):
        return None
    enabled = ((body.get("compound_custom") or {}).get("tools") or {}).get("enabled_tools")
    if enabled is not None and "web_search" not in enabled:
        return None
    settings = body.get("search_settings") or {}
    return WebSearchAsked(
        1 if model.startswith("groq/compound-mini") else None,
        tuple(settings.get("include_domains") or ()),
        tuple(settings.get("exclude_domains") or ()),
    )


def executed_tools(sources: tuple[Source, ...], model: str) -> list[dict[str, Any]]:
    """A Groq message's ``executed_tools``: one search per source (a Compound system's
    ``search``, a GPT-OSS model's ``browser.search``), its result the source."""
    kind = "search" if model.startswith("groq/compound") else "browser.search"
    return [
        {
            "index": i,
            "type": kind,
            "arguments": json.dumps({"query": s.query}),
            "output": f"Title: {s.title}\nURL: {s.url}\nContent: {s.passage}",
            "search_results": {
                "results": [{"title": s.title, "url": s.url, "content": s.passage, "score": 0.9}]
            },
        }
        for i, s in enumerate(sources)
    ]


def groq_refusal(body: Any, model: str) -> str | None:
    """Why Groq refuses a chat body's search with a 400, or None: browser search on a
    model other than GPT-OSS, or beside structured outputs (a JSON schema)."""
    if not isinstance(body, dict):
        return None
    tools = [t for t in body.get("tools") or () if isinstance(t, dict)]
    if not any(t.get("type") == "browser_search" for t in tools):
        return None
    if not model.startswith("openai/gpt-oss"):
        return f"browser_search is not supported with model {model}"
    if (body.get("response_format") or {}).get("type") == "json_schema":
        return "browser_search is not supported with structured outputs (json_schema)"
    return None

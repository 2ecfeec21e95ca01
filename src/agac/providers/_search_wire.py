"""The provider's web search on each wire: how a request offers it and how an answer's
citations read.

Anthropic: a server tool ``{type: web_search_20250305, name: web_search}`` with
``max_uses``, ``allowed_domains``/``blocked_domains`` and an ``approximate``
``user_location``; the answer's text blocks carry ``citations`` of type
``web_search_result_location`` (``url``, ``title``, ``cited_text``), its searches are
``server_tool_use`` and ``web_search_tool_result`` blocks and
``usage.server_tool_use.web_search_requests``.

OpenAI (Chat Completions): ``web_search_options`` on a search model (only
``user_location`` as an option); the message's ``annotations`` of type
``url_citation`` (``url``, ``title``, ``start_index``/``end_index`` into the content).
Each call is one billed search.

Gemini: a ``googleSearch`` Tool (no options on the Gemini API); the candidate's
``groundingMetadata``: ``webSearchQueries``, ``groundingChunks`` (``web.uri``,
``web.title``) and ``groundingSupports`` (a ``segment`` of the answer and the chunks
that support it). Gemini 3 bills each query, earlier models each grounded prompt.

Groq: ``tools: [{type: browser_search}]`` on its GPT-OSS models (no options); its
Compound systems (``groq/compound``, ``groq/compound-mini``) search by themselves, with
``search_settings`` (``include_domains``, ``exclude_domains``, ``country``: a country's
name) and the tools they may use in ``compound_custom.tools.enabled_tools``. Either way
the message's ``executed_tools`` list what ran: each search (``browser.search``,
Compound's ``search``) with its ``search_results.results`` (``url``, ``title``,
``content``), each page visit (``browser.open``, Compound's ``visit``) with its
``browser_results``. Groq bills each search and each visit.
"""

from __future__ import annotations

from typing import Any

from agac.providers._common import pick
from agac.providers.servertools import Citation, WebSearch, distinct_citations

__all__ = [
    "COMPOUND_TOOLS",
    "PER_QUERY",
    "anthropic_web_search",
    "executed_citations",
    "executed_counts",
    "gemini_schema_with_search",
    "groq_compound",
    "groq_web_search",
    "grounding_citations",
    "openai_web_search_options",
    "url_citations",
]


def anthropic_web_search(search: WebSearch) -> dict[str, Any]:
    """The web search as Anthropic's server tool (``web_search_20250305``): its options
    as the tool's fields, the location ``approximate``."""
    tool: dict[str, Any] = {"type": "web_search_20250305", "name": "web_search"}
    tool.update({k: v for k, v in search.to_dict().items() if k != "user_location"})
    if search.user_location:
        tool["user_location"] = {"type": "approximate", **dict(search.user_location)}
    return tool


def openai_web_search_options(search: WebSearch) -> dict[str, Any]:
    """The web search as a search model's ``web_search_options``: its user location
    ``approximate`` (the only option Chat Completions takes)."""
    if not search.user_location:
        return {}
    return {"user_location": {"type": "approximate", "approximate": dict(search.user_location)}}


def url_citations(annotations: Any, text: str) -> tuple[Citation, ...]:
    """A message's ``url_citation`` annotations as citations, each with the span of the
    answer it supports (``start_index``/``end_index``, characters of the content)."""
    if not annotations:
        return ()
    out = []
    for a in annotations or ():
        cited = pick(a, "url_citation")
        url = pick(cited, "url")
        if pick(a, "type") != "url_citation" or not url:
            continue
        start, end = pick(cited, "start_index"), pick(cited, "end_index")
        span = text[start:end] if isinstance(start, int) and isinstance(end, int) else ""
        title = pick(cited, "title")
        out.append(Citation(str(url), str(title) if title else None, span or None))
    return distinct_citations(out)


def gemini_schema_with_search(model: str) -> bool:
    """Gemini 3 answers in a JSON schema while it grounds; earlier models refuse it
    ("controlled generation is not supported with google_search tool")."""
    return "gemini-3" in model


PER_QUERY = ("gemini-3",)
"""Models whose Google Search grounding is billed per search query; earlier ones are
billed per grounded prompt (one a call, however many queries it made)."""


def grounding_citations(grounding: Any) -> tuple[Citation, ...]:
    """A candidate's ``groundingMetadata`` as citations: each ``groundingSupports`` entry's
    segment of the answer (``segment.text``) with every web source it names
    (``groundingChunkIndices`` into ``groundingChunks``), then the sources no segment
    names."""
    chunks = [pick(c, "web") for c in pick(grounding, "grounding_chunks") or ()]
    found: list[Citation] = []
    for support in pick(grounding, "grounding_supports") or ():
        text = pick(support, "segment", "text")
        for i in pick(support, "grounding_chunk_indices") or ():
            if isinstance(i, int) and 0 <= i < len(chunks) and pick(chunks[i], "uri"):
                found.append(_web_citation(chunks[i], str(text) if text else None))
    found += [_web_citation(c, None) for c in chunks if pick(c, "uri")]
    named = {c.url for c in found if c.cited_text is not None}
    return distinct_citations(c for c in found if c.cited_text is not None or c.url not in named)


def _web_citation(web: Any, text: str | None) -> Citation:
    title = pick(web, "title")
    return Citation(str(pick(web, "uri")), str(title) if title else None, text)


COMPOUND_TOOLS = ("web_search", "visit_website")
"""The tools agac lets a Compound system use when an action searches: those billed per
request (code execution and browser automation are billed by the hour, which no answer
reports)."""


def groq_compound(model: str) -> bool:
    """A Groq Compound system (``groq/compound``, ``groq/compound-mini``)."""
    return model.startswith("groq/compound")


def groq_web_search(model: str, search: WebSearch) -> dict[str, Any]:
    """The request fields that offer Groq's search: ``browser_search`` for a GPT-OSS
    model (to add to its ``tools``, under the key ``tools``), or a Compound system's
    ``search_settings`` and the tools it may use."""
    if not groq_compound(model):
        return {"tools": [{"type": "browser_search"}]}
    out: dict[str, Any] = {"compound_custom": {"tools": {"enabled_tools": list(COMPOUND_TOOLS)}}}
    settings: dict[str, Any] = {}
    if search.allowed_domains:
        settings["include_domains"] = list(search.allowed_domains)
    if search.blocked_domains:
        settings["exclude_domains"] = list(search.blocked_domains)
    country = dict(search.user_location).get("country")
    if country:
        settings["country"] = country.lower()
    if settings:
        out["search_settings"] = settings
    return out


def _kind(tool: Any) -> str | None:
    """``web_search`` for a search Groq ran, ``visit_website`` for a page it opened."""
    kind = str(pick(tool, "type") or "")
    if kind.endswith("search"):
        return "web_search"
    if kind.startswith("visit") or kind == "browser.open":
        return "visit_website"
    return None


def executed_counts(executed: Any) -> tuple[tuple[str, int], ...]:
    """A Groq message's ``executed_tools`` as the uses Groq bills: its searches
    (``web_search``) and page visits (``visit_website``), sorted by name."""
    counts: dict[str, int] = {}
    for tool in executed or ():
        kind = _kind(tool)
        if kind is not None:
            counts[kind] = counts.get(kind, 0) + 1
    return tuple(sorted(counts.items()))


def executed_citations(executed: Any) -> tuple[Citation, ...]:
    """The sources of a Groq message's ``executed_tools``: each search's results and each
    visited page, in order, each once; ``cited_text`` is the passage Groq gave the model
    (a result's ``content``)."""
    found: list[Citation] = []
    seen: set[str] = set()
    for tool in executed or ():
        results = pick(tool, "search_results", "results") or ()
        for r in [*results, *(pick(tool, "browser_results") or ())]:
            url = pick(r, "url")
            if url and str(url) not in seen:
                seen.add(str(url))
                title, text = pick(r, "title"), pick(r, "content")
                found.append(
                    Citation(str(url), str(title) if title else None, str(text) if text else None)
                )
    return tuple(found)

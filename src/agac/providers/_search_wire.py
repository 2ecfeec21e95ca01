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
"""

from __future__ import annotations

from typing import Any

from agac.providers._common import pick
from agac.providers.servertools import Citation, WebSearch, distinct_citations

__all__ = [
    "PER_QUERY",
    "anthropic_web_search",
    "gemini_schema_with_search",
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

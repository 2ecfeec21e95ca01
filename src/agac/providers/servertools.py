"""The providers' own tools (server tools), provider-neutral: the web search a request
offers (:class:`WebSearch`), the sources an answer cites (:class:`Citation`) and the
uses a provider bills (:func:`server_tool_counts`). Each adapter's wire form of the web
search is in ``_search_wire``.

A provider whose models have no search of their own but whose service offers a search
API (Ollama) has agac run it: the model is offered a ``web_search`` function
(:data:`SEARCH_TOOL`), each call is a turn of the record's tool loop, its hits
(:class:`SearchHit`) are what the model reads and what the answer cites.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urlsplit

__all__ = [
    "MAX_RESULTS",
    "SEARCH_TOOL",
    "Citation",
    "SearchHit",
    "SupportsWebSearch",
    "WebSearch",
    "distinct_citations",
    "domain_allowed",
    "hit_citation",
    "server_tool_counts",
]

MAX_RESULTS = 10
"""The most results one search of a search API agac runs returns (Ollama's bound)."""

SEARCH_TOOL = "web_search"
"""The name of the function a model is offered when agac runs the search itself."""


@dataclass(frozen=True, slots=True)
class WebSearch:
    """The provider's own web search offered to the model (an action's ``tools:
    [web_search]``): at most ``max_uses`` searches per request (None: the provider's
    bound), results only from ``allowed_domains`` or never from ``blocked_domains``, and
    an approximate ``user_location`` (``city``, ``region``, ``country``, ``timezone``
    pairs). Which of these a provider takes is its spec's (:class:`WebSearchSpec
    <agac.providers.spec.WebSearchSpec>`). Part of the request's canonical form."""

    max_uses: int | None = None
    allowed_domains: tuple[str, ...] = ()
    blocked_domains: tuple[str, ...] = ()
    user_location: tuple[tuple[str, str], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.max_uses is not None:
            out["max_uses"] = self.max_uses
        if self.allowed_domains:
            out["allowed_domains"] = list(self.allowed_domains)
        if self.blocked_domains:
            out["blocked_domains"] = list(self.blocked_domains)
        if self.user_location:
            out["user_location"] = dict(self.user_location)
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> WebSearch:
        return cls(
            d.get("max_uses"),
            tuple(d.get("allowed_domains") or ()),
            tuple(d.get("blocked_domains") or ()),
            tuple(sorted((str(k), str(v)) for k, v in (d.get("user_location") or {}).items())),
        )


@dataclass(frozen=True, slots=True)
class Citation:
    """A source the answer cites from the provider's web search: its ``url``, its
    ``title`` and the text it supports (``cited_text``: Anthropic's quoted passage, the
    answer's span for OpenAI and Gemini), each None where the provider gives none."""

    url: str
    title: str | None = None
    cited_text: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"url": self.url, "title": self.title, "cited_text": self.cited_text}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Citation:
        return cls(str(d["url"]), d.get("title"), d.get("cited_text"))


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One result of a search agac ran for the model: the page's ``url``, its ``title``
    and the ``content`` the search service gives of it (a passage or a summary)."""

    url: str
    title: str | None = None
    content: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"url": self.url, "title": self.title, "content": self.content}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SearchHit:
        return cls(str(d["url"]), d.get("title"), d.get("content"))


@runtime_checkable
class SupportsWebSearch(Protocol):
    """A provider whose service has a search API that agac runs for its models (its spec's
    ``web_search.in_loop``): one search of ``query``, at most ``max_results`` hits, within
    ``timeout`` seconds; a ProviderError when the search fails."""

    async def search_web(
        self, query: str, max_results: int, timeout: float | None
    ) -> tuple[SearchHit, ...]: ...


CITED_CHARS = 500
"""How much of a hit's content a citation keeps as its ``cited_text``."""


def hit_citation(hit: SearchHit) -> Citation:
    """A search hit as a citation: its content's first :data:`CITED_CHARS` characters are
    the cited text."""
    text = (hit.content or "").strip()
    if len(text) > CITED_CHARS:
        text = text[:CITED_CHARS].rstrip() + "…"
    return Citation(hit.url, hit.title or None, text or None)


def domain_allowed(url: str, search: WebSearch) -> bool:
    """Whether a hit's address passes the search's domain filters: its host is one of
    ``allowed_domains`` or below one (when any is given), and neither is it nor is it below
    any of ``blocked_domains``."""
    host = (urlsplit(url).hostname or "").lower().rstrip(".")

    def under(domain: str) -> bool:
        d = domain.lower().strip().strip(".")
        return host == d or host.endswith("." + d)

    if search.allowed_domains and not any(under(d) for d in search.allowed_domains):
        return False
    return not any(under(d) for d in search.blocked_domains)


def distinct_citations(found: Iterable[Citation]) -> tuple[Citation, ...]:
    """Citations in the order first given, each once."""
    return tuple(dict.fromkeys(c for c in found if c.url))


def server_tool_counts(counts: Any) -> tuple[tuple[str, int], ...]:
    """``{name: count}`` (or pairs) as :attr:`Usage.server_tools`: positive counts, sorted."""
    items = counts.items() if isinstance(counts, dict) else counts or ()
    return tuple(sorted((str(k), int(v)) for k, v in items if int(v or 0) > 0))

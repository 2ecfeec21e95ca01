"""The providers' own tools (server tools), provider-neutral: the web search a request
offers (:class:`WebSearch`), the sources an answer cites (:class:`Citation`) and the
uses a provider bills (:func:`server_tool_counts`). Each adapter's wire form of the web
search is in ``_search_wire``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["Citation", "WebSearch", "distinct_citations", "server_tool_counts"]


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


def distinct_citations(found: Iterable[Citation]) -> tuple[Citation, ...]:
    """Citations in the order first given, each once."""
    return tuple(dict.fromkeys(c for c in found if c.url))


def server_tool_counts(counts: Any) -> tuple[tuple[str, int], ...]:
    """``{name: count}`` (or pairs) as :attr:`Usage.server_tools`: positive counts, sorted."""
    items = counts.items() if isinstance(counts, dict) else counts or ()
    return tuple(sorted((str(k), int(v)) for k, v in items if int(v or 0) > 0))

"""Ollama's web search API, which agac runs for an Ollama action's ``tools: [web_search]``
(docs/providers.md, Ollama: web search).

``POST https://ollama.com/api/web_search`` with ``{"query", "max_results"}`` (``max_results``
at most 10) and ``Authorization: Bearer <OLLAMA_API_KEY>``; the answer is ``{"results":
[{"title", "url", "content"}]}`` — the ollama SDK's ``WebSearchRequest`` and
``WebSearchResponse``. The SDK's ``web_search`` posts to that address whatever host its
client has, so agac sends the request itself, on its own HTTP client whichever transport
the action's chat uses, to the endpoint its settings name: ``providers: ollama:
web_search_url``, else ``OLLAMA_WEB_SEARCH_URL``, else Ollama's. The endpoint is the
project's configuration, never a record's. An error answer is ``{"error": "…"}`` as on
Ollama's other endpoints. Each hit's content is kept to :data:`CONTENT_CHARS` characters
(what the model reads and what is stored).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from agac.errors import ProviderError, RetryableError, UnsupportedError
from agac.providers._errors import classify
from agac.providers._http import HttpSession
from agac.providers.base import ProviderSettings
from agac.providers.servertools import MAX_RESULTS, SearchHit

__all__ = ["CONTENT_CHARS", "DEFAULT_URL", "KEY_ENV", "URL_ENV", "OllamaWebSearch", "read_hits"]

DEFAULT_URL = "https://ollama.com/api/web_search"
URL_ENV = "OLLAMA_WEB_SEARCH_URL"
KEY_ENV = ("OLLAMA_API_KEY",)
CONTENT_CHARS = 4000
"""The most characters of a hit's content kept (a page's text can be long; a local
model's context is not)."""


class OllamaWebSearch:
    """One adapter's client of Ollama's web search API: its endpoint, read once from the
    settings; its HTTP session, opened at the first search."""

    def __init__(self, settings: ProviderSettings) -> None:
        configured = settings.options.get("web_search_url")
        self.url = str(configured or os.environ.get(URL_ENV) or DEFAULT_URL)
        self._http: HttpSession | None = None

    async def search(
        self, query: str, max_results: int, timeout: float | None
    ) -> tuple[SearchHit, ...]:
        """One search; UnsupportedError ``missing_credentials`` without a key, else the
        provider's error of a failed answer (a lost connection or a timeout retryable)."""
        key = next((v for name in KEY_ENV if (v := os.environ.get(name))), None)
        if key is None:
            raise UnsupportedError(
                f"Ollama's web search API needs a key: set {' or '.join(KEY_ENV)} "
                "(an Ollama account's API key)",
                code="missing_credentials",
            )
        if self._http is None:
            self._http = HttpSession("ollama", {})
        body = {"query": query, "max_results": max(1, min(MAX_RESULTS, max_results))}
        answer = await self._http.post(
            self.url,
            body,
            errors=_status_error,
            timeout=timeout,
            headers={"Authorization": f"Bearer {key}"},
        )
        return read_hits(answer)

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()


def read_hits(answer: Any) -> tuple[SearchHit, ...]:
    """``{"results": [...]}`` as hits, in order, those without a ``url`` left out; an
    answer of another shape (a proxy's page) is retryable, as a chat answer's is."""
    results = answer.get("results") if isinstance(answer, dict) else None
    if not isinstance(results, list):
        raise RetryableError(
            f"ollama: the web search answer has no results list: {str(answer)[:200]}"
        )
    hits = []
    for r in results:
        if not isinstance(r, dict) or not r.get("url"):
            continue
        content = r.get("content")
        text = str(content)[:CONTENT_CHARS] if content else None
        title = r.get("title")
        hits.append(SearchHit(str(r["url"]), str(title) if title else None, text))
    return tuple(hits)


def _status_error(status: int, headers: Mapping[str, str], body: Any, text: str) -> ProviderError:
    message = body.get("error", text) if isinstance(body, dict) else text
    return classify("ollama", status if status > 0 else None, message=f"web search: {message}")

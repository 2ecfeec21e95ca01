"""What a provider's server tools cost per use: genai-prices' price of each (read from
its model price), agac's own web search fees for the models it prices none of, and a
project's ``prices: <model>: web_search:`` (USD per 1,000 searches), which wins over
both. docs/providers.md lists the fees with each provider's billing rule.
"""

from __future__ import annotations

from typing import Any

__all__ = ["SEARCH_FEES", "VISIT_FEES", "own_fees", "project_tools", "search_fee", "tool_rates"]

SEARCH_FEES: tuple[tuple[str, float], ...] = (
    # OpenAI bills each call of a Chat Completions search model as one web search.
    ("openai/gpt-5-search-api", 0.01),
    ("openai/gpt-4o-search-preview", 0.025),
    ("openai/gpt-4o-mini-search-preview", 0.025),
    # Groq bills each search its tools run: browser search's "basic search" ($5 per
    # 1,000) and the Compound systems' default "advanced search" ($8 per 1,000), as its
    # pricing page listed them (docs/providers.md, Groq).
    ("groq/openai/gpt-oss", 0.005),
    ("groq/groq/compound", 0.008),
    # Any other OpenAI model searches with the Responses API's web_search tool: $10 per
    # 1,000 calls (OpenAI's pricing page, as read in December 2026), each web_search_call.
    ("openai/", 0.01),
)
"""(model prefix, USD per search), first match wins."""

VISIT_FEES: tuple[tuple[str, float], ...] = (
    # Groq bills each page its browser search or a Compound system opens ($1 per 1,000).
    ("groq/openai/gpt-oss", 0.001),
    ("groq/groq/compound", 0.001),
)
"""(model prefix, USD per page visit: ``visit_website``), first match wins."""

_LIBRARY_KEYS = {
    "web_search": "web_searches_kcount",
    "code_execution": "code_executions_kcount",
    "file_search": "storage_searches_kcount",
}
"""agac's server-tool names -> genai-prices' price per thousand uses."""


def search_fee(model: str) -> float | None:
    """agac's fee per search of ``model``'s web search (None: it knows none)."""
    return next((usd for prefix, usd in SEARCH_FEES if model.startswith(prefix)), None)


def own_fees(model: str) -> dict[str, float]:
    """agac's own fees per use of ``model``'s server tools (``provider/name``)."""
    out = {}
    search = search_fee(model)
    if search is not None:
        out["web_search"] = search
    visit = next((usd for prefix, usd in VISIT_FEES if model.startswith(prefix)), None)
    if visit is not None:
        out["visit_website"] = visit
    return out


def tool_rates(model_price: Any, model: str) -> dict[str, float]:
    """USD per use of each server tool of ``model`` (``provider/name``): genai-prices'
    price where it has one, else agac's own fees."""
    out = own_fees(model)
    for name, key in _LIBRARY_KEYS.items():
        value = getattr(model_price, key, None)
        if value is not None and getattr(value, "tiers", None) is None:
            out[name] = float(value) / 1000
    return out


def project_tools(web_search: Any, model: str = "") -> tuple[tuple[str, float], ...]:
    """A project's price of ``model``'s server tools: its ``web_search`` (USD per 1,000)
    over agac's own fees of the model's tools (a project pricing a Groq Compound
    system's tokens keeps agac's fees of its searches and page visits)."""
    out = own_fees(model)
    if web_search is not None:
        out["web_search"] = float(web_search) / 1000
    return tuple(sorted(out.items()))

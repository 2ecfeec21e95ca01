"""What a provider's server tools cost per use: genai-prices' price of each (read from
its model price), agac's own web search fees for the models it prices none of, and a
project's ``prices: <model>: web_search:`` (USD per 1,000 searches), which wins over
both. docs/providers.md lists the fees with each provider's billing rule.
"""

from __future__ import annotations

from typing import Any

__all__ = ["SEARCH_FEES", "project_tools", "search_fee", "tool_rates"]

SEARCH_FEES: tuple[tuple[str, float], ...] = (
    # OpenAI bills each call of a Chat Completions search model as one web search.
    ("openai/gpt-5-search-api", 0.01),
    ("openai/gpt-4o-search-preview", 0.025),
    ("openai/gpt-4o-mini-search-preview", 0.025),
)
"""(model prefix, USD per search), first match wins."""

_LIBRARY_KEYS = {
    "web_search": "web_searches_kcount",
    "code_execution": "code_executions_kcount",
    "file_search": "storage_searches_kcount",
}
"""agac's server-tool names -> genai-prices' price per thousand uses."""


def search_fee(model: str) -> float | None:
    """agac's fee per search of ``model``'s web search (None: it knows none)."""
    return next((usd for prefix, usd in SEARCH_FEES if model.startswith(prefix)), None)


def tool_rates(model_price: Any, model: str) -> dict[str, float]:
    """USD per use of each server tool of ``model`` (``provider/name``): genai-prices'
    price where it has one, else agac's web search fee."""
    fee = search_fee(model)
    out = {"web_search": fee} if fee is not None else {}
    for name, key in _LIBRARY_KEYS.items():
        value = getattr(model_price, key, None)
        if value is not None and getattr(value, "tiers", None) is None:
            out[name] = float(value) / 1000
    return out


def project_tools(web_search: Any) -> tuple[tuple[str, float], ...]:
    """A project's ``web_search`` price (USD per 1,000) as per-use tool rates."""
    return () if web_search is None else (("web_search", float(web_search) / 1000),)

"""Tools per record: what a web search costs. genai-prices' fee where it has one, agac's
own table for OpenAI's search models it prices none of, a project's ``prices: <model>:
web_search:`` (USD per 1,000) over both; a search's fee is never discounted with the
tokens of a batch call."""

from __future__ import annotations

from pathlib import Path

import pytest

from agac.providers.base import Usage
from agac.providers.pricing import PriceLibrary, PriceTable

SEARCHED = Usage(1_000_000, 0, server_tools=(("web_search", 4),))


def test_i40_web_search_prices_come_from_the_library_or_agacs_table(tmp_path: Path) -> None:
    table = PriceTable(library=PriceLibrary(tmp_path))
    fees = {
        m: dict(p.tools).get("web_search")
        for m in (
            "anthropic/claude-sonnet-4-5",
            "gemini/gemini-2.5-flash",
            "openai/gpt-4o-search-preview",
            "openai/gpt-5-search-api",
        )
        if (p := table.get(m)) is not None
    }
    assert fees == {
        "anthropic/claude-sonnet-4-5": pytest.approx(0.01),  # $10 per 1,000 searches
        "gemini/gemini-2.5-flash": pytest.approx(0.035),  # $35 per 1,000 grounded prompts
        "openai/gpt-4o-search-preview": pytest.approx(0.025),  # agac's table
        "openai/gpt-5-search-api": pytest.approx(0.01),
    }
    assert table.unpriced_tools("openai/gpt-4o-search-preview", ["web_search"]) == []


def test_i40_web_search_price_of_a_project_wins_and_is_not_discounted_in_batch(
    tmp_path: Path,
) -> None:
    table = PriceTable(
        {
            "openai/gpt-4o-search-preview": {
                "input": 2.0,
                "output": 8.0,
                "web_search": 30.0,
                "batch_discount": 0.5,
            }
        },
        library=PriceLibrary(tmp_path),
    )
    model = "openai/gpt-4o-search-preview"
    assert table.cost(model, SEARCHED) == pytest.approx(2.0 + 4 * 0.03)
    # The tokens at half price, each search at its full fee.
    assert table.cost(model, SEARCHED, "batch") == pytest.approx(1.0 + 4 * 0.03)

"""Prices (docs/cli.md, agac cost): never a silent $0.

The price library is genai-prices (offline data); agac.yml ``prices:`` overrides it; mock
and local models cost 0; a model no one prices is unpriced; a batch call with no batch
price costs half the live price, marked derived.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import genai_prices
import pytest

from agac.providers.base import Usage
from agac.providers.pricing import PriceLibrary, PriceTable


@pytest.fixture
def table(tmp_path: Path) -> PriceTable:
    return PriceTable(library=PriceLibrary(tmp_path / "cache"))


def _library_cost(model: str, provider_id: str, usage: Usage, batch: bool = False) -> float:
    """What genai-prices itself says (its input_tokens is the total, cached included)."""
    total = usage.input_tokens + usage.cached_tokens + usage.cache_write_tokens
    u = genai_prices.Usage(
        input_tokens=total,
        cache_read_tokens=usage.cached_tokens,
        cache_write_tokens=usage.cache_write_tokens,
        output_tokens=usage.output_tokens,
    )
    ctx = {"processing": "batch"} if batch else None
    price = genai_prices.calc_price(u, model, provider_id=provider_id, price_context=ctx)
    return float(price.total_price)


@pytest.mark.parametrize(
    ("model", "pid"),
    [
        ("openai/gpt-4o-mini", "openai"),
        ("anthropic/claude-sonnet-4-5", "anthropic"),
        ("anthropic/claude-haiku-4-5", "anthropic"),
        ("gemini/gemini-2.5-flash", "google"),
        ("groq/llama-3.3-70b-versatile", "groq"),
    ],
)
@pytest.mark.parametrize(
    "usage",
    [
        Usage(1200, 300),
        Usage(1000, 500, 400, 0),
        Usage(900, 100, 300, 200),
        Usage(250_000, 2_000, 10_000),
    ],
    ids=["plain", "cached", "cache_write", "long_context"],
)
def test_live_cost_matches_the_price_library(
    table: PriceTable, model: str, pid: str, usage: Usage
) -> None:
    """agac's own arithmetic (the hot path) equals genai-prices' for live calls, with
    cached reads, cache writes and long-context tiers; Gemini is `google` there."""
    expected = _library_cost(model.split("/", 1)[1], pid, usage)
    assert table.cost(model, usage) == pytest.approx(expected, rel=1e-9, abs=1e-12)
    assert table.status(model) is None


@pytest.mark.parametrize(
    ("model", "pid"),
    [
        ("openai/gpt-4o-mini", "openai"),
        ("anthropic/claude-sonnet-4-5", "anthropic"),
        ("gemini/gemini-2.5-flash", "google"),
    ],
)
def test_batch_cost_is_the_library_batch_price(table: PriceTable, model: str, pid: str) -> None:
    usage = Usage(2000, 700)
    expected = _library_cost(model.split("/", 1)[1], pid, usage, batch=True)
    assert table.cost(model, usage, "batch") == pytest.approx(expected, rel=1e-9)
    assert table.cost(model, usage, "batch") < table.cost(model, usage)
    assert table.status(model, "batch") is None


def test_batch_without_a_batch_price_is_half_live_marked_derived(table: PriceTable) -> None:
    model = "groq/llama-3.3-70b-versatile"  # the library has no batch price for it
    usage = Usage(2000, 700)
    assert table.cost(model, usage, "batch") == pytest.approx(table.cost(model, usage) / 2)
    assert table.status(model, "batch") == "derived"
    assert table.status(model, "live") is None


def test_agac_yml_prices_override_the_library(tmp_path: Path) -> None:
    table = PriceTable(
        {
            "openai/gpt-4o-mini": {"input": 1.0, "output": 2.0, "batch_discount": 0.25},
            "openai/my-finetune": {"input": 3.0, "output": 4.0},
        },
        library=PriceLibrary(tmp_path),
    )
    assert table.cost("openai/gpt-4o-mini", Usage(1_000_000, 1_000_000)) == pytest.approx(3.0)
    assert table.cost("openai/gpt-4o-mini", Usage(1_000_000, 0), "batch") == pytest.approx(0.75)
    assert table.status("openai/gpt-4o-mini", "batch") is None  # the project's discount
    assert table.cost("openai/my-finetune", Usage(1_000_000, 0)) == pytest.approx(3.0)
    assert table.status("openai/my-finetune", "batch") == "derived"


@pytest.mark.parametrize("model", ["mock/anything", "ollama/llama3.2"])
def test_mock_and_local_models_cost_zero(table: PriceTable, model: str) -> None:
    assert table.known(model)
    assert table.cost(model, Usage(10_000, 10_000)) == 0.0
    assert table.cost(model, Usage(10_000, 10_000), "batch") == 0.0
    assert table.status(model, "batch") is None


def test_unpriced_model_is_known_to_be_unpriced(table: PriceTable) -> None:
    assert not table.known("openai/no-such-model-2099")
    assert table.cost("openai/no-such-model-2099", Usage(1000, 1000)) == 0.0
    assert table.status("openai/no-such-model-2099") == "unpriced"


def test_azure_prices_come_from_the_library_where_it_knows_the_model_else_prices(
    tmp_path: Path,
) -> None:
    """``azure/<deployment>``: genai-prices' Azure price when the deployment is named for a
    model it knows (its batch price derived at half, as Global-Batch bills), a project's
    ``prices:`` for any other deployment name, and ``unpriced`` with neither."""
    table = PriceTable(
        {"azure/reviews-prod": {"input": 0.15, "output": 0.6}}, library=PriceLibrary(tmp_path)
    )
    usage = Usage(2000, 700, 400)
    expected = _library_cost("gpt-4o-mini", "azure", usage)
    assert table.cost("azure/gpt-4o-mini", usage) == pytest.approx(expected, rel=1e-9)
    assert table.status("azure/gpt-4o-mini") is None
    assert table.cost("azure/gpt-4o-mini", usage, "batch") == pytest.approx(expected / 2)
    assert table.status("azure/gpt-4o-mini", "batch") == "derived"
    assert table.cost("azure/reviews-prod", Usage(1_000_000, 1_000_000)) == pytest.approx(0.75)
    assert table.status("azure/reviews-prod") is None
    assert table.status("azure/my-own-deployment") == "unpriced"
    assert table.cost("azure/my-own-deployment", usage) == 0.0


def test_price_cache_keeps_later_lookups_from_loading_the_library(tmp_path: Path) -> None:
    """The first lookup of a model imports genai-prices and keeps what it found (and what
    it did not) in a small file; a later process answers from the file alone."""
    cache = tmp_path / "cache"
    assert PriceTable(library=PriceLibrary(cache)).known("openai/gpt-4o-mini")
    assert not PriceTable(library=PriceLibrary(cache)).known("openai/no-such-model-2099")
    [file] = list(cache.glob("prices-*.json"))
    assert set(json.loads(file.read_text())) == {"openai/gpt-4o-mini", "openai/no-such-model-2099"}
    code = (
        "import sys; from agac.providers.pricing import PriceTable;"
        "t = PriceTable(); print(t.known('openai/gpt-4o-mini'),"
        " t.known('openai/no-such-model-2099'), 'genai_prices' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "AGAC_CACHE_DIR": str(cache)},
    ).stdout
    assert out.split() == ["True", "False", "False"]


def test_a_broken_price_cache_is_rebuilt(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    PriceTable(library=PriceLibrary(cache)).known("openai/gpt-4o-mini")
    [file] = list(cache.glob("prices-*.json"))
    file.write_text("{not json")
    table = PriceTable(library=PriceLibrary(cache))
    assert table.cost("openai/gpt-4o-mini", Usage(1_000_000, 0)) == pytest.approx(0.15)
    assert json.loads(file.read_text())["openai/gpt-4o-mini"]["live"]["input_mtok"] == float(
        Decimal("0.15")
    )


@pytest.mark.parametrize(
    ("model", "per_hour"),
    [
        ("gemini/gemini-2.5-flash", 1.00),
        ("gemini/gemini-2.5-flash-lite", 1.00),
        ("gemini/gemini-2.5-pro", 4.50),
        ("openai/gpt-4o-mini", None),
        ("mock/m1", 0.0),
    ],
)
def test_i24_gemini_context_cache_storage_prices(
    table: PriceTable, model: str, per_hour: float | None
) -> None:
    """An explicit cache's storage: Gemini's published USD per 1M tokens per hour."""
    assert table.storage(model) == per_hour
    assert table.storage_cost(model, 2_000_000, 1800) == pytest.approx((per_hour or 0) * 2 * 0.5)


def test_i24_gemini_context_cache_storage_price_overridden_in_agac_yml(tmp_path: Path) -> None:
    table = PriceTable(
        {"gemini/gemini-2.5-flash": {"input": 0.3, "output": 2.5, "cache_storage": 2.0}},
        library=PriceLibrary(tmp_path),
    )
    assert table.storage("gemini/gemini-2.5-flash") == 2.0
    assert table.storage("gemini/gemini-2.5-pro") == 4.50

"""Vertex AI's prices: Gemini's (genai-prices' ``google`` provider), and a cache hit in a
batch billed at the live cache rate (the batch discount does not stack on it)."""

from __future__ import annotations

from dataclasses import replace

from pytest import approx

from agac.providers.base import Usage
from agac.providers.pricing import PriceLibrary, cost_usd


def test_vertex_models_are_priced_as_gemini() -> None:
    library = PriceLibrary(cache_dir=None)
    vertex = library.lookup("vertex", "gemini-2.5-flash")
    gemini = library.lookup("gemini", "gemini-2.5-flash")
    assert vertex is not None and gemini is not None
    assert (vertex.live.input, vertex.live.output) == (gemini.live.input, gemini.live.output)


def test_vertex_batch_cache_hits_at_the_live_cache_rate_not_discounted_again() -> None:
    price = PriceLibrary(cache_dir=None).lookup("vertex", "gemini-2.5-flash")
    assert price is not None and price.live.cached_input is not None
    usage = Usage(input_tokens=1_000_000, output_tokens=1_000_000, cached_tokens=1_000_000)
    fresh = Usage(input_tokens=1_000_000, output_tokens=1_000_000)
    hits = Usage(cached_tokens=1_000_000)
    got = cost_usd(price, usage, "batch", provider="vertex")
    batch_fresh = cost_usd(price, fresh, "batch", provider="vertex")
    assert abs(got - (batch_fresh + price.live.cached_input)) < 1e-9
    assert cost_usd(price, fresh, "live", provider="vertex") > batch_fresh
    # Where the batch price is derived (half the live one), other providers' hits are
    # halved too; Vertex's stay at the live cache rate.
    derived = replace(price, batch=None)
    cached = price.live.cached_input
    assert cost_usd(derived, hits, "batch", provider="gemini") == approx(cached / 2)
    assert cost_usd(derived, hits, "batch", provider="vertex") == approx(cached)
    assert cost_usd(derived, usage, "batch", provider="vertex") == approx(
        cached + cost_usd(derived, fresh, "live") / 2
    )

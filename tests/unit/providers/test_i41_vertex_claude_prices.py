"""Claude on Vertex AI priced as Vertex bills it: Vertex's own price list for Claude (the
price library's Google entries, not Anthropic's), half price in batch, and a batch's cache
hits at the live cache-hit rate (on Vertex the batch discount does not stack on the
cache discount), where Anthropic's own batch halves them again."""

from __future__ import annotations

from pytest import approx

from agac.providers.base import Usage
from agac.providers.pricing import PriceLibrary, cost_usd

SONNET = "claude-sonnet-4-5@20250929"
HAIKU = "claude-haiku-4-5@20251001"


def test_i41_vertex_claude_is_priced_from_vertex_price_list() -> None:
    library = PriceLibrary(cache_dir=None)
    for model in (SONNET, HAIKU, "claude-3-5-haiku@20241022"):
        price = library.lookup("vertex", model)
        assert price is not None and price.source == "genai-prices", model
        assert price.input > 0 and price.output > price.input
        assert price.cached_input is not None and price.cached_input < price.input
        assert price.cache_write is not None and price.cache_write > price.input
    sonnet = library.lookup("vertex", SONNET)
    assert sonnet is not None and sonnet.tiers  # the long-context tier is kept


def test_i41_vertex_claude_batch_is_half_and_cache_hits_stay_at_the_live_hit_rate() -> None:
    price = PriceLibrary(cache_dir=None).lookup("vertex", HAIKU)
    assert price is not None and price.cached_input is not None
    assert price.cache_write is not None
    fresh = Usage(input_tokens=1_000_000, output_tokens=1_000_000, cache_write_tokens=1_000_000)
    hits = Usage(cached_tokens=1_000_000)
    both = Usage(
        input_tokens=1_000_000,
        output_tokens=1_000_000,
        cache_write_tokens=1_000_000,
        cached_tokens=1_000_000,
    )
    assert cost_usd(price, fresh, "batch", provider="vertex") == approx(
        cost_usd(price, fresh, "live", provider="vertex") / 2
    )
    assert cost_usd(price, hits, "batch", provider="vertex") == approx(price.cached_input)
    assert cost_usd(price, both, "batch", provider="vertex") == approx(
        (price.input + price.output + price.cache_write) / 2 + price.cached_input
    )


def test_i41_vertex_claude_batch_hits_cost_more_than_anthropics_own_batch() -> None:
    """The same hits through Anthropic's Message Batches are billed at its batch cache
    rate (the discounts stack there): Vertex's batch hit is the dearer of the two."""
    library = PriceLibrary(cache_dir=None)
    vertex = library.lookup("vertex", HAIKU)
    direct = library.lookup("anthropic", "claude-haiku-4-5")
    assert vertex is not None and direct is not None
    hits = Usage(cached_tokens=1_000_000)
    on_vertex = cost_usd(vertex, hits, "batch", provider="vertex")
    on_anthropic = cost_usd(direct, hits, "batch", provider="anthropic")
    assert on_anthropic < on_vertex == approx(cost_usd(vertex, hits, "live", provider="vertex"))

"""Prices and the cost of a call (DESIGN §8).

Prices are USD per million tokens. The bundled table covers every model named in
DESIGN.md, the README and the shipped examples; a project's ``prices:`` in agac.yml
overrides or extends it (keys ``provider/model``). ``mock/*`` and ``ollama/*`` cost 0.
The batch tier applies the provider's discount (50 %); on Groq prompt caching does
not stack with it, so cached reads in a Groq batch are billed as ordinary input.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agac.providers.base import Usage

__all__ = ["BUNDLED_PRICES", "Price", "PriceTable", "cost_usd"]


@dataclass(frozen=True, slots=True)
class Price:
    input: float
    output: float
    cached_input: float | None = None
    cache_write: float | None = None
    batch_discount: float = 0.5


def _p(i: float, o: float, c: float | None = None, w: float | None = None) -> Price:
    return Price(input=i, output=o, cached_input=c, cache_write=w)


BUNDLED_PRICES: dict[str, Price] = {
    "openai/gpt-4o-mini": _p(0.15, 0.60, 0.075),
    "openai/gpt-4o": _p(2.50, 10.00, 1.25),
    "openai/gpt-4.1": _p(2.00, 8.00, 0.50),
    "openai/gpt-4.1-mini": _p(0.40, 1.60, 0.10),
    "openai/gpt-4.1-nano": _p(0.10, 0.40, 0.025),
    "openai/gpt-5-mini": _p(0.25, 2.00, 0.025),
    "anthropic/claude-sonnet-4-5": _p(3.00, 15.00, 0.30, 3.75),
    "anthropic/claude-haiku-4-5": _p(1.00, 5.00, 0.10, 1.25),
    "anthropic/claude-opus-4-1": _p(15.00, 75.00, 1.50, 18.75),
    "gemini/gemini-2.5-flash": _p(0.30, 2.50, 0.075),
    "gemini/gemini-2.5-flash-lite": _p(0.10, 0.40, 0.025),
    "gemini/gemini-2.5-pro": _p(1.25, 10.00, 0.31),
    "gemini/gemini-2.0-flash": _p(0.10, 0.40, 0.025),
    "groq/llama-3.3-70b-versatile": _p(0.59, 0.79),
    "groq/llama-3.1-8b-instant": _p(0.05, 0.08),
    "groq/openai/gpt-oss-20b": _p(0.10, 0.50),
    "groq/openai/gpt-oss-120b": _p(0.15, 0.75),
}

_FREE_PROVIDERS = frozenset({"mock", "ollama"})
_FREE = Price(0.0, 0.0, 0.0, 0.0)


class PriceTable:
    """Bundled prices overlaid with a project's ``prices:``."""

    def __init__(self, overrides: Mapping[str, Any] | None = None) -> None:
        self._prices = dict(BUNDLED_PRICES)
        for model, value in (overrides or {}).items():
            self._prices[model] = _coerce(value)

    def get(self, model: str) -> Price | None:
        price = self._prices.get(model)
        if price is None and model.split("/", 1)[0] in _FREE_PROVIDERS:
            return _FREE
        return price

    def known(self, model: str) -> bool:
        return self.get(model) is not None

    def cost(self, model: str, usage: Usage, tier: str = "live") -> float:
        price = self.get(model)
        if price is None or price is _FREE:
            return 0.0
        return cost_usd(price, usage, tier, provider=model.split("/", 1)[0])


def _coerce(value: Any) -> Price:
    if isinstance(value, Price):
        return value
    data = value if isinstance(value, Mapping) else dataclasses.asdict(value)
    return Price(
        input=float(data.get("input") or 0.0),
        output=float(data.get("output") or 0.0),
        cached_input=_opt(data.get("cached_input")),
        cache_write=_opt(data.get("cache_write")),
        batch_discount=float(data.get("batch_discount", 0.5) if data.get("batch_discount") is not None else 0.5),
    )


def _opt(v: Any) -> float | None:
    return None if v is None else float(v)


def cost_usd(price: Price, usage: Usage, tier: str = "live", provider: str = "") -> float:
    """USD for ``usage`` at ``price``; ``tier='batch'`` applies the batch discount."""
    cached_rate = price.cached_input if price.cached_input is not None else price.input
    write_rate = price.cache_write if price.cache_write is not None else price.input
    factor = 1.0
    if tier == "batch":
        factor = 1.0 - price.batch_discount
        if provider == "groq":
            cached_rate = price.input  # Groq: caching does not stack with the batch discount
    total = (
        usage.input_tokens * price.input
        + usage.cached_tokens * cached_rate
        + usage.cache_write_tokens * write_rate
        + usage.output_tokens * price.output
    )
    return total * factor / 1_000_000

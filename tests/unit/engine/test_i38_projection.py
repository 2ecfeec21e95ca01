"""A pilot's projection (The quality loop: a pilot before the full run): the stratified
estimate of the whole input's cost with its 95 % interval, per tier."""

from __future__ import annotations

import math

import pytest

from agac.engine.views.pilot import tier_pricer
from agac.engine.views.projection import Call, project_tiers
from agac.providers.base import Usage
from agac.providers.pricing import PriceTable

PRICES = PriceTable(
    {
        "openai/gpt-5-mini": {"input": 1.0, "output": 2.0},
        "openai/gpt-4o-mini": {"input": 1.0, "output": 2.0},
    }
)


def _calls(model: str, tokens: dict[str, int]) -> dict[str, list[Call]]:
    return {k: [Call(model, Usage(input_tokens=n, output_tokens=0))] for k, n in tokens.items()}


def test_i38_projection_is_the_stratified_estimate_with_its_interval() -> None:
    tokens = {"a1": 1_000_000, "a2": 3_000_000, "b1": 10_000_000, "b2": 10_000_000}
    strata = {"a": (10, 2), "b": (4, 2)}
    stratum = {"a1": "a", "a2": "a", "b1": "b", "b2": "b"}

    out = project_tiers(
        _calls("openai/gpt-4o-mini", tokens), strata, stratum, tier_pricer(PRICES), 2.0
    )

    online = out["online"]
    # a: mean $2, s² = 2; b: mean $10, s² = 0.
    assert online["estimate_usd"] == pytest.approx(10 * 2 + 4 * 10)
    half = 1.959964 * math.sqrt(10 * 10 * (1 - 2 / 10) * 2 / 2)
    assert online["high_usd"] == pytest.approx(60 + half, abs=1e-5)
    assert online["low_usd"] == pytest.approx(60 - half, abs=1e-5)
    assert online["sample_usd"] == pytest.approx(24)
    assert online["after_pilot_usd"] == pytest.approx(36)
    assert online["time_s"]["estimate"] == pytest.approx(2.0 * 14 / 4)
    assert out["batch"]["estimate_usd"] == pytest.approx(30)  # half the live rate
    assert out["flex"] is None  # gpt-4o-mini is not served on OpenAI's flex tier


def test_i38_projection_prices_flex_where_the_provider_sells_it() -> None:
    out = project_tiers(
        _calls("openai/gpt-5-mini", {"k": 1_000_000}),
        {"": (5, 1)},
        {"k": ""},
        tier_pricer(PRICES),
        1.0,
    )
    # OpenAI bills flex at the batch rate; time is at least the online one.
    assert out["flex"]["estimate_usd"] == out["batch"]["estimate_usd"] == pytest.approx(2.5)
    assert out["flex"]["time_s"]["at_least"] is True
    assert out["online"]["estimate_usd"] == pytest.approx(5)


def test_i38_projection_never_below_what_the_sample_measured() -> None:
    tokens = {"a": 0, "b": 0, "c": 9_000_000}
    out = project_tiers(
        _calls("openai/gpt-4o-mini", tokens),
        {"": (4, 3)},
        dict.fromkeys(tokens, ""),
        tier_pricer(PRICES),
        1.0,
    )
    assert out["online"]["low_usd"] == pytest.approx(9)

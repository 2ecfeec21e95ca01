"""``windows:`` of a model's price in ``agac.yml`` (a price calendar): the hours of the
UTC day a model costs otherwise, each with its live rates::

    prices:
      deepseek/deepseek-chat:
        input: 0.27
        output: 1.10
        windows:
          - {name: off-peak, utc: "16:30-00:30", input: 0.135, output: 0.55}

A call whose answer came inside a window is priced at that window's rates (the last
window listed wins where two overlap); the model's own rates hold the rest of the day.
"""

from __future__ import annotations

from typing import Any

from agac.config.source import Findings, Path
from agac.config.values import read_mapping, read_number, read_str
from agac.providers.pricing import MAX_PRICE, PriceWindow, Rates, hours_of

__all__ = ["WINDOW_KEYS", "read_windows"]

WINDOW_KEYS = ("name", "utc", "input", "output", "cached_input", "cache_write")


def read_windows(f: Findings, raw: Any, path: Path, model: str) -> tuple[PriceWindow, ...]:
    """The windows at ``path`` (a list), each checked; a bad one is reported and left out."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        f.error("invalid_value", f"prices.{model}.windows must be a list of windows", path)
        return ()
    out = []
    for i, item in enumerate(raw):
        window = _window(f, item, path + (i,), model)
        if window is not None:
            out.append(window)
    return tuple(out)


def _window(f: Findings, item: Any, path: Path, model: str) -> PriceWindow | None:
    body = read_mapping(f, item, path)
    if body is None:
        return None
    f.unknown_keys(body, WINDOW_KEYS, path, f"prices.{model}.windows")
    text = read_str(f, body.get("utc"), path + ("utc",))
    hours = hours_of(text) if text is not None else None
    if text is not None and hours is None:
        f.error(
            "invalid_value",
            f"prices.{model}.windows: utc must be HH:MM-HH:MM in UTC (start and end "
            f"differ), got {text!r}",
            path + ("utc",),
        )
    rates: dict[str, float | None] = {}
    for key in ("input", "output", "cached_input", "cache_write"):
        if key in body:
            rates[key] = read_number(f, body[key], path + (key,), maximum=MAX_PRICE)
        elif key in ("input", "output"):
            f.error("missing_key", f"a window of prices.{model} needs {key!r}", path)
    name = read_str(f, body["name"], path + ("name",)) if "name" in body else ""
    if hours is None or rates.get("input") is None or rates.get("output") is None:
        return None
    live = Rates(
        float(rates["input"] or 0.0),
        float(rates["output"] or 0.0),
        rates.get("cached_input"),
        rates.get("cache_write"),
    )
    return PriceWindow(hours[0], hours[1], live, name or "")

"""What agac reads of the genai-prices library: a model's rates as JSON (live, batch, its
time-of-day windows), and where and for which library data the price cache is kept
(:class:`agac.providers.pricing.PriceLibrary` caches the JSON)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from agac.providers.toolprices import tool_rates

__all__ = ["LIBRARY_PROVIDER", "cache_home", "extract", "library_version"]

LIBRARY_PROVIDER = {"gemini": "google", "vertex": "google", "xai": "x-ai"}
"""agac's provider names that genai-prices spells otherwise."""


def cache_home() -> Path:
    explicit = os.environ.get("AGAC_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "agac"


def library_version() -> str | None:
    """The installed genai-prices data's identity (size and time of its data file), found
    without importing it; None when it is not installed."""
    import importlib.util

    spec = importlib.util.find_spec("genai_prices")
    if spec is None or not spec.submodule_search_locations:
        return None
    data = Path(next(iter(spec.submodule_search_locations))) / "data.py"
    try:
        st = data.stat()
    except OSError:
        return None
    return f"{st.st_size:x}-{st.st_mtime_ns:x}"


def extract(provider: str, model: str) -> dict[str, Any] | None:
    """A model's rates from genai-prices (imported here), as JSON; None when unknown."""
    try:
        import genai_prices
    except ImportError:
        return None
    pid = LIBRARY_PROVIDER.get(provider, provider)
    zero = genai_prices.Usage(input_tokens=0, output_tokens=0)
    try:
        found = genai_prices.calc_price(zero, model, provider_id=pid)
        hours = _library_windows(found.model.prices)
        # The base rates are those of an hour no window holds (genai-prices prices a call
        # at its time: asked at a window's hour, it would answer that window's rates).
        base = _outside(hours)
        live = _library_price(genai_prices, zero, model, pid, base)
        batch = genai_prices.calc_price(
            zero,
            model,
            provider_id=pid,
            genai_request_timestamp=base,
            price_context={"processing": "batch"},
        ).model_price
        windows = [
            (start, end, _library_price(genai_prices, zero, model, pid, _at_minute(start)))
            for start, end in hours
        ]
    except (LookupError, ValueError):
        return None
    keys = (
        "input_mtok",
        "output_mtok",
        "cache_read_mtok",
        "cache_write_mtok",
        "cache_write_1h_mtok",
    )
    live_rates = {k: getattr(live, k, None) for k in keys}
    if live_rates["input_mtok"] is None and live_rates["output_mtok"] is None:
        return None  # priced by something other than tokens (images, audio, requests)
    batch_rates = {k: getattr(batch, k, None) for k in keys}
    live_json: dict[str, Any] = {k: _rate_json(v) for k, v in live_rates.items()}
    batch_json: dict[str, Any] = {k: _rate_json(v) for k, v in batch_rates.items()}
    named = f"{provider}/{model}"
    live_json["tools"], batch_json["tools"] = tool_rates(live, named), tool_rates(batch, named)
    return {
        "live": live_json,
        "batch": batch_json if batch_json != live_json else None,
        "windows": [
            {"start": start, "end": end, "live": {k: _rate_json(getattr(p, k, None)) for k in keys}}
            for start, end, p in windows
        ],
    }


def _library_windows(prices: Any) -> list[tuple[int, int]]:
    """The daily intervals (minutes of the UTC day) of a genai-prices model's
    time-of-day prices, in its order."""
    out = []
    for conditional in prices if isinstance(prices, list) else ():
        constraint = getattr(conditional, "constraint", None)
        start, end = getattr(constraint, "start_time", None), getattr(constraint, "end_time", None)
        if start is not None and end is not None:
            out.append((_minute(start), _minute(end)))
    return out


def _minute(value: Any) -> int:
    """A ``datetime.time`` (UTC when naive) as a minute of the UTC day."""
    offset = value.utcoffset()
    minutes = value.hour * 60 + value.minute - (int(offset.total_seconds() // 60) if offset else 0)
    return minutes % 1440


def _at_minute(minute: int) -> Any:
    """Today (UTC) at ``minute`` of the day, as genai-prices takes a request's time."""
    from datetime import UTC, datetime, timedelta

    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return today + timedelta(minutes=minute)


def _holds(start: int, end: int, minute: int) -> bool:
    """Whether the daily interval ``start``..``end`` (minutes; across midnight when
    ``end <= start``) holds ``minute``, as :meth:`~agac.providers.pricing.PriceWindow.holds`."""
    return (minute >= start or minute < end) if end <= start else start <= minute < end


def _outside(hours: list[tuple[int, int]]) -> Any:
    """A time of today no interval holds (now, when there are none)."""
    from datetime import UTC, datetime

    if not hours:
        return datetime.now(UTC)
    for minute in range(0, 1440, 5):
        if not any(_holds(s, e, minute) for s, e in hours):
            return _at_minute(minute)
    return _at_minute(0)


def _library_price(genai_prices: Any, zero: Any, model: str, pid: str, at: Any) -> Any:
    return genai_prices.calc_price(
        zero, model, provider_id=pid, genai_request_timestamp=at
    ).model_price


def _rate_json(value: Any) -> Any:
    """A Decimal as a float; tiered prices as [base, [[above, price], ...]]."""
    if value is None:
        return None
    tiers = getattr(value, "tiers", None)
    if tiers is not None:
        return [float(value.base), [[int(t.start), float(t.price)] for t in tiers]]
    return float(value)

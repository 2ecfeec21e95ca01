"""When a model with a price calendar (hours of the day at other rates: DeepSeek) is next
cheaper than now, for ``agac plan``.

The day is cut at every window's start and end; each piece costs what a call made in it
costs (:meth:`~agac.providers.pricing.Price.live_at`). Pieces are compared on the usage
the plan estimates, so "cheaper" means cheaper for this action's mix of input and output.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agac.providers.base import Usage
from agac.providers.pricing import Price, PriceWindow

if TYPE_CHECKING:
    from agac.providers.pricing import PriceTable

__all__ = ["Opening", "cheaper_hours", "next_cheaper"]

_DAY = 1440


@dataclass(frozen=True, slots=True)
class Opening:
    """The next cheaper hours: their UTC hours and name, when they open and close (epoch
    seconds; ``opens_at`` is ``now`` when open already) and what ``usage`` costs there
    and now."""

    hours: str
    name: str
    opens_at: float
    closes_at: float
    cost_then: float
    cost_now: float


def next_cheaper(price: Price, usage: Usage, now: float) -> Opening | None:
    """The cheapest hours of the next 24 hours for ``usage``, the soonest of equals, when
    they cost less than now; None when now is as cheap as it gets (or no calendar). Hours
    that cost less are never the ones running now (a piece of the day has one price)."""
    if not price.windows:
        return None
    cost_now = price.live_at(now).cost(usage)
    day_start = now - (now % 86400)
    best: Opening | None = None
    for start, end in _pieces(price.windows):
        cost = price.live_at(day_start + start * 60).cost(usage)
        if cost >= cost_now:
            continue
        opens = day_start + start * 60
        if opens < now:
            opens += 86400
        if best is not None and (cost, opens) >= (best.cost_then, best.opens_at):
            continue
        closes = opens + ((end - start) % _DAY) * 60
        name = _name(price.windows, start)
        best = Opening(_hours(start, end), name, opens, closes, cost, cost_now)
    return best


def _pieces(windows: tuple[PriceWindow, ...]) -> list[tuple[int, int]]:
    """The day cut at every window's edge: (start, end) minutes, wrapping at midnight."""
    edges = sorted({w.start for w in windows} | {w.end for w in windows})
    return [(edges[i], edges[(i + 1) % len(edges)]) for i in range(len(edges))]


def _hours(start: int, end: int) -> str:
    return f"{start // 60:02d}:{start % 60:02d}-{end // 60:02d}:{end % 60:02d} UTC"


def _name(windows: tuple[PriceWindow, ...], minute: int) -> str:
    """The name of the window whose rates hold at ``minute`` ("" for the base rates)."""
    for window in reversed(windows):
        if window.holds(minute):
            return window.name
    return ""


def cheaper_hours(
    prices: PriceTable, model: str | None, usage: Usage, now: float
) -> dict[str, Any] | None:
    """``agac plan``'s word on an action whose estimate is ``usage``: ``{hours, name,
    opens_at, opens_in_s, closes_at, online_usd_then, online_usd_now}``, or None when its
    model has no cheaper hours ahead."""
    price = prices.get(model or "")
    opening = next_cheaper(price, usage, now) if price is not None else None
    if opening is None:
        return None
    return {
        "hours": opening.hours,
        "name": opening.name,
        "opens_at": opening.opens_at,
        "opens_in_s": round(opening.opens_at - now),
        "closes_at": opening.closes_at,
        "online_usd_then": round(opening.cost_then, 10),
        "online_usd_now": round(opening.cost_now, 10),
    }

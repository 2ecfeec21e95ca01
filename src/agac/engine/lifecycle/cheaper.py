"""``run_mode: auto`` and a price calendar (DeepSeek's cheaper hours): whether an action
that runs online waits for its model's next cheaper hours, decided once, at admission.

The rule (decision record "run_mode auto waits for cheaper hours"): the action waits when

- ``run_mode: auto`` chose ``online`` for it and it does not set ``wait_for_cheaper: false``;
- the run has a ``deadline`` (without one nothing says how long waiting may take: no wait);
- its model's price calendar has cheaper hours ahead that are not open yet (for a call of
  :data:`NOMINAL_INPUT` input tokens and ``max_tokens`` output);
- its calls, once those hours open, fit both before the run's deadline and before the
  hours close: ``opens_at + takes <= min(deadline_at, closes_at)`` (equal fits), where
  ``takes`` is ``ceil(units / max_concurrency) * timeout`` — each wave of
  ``max_concurrency`` calls taking at most the action's ``timeout``.

The instant it starts is stored in the run's settings (``RunSettings.start_at``), so a
continuation, a worker or a resumed run after a crash keeps the same decision.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from agac.engine.lifecycle.modes import auto_units
from agac.providers.base import Usage
from agac.providers.pricecalendar import next_cheaper

if TYPE_CHECKING:
    from agac.config.model import Action, Workflow
    from agac.providers.pricing import PriceTable

__all__ = ["NOMINAL_INPUT", "call_span", "cheaper_starts", "start_of"]

NOMINAL_INPUT = 1000
"""Input tokens of the nominal call the calendar's hours are compared on."""

_TIMEOUT = 120.0
"""A call's time when the action sets no ``timeout``."""


def call_span(action: Action, units: int) -> float:
    """Seconds the action's ``units`` calls take at most: waves of ``max_concurrency``
    calls, each at most the action's ``timeout``."""
    waves = math.ceil(units / max(1, action.max_concurrency))
    return waves * (action.timeout or _TIMEOUT)


def start_of(
    action: Action, units: int, prices: PriceTable, now: float, deadline_at: float | None
) -> float | None:
    """The instant the action's calls start when it waits for cheaper hours, else None."""
    if not action.wait_for_cheaper or action.run_mode != "online" or not action.auto_choice:
        return None
    if deadline_at is None or units <= 0:
        return None
    price = prices.get(action.model or "")
    if price is None:
        return None
    usage = Usage(NOMINAL_INPUT, action.max_tokens or NOMINAL_INPUT)
    opening = next_cheaper(price, usage, now)
    if opening is None or opening.opens_at <= now:
        return None
    if opening.opens_at + call_span(action, units) > min(deadline_at, opening.closes_at):
        return None
    return opening.opens_at


def cheaper_starts(
    workflow: Workflow, records: int, prices: PriceTable, now: float, deadline_at: float | None
) -> dict[str, float]:
    """Per action that waits for its model's cheaper hours, the instant it starts."""
    units = auto_units(workflow, records)
    starts = {
        a.name: start_of(a, units.get(a.name, records), prices, now, deadline_at)
        for a in workflow.actions
        if a.kind == "llm"
    }
    return {name: at for name, at in starts.items() if at is not None}

"""Checks' pass rates (an llm action's ``checks:``): per action, per check in the order
written, the units it passed and failed in the run, and its pass rate."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from agac.jsontext import loads

if TYPE_CHECKING:
    from agac.store.repository import Store

__all__ = ["CheckRate", "check_rates"]


@dataclass(frozen=True)
class CheckRate:
    """Units a check passed and failed, and its pass ``rate`` (of the units it judged)."""

    passed: int
    failed: int
    rate: float


def check_rates(store: Store, run_id: str) -> dict[str, dict[str, CheckRate]]:
    """Per action with checks, per check: its rate in the run."""
    tally: dict[str, dict[str, list[int]]] = {}
    for row in store.check_counts(run_id):
        verdicts = loads(row.checks)
        per = tally.setdefault(row.action, {})
        for name, passed in verdicts.items():
            counts = per.setdefault(name, [0, 0])
            counts[0 if passed else 1] += row.n
    return {
        action: {name: CheckRate(p, f, round(p / (p + f), 4)) for name, (p, f) in per.items()}
        for action, per in tally.items()
    }

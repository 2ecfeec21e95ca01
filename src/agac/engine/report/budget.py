"""A run's budget (R5) as the report shows it: its caps and what the run has spent of
them (with what the runs it retries spent, R2)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from agac.engine.limits.budget import spent_by

if TYPE_CHECKING:
    from agac.store.repository import Store
    from agac.store.values import RunRecord

__all__ = ["BudgetReport", "budget_report"]


@dataclass(frozen=True)
class BudgetReport:
    """The caps (``usd``, ``tokens``: None for no cap) and what was spent."""

    usd: float | None
    tokens: int | None
    spent_usd: float
    spent_tokens: int


def budget_report(store: Store, run: RunRecord) -> BudgetReport | None:
    """The run's budget and its spending; None for a run without a budget."""
    budget = run.settings.budget
    if budget is None:
        return None
    usd, tokens = spent_by(store, run)
    return BudgetReport(budget.usd, budget.tokens, round(usd, 6), tokens)

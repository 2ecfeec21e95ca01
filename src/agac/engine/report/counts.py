"""A run's units counted per action from the store: answered, failed, skipped, pending,
calls (and those with an outcome never stored, S1), answers reused, tool calls, batches
out, the rounds of a batch action's tool loops, cost, and failures and skips by reason."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agac.config.websearch import runs_loop
from agac.engine.decision import round_of
from agac.engine.report.jsondoc import ABSENT_WHEN_NONE, JSONView
from agac.engine.walk.steps import expected_units

if TYPE_CHECKING:
    from agac.engine.graph import RunGraph
    from agac.store.repository import Store
    from agac.store.values import RunRecord

__all__ = ["ActionSummary", "count_actions"]


@dataclass(frozen=True, eq=False)
class ActionSummary(JSONView):
    """One action's units by bucket (``records`` = answered + failed + skipped + pending),
    its calls (``unknown_calls`` of them with an outcome never stored, S1), answers reused,
    tool calls, batches out, cost, and its failures and skips by reason. ``rounds``: for
    a batch action with tools, the rounds of its loops this run has sent (absent else)."""

    records: int
    answered: int = 0
    failed: int = 0
    skipped: int = 0
    pending: int = 0
    calls: int = 0
    unknown_calls: int = 0
    reused: int = 0
    tool_calls: int = 0
    batches_out: int = 0
    rounds: int | None = field(default=None, metadata=ABSENT_WHEN_NONE)
    cost_usd: float = 0.0
    reasons: dict[str, int] = field(default_factory=dict)


@dataclass
class _Tally:
    """An action's counts while the store's rows are added up."""

    records: int
    buckets: dict[str, int] = field(default_factory=dict)
    calls: int = 0
    unknown_calls: int = 0
    reused: int = 0
    tool_calls: int = 0
    batches_out: int = 0
    rounds: int | None = None
    cost_usd: float = 0.0
    reasons: dict[str, int] = field(default_factory=dict)

    def summary(self) -> ActionSummary:
        answered, failed, skipped = (self.buckets.get(b, 0) for b in _BUCKETS)
        return ActionSummary(
            records=self.records,
            answered=answered,
            failed=failed,
            skipped=skipped,
            pending=max(self.records - answered - failed - skipped, 0),
            calls=self.calls,
            unknown_calls=self.unknown_calls,
            reused=self.reused,
            tool_calls=self.tool_calls,
            batches_out=self.batches_out,
            rounds=self.rounds,
            cost_usd=round(self.cost_usd, 6),
            reasons=self.reasons,
        )


_BUCKETS = ("answered", "failed", "skipped")


def count_actions(
    store: Store, run: RunRecord, graph: RunGraph
) -> tuple[dict[str, ActionSummary], float]:
    """Per action of the run (in the graph's order) its counts, and the run's cost."""
    info = store.snapshot_info(run.snapshot_id)
    records = info.record_count if info else 0
    units = _unit_counts(store, run.id, graph, records)
    tally = {a.name: _Tally(units.get(a.name, records)) for a in graph.actions}
    for row in store.outcome_counts(run.id):
        t = tally.get(row.action)
        if t is None:
            continue
        t.buckets[row.status] = t.buckets.get(row.status, 0) + row.n
        if row.status == "answered" and row.origin in ("reused", "carried"):
            t.reused += row.n
        if row.reason and row.status in ("failed", "skipped"):
            t.reasons[row.reason] = t.reasons.get(row.reason, 0) + row.n
    looped = {a.name for a in graph.workflow.actions if runs_loop(a)}
    cost = 0.0
    for total in store.usage_totals([run.id]):
        t = tally.get(total.action)
        if t is None:
            continue
        if total.kind == "tool":
            t.tool_calls += total.calls
        elif total.tier != "batch":  # batch items are counted as sent, below
            t.calls += total.calls
            if total.origin == "unknown":  # S1: of ``calls``, those whose outcome is unknown
                t.unknown_calls += total.calls
        t.cost_usd += total.cost_usd
        cost += total.cost_usd
    for name, counts in store.batch_counts(run.id, run.workflow, tenant=run.tenant).items():
        if name in tally:
            tally[name].calls += counts["sent"]
            tally[name].batches_out = counts["out"]
            if name in looped and counts.get("last_attempt"):
                tally[name].rounds = round_of(counts["last_attempt"])
    return {name: t.summary() for name, t in tally.items()}, cost


def _unit_counts(store: Store, run_id: str, graph: RunGraph, records: int) -> dict[str, int]:
    """Units per action (docs/cli.md, agac status): one per record, but one per item inside
    a fan-out (counted from the stored fan-outs); empty for a workflow without fan-outs."""
    regions = graph.regions
    if regions is None:
        return {}
    totals = store.fanout_totals(run_id)
    return {a: expected_units(regions, a, records, totals) for a in graph.order}

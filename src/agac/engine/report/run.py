"""The run summary of docs/cli.md — what ``agac run`` and ``agac status`` print — computed
from the store (never from memory): one frozen tree (:class:`RunSummary`) of the per-action
counts, what the run waits for, advice with its fix, its budget, hybrid switches and
``run_mode: auto`` choices, checks' pass rates, and the command to run next."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from agac.engine.graph import RunGraph, run_graph
from agac.engine.report.advice import NOT_FIXED_BY_RETRY, SKIP_REASONS, Advice, advise
from agac.engine.report.budget import BudgetReport, budget_report
from agac.engine.report.checks import CheckRate, check_rates
from agac.engine.report.counts import ActionSummary, count_actions
from agac.engine.report.hybrid import AutoChoice, HybridSwitch, auto_modes, hybrid_switches
from agac.engine.report.jsondoc import ABSENT_WHEN_EMPTY, ABSENT_WHEN_NONE, JSONView
from agac.engine.report.waiting import (
    ApprovalWait,
    WaitingRow,
    awaiting_approval,
    unknown_effects,
    waiting_on,
)
from agac.store.values import FINAL_STATES
from agac.tenants import DEFAULT_TENANT

if TYPE_CHECKING:
    from agac.store.repository import Store
    from agac.store.values import RunRecord

__all__ = ["RunError", "RunSummary", "build_summary", "next_command", "run_error"]


@dataclass(frozen=True)
class RunError:
    """Why a run ended on an error, in the one shape every error has (docs/cli.md, Errors)."""

    code: str
    message: str
    hint: str | None = None


@dataclass(frozen=True, eq=False)
class RunSummary(JSONView):
    """A run's summary (§7.1): what ``agac run``/``agac status`` print and ``--json``
    emits. The parts after ``actions`` are present only when they apply."""

    run_id: str
    workflow: str
    tenant: str
    state: str
    retry_of: str | None
    cost_usd: float
    next: str | None
    actions: dict[str, ActionSummary]
    waiting_on: tuple[WaitingRow, ...] = field(default=(), metadata=ABSENT_WHEN_EMPTY)
    """B4, B0: each batch still out, and each file a batch action cannot send yet."""
    effects_unknown: tuple[str, ...] = field(default=(), metadata=ABSENT_WHEN_EMPTY)
    """E2: ids of effects a person settles (``agac effects resolve``)."""
    awaiting_approval: ApprovalWait | None = field(default=None, metadata=ABSENT_WHEN_NONE)
    """A1: units waiting on people (counted in ``pending``), with the first proposals."""
    deadline_at: float | None = field(default=None, metadata=ABSENT_WHEN_NONE)
    hybrid: dict[str, HybridSwitch] = field(default_factory=dict, metadata=ABSENT_WHEN_EMPTY)
    """B13: per hybrid action, the instant it goes live and whether it switched."""
    auto_modes: dict[str, AutoChoice] = field(default_factory=dict, metadata=ABSENT_WHEN_EMPTY)
    """Per action of ``run_mode: auto``: the mode chosen at admission and why."""
    cheaper_starts: dict[str, float] = field(default_factory=dict, metadata=ABSENT_WHEN_EMPTY)
    """Per action ``run_mode: auto`` holds for its model's cheaper hours: the instant its
    calls start (chosen at admission), while that instant is still ahead."""
    cheaper_started: dict[str, float] = field(default_factory=dict, metadata=ABSENT_WHEN_EMPTY)
    """The same instants once they have passed: the action's calls are sent in the cheaper
    hours (since then)."""
    budget: BudgetReport | None = field(default=None, metadata=ABSENT_WHEN_NONE)
    advice: tuple[Advice, ...] = field(default=(), metadata=ABSENT_WHEN_EMPTY)
    error: RunError | None = field(default=None, metadata=ABSENT_WHEN_NONE)
    checks: dict[str, dict[str, CheckRate]] = field(
        default_factory=dict, metadata=ABSENT_WHEN_EMPTY
    )
    """Per action with ``checks:``, per check: units it passed and failed, and its rate."""


def build_summary(store: Store, run: RunRecord, *, counted: RunSummary | None = None) -> RunSummary:
    """The run's summary. ``counted``: a summary of the same run built since its last unit
    settled (as ``finalize`` builds one before it ends the run); its per-action counts and
    cost are taken as they are instead of being counted again, everything else is read
    anew."""
    graph = run_graph(run)
    if counted is not None:
        return _summary(store, run, graph, counted.actions, counted.cost_usd)
    actions, cost = count_actions(store, run, graph)
    return _summary(store, run, graph, actions, cost)


def _summary(
    store: Store,
    run: RunRecord,
    graph: RunGraph,
    actions: dict[str, ActionSummary],
    cost: float,
) -> RunSummary:
    states = store.action_states(run.id)
    now = store.clock.time()
    error = run.error or "; ".join(
        why for state, why in states.values() if state == "failed" and why
    )
    summary = RunSummary(
        run_id=run.id,
        workflow=run.workflow,
        tenant=run.tenant,
        state=run.state,
        retry_of=run.retry_of,
        cost_usd=round(cost, 6),
        next=None,
        actions=actions,
        waiting_on=waiting_on(store, run, graph),
        effects_unknown=unknown_effects(store, run),
        awaiting_approval=awaiting_approval(store, run),
        deadline_at=run.settings.deadline_at,
        auto_modes=auto_modes(graph),
        hybrid=hybrid_switches(run, states),
        cheaper_starts={a: at for a, at in run.settings.start_at.items() if at > now},
        cheaper_started={a: at for a, at in run.settings.start_at.items() if at <= now},
        budget=budget_report(store, run),
        advice=advise(store, run, actions),
        error=run_error(run.state, error) if error else None,
        checks=check_rates(store, run.id),
    )
    return replace(summary, next=next_command(summary))


_END_CODES = {"cancelled": "cancelled", "timed_out": "deadline", "exhausted": "budget_exhausted"}


def run_error(state: str, message: str) -> RunError:
    """Why a run ended on an error: the code is the run's end reason (``cancelled``,
    ``deadline``, ``budget_exhausted``; ``run_ended`` otherwise)."""
    return RunError(_END_CODES.get(state, "run_ended"), message)


def next_command(summary: RunSummary) -> str | None:
    """The command that moves the run on: settle its unknown effects, decide its
    proposals, continue it, start it anew, retry its failures, or export its answers."""
    wf = summary.workflow
    tenant = summary.tenant or DEFAULT_TENANT
    if tenant != DEFAULT_TENANT:
        wf = f"{wf} --tenant {tenant}"
    state = summary.state
    failed = sum(a.failed for a in summary.actions.values())
    if summary.effects_unknown:
        return f"agac effects list {wf}"
    if summary.awaiting_approval:
        return f"agac approvals list {wf}"
    if state not in FINAL_STATES:
        return f"agac run {wf}"
    if state in ("cancelled", "exhausted", "timed_out") or _unreachable(summary):
        return f"agac run {wf}"  # a new run reuses every answer paid for
    if failed and _only_unfixed_by_retry(summary):
        return f"agac run {wf}"  # after the fix the summary's advice names
    if failed:
        return f"agac retry {wf}"
    names = list(summary.actions)
    if names:
        return f"agac export {wf} --action {names[-1]} --format jsonl"
    return None


def _unreachable(summary: RunSummary) -> bool:
    """An action paused on an unreachable provider: the next run asks its units again."""
    return any(a.reasons.get("provider_unreachable") for a in summary.actions.values())


def _only_unfixed_by_retry(summary: RunSummary) -> bool:
    """Every failure is of a reason a retry cannot fix (a new run after the fix can)."""
    reasons = {r for a in summary.actions.values() for r in a.reasons if r not in SKIP_REASONS}
    return bool(reasons) and reasons <= NOT_FIXED_BY_RETRY

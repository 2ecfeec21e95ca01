"""The team-facing library (T2, T3, T5, T6): what a signed-in person sees and
decides, every call given a long-lived store and the caller as a :class:`Principal`.

**Tenant filtering lives here**, so the service and any other front end refuse the same
things: every lookup passes the principal's tenants down to the engine and the store
(``tenants=``, as every :mod:`agac.api` call does through its
:class:`~agac.api.projects.Scope`), so a run — and everything of a run: its records,
proposals, cost, batches — of another tenant is :class:`NotFound`, never "forbidden",
and nobody learns that it exists. Lists are filtered and paged in SQL.
"""

from __future__ import annotations

import difflib
import json
import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agac.errors import NotFound, UsageError
from agac.jsontext import loads

if TYPE_CHECKING:
    from agac.api.identity import Principal
    from agac.config.project import Project
    from agac.engine.report.cost import CostReport
    from agac.engine.report.status import RunPage
    from agac.store.repository import Store
    from agac.store.values import RunRecord

__all__ = [
    "MAX_PAGE",
    "PER_PAGE",
    "RunDetail",
    "approvals_for",
    "cost_over_time",
    "decide",
    "events_after",
    "record_view",
    "run_detail",
    "run_items",
    "run_summary",
    "runs_page",
    "visible_run",
    "visible_runs",
    "workers_for",
]

PER_PAGE = 50
RUN_STATES = (
    "queued",
    "running",
    "waiting",
    "awaiting_approval",
    "cancelling",
    "succeeded",
    "partial",
    "failed",
    "timed_out",
    "exhausted",
    "cancelled",
)


def visible_run(store: Store, principal: Principal, ref: str) -> Any:
    """The run ``ref`` (an id, or a unique prefix of one) if the principal may see it;
    NotFound when there is none or it is another tenant's."""
    row = store.get_run(ref, tenants=principal.tenants) if ref else None
    if row is None:
        raise NotFound(f"no run {ref!r}")
    return row


# -- runs ---------------------------------------------------------------------------------------


MAX_PAGE = 1_000_000_000
"""The last page number a listing takes: past it is a refusal (422), not an offset the
database cannot hold."""


def runs_page(
    store: Store,
    principal: Principal,
    *,
    page: int = 1,
    workflow: str | None = None,
    state: str | None = None,
    per_page: int = PER_PAGE,
) -> dict[str, Any]:
    """One page of the runs the principal may see, newest first, each with its progress."""
    if state is not None and state not in RUN_STATES:
        raise UsageError(f"unknown state {state!r} (states: {', '.join(RUN_STATES)})")
    page = max(int(page), 1)
    if page > MAX_PAGE:
        raise UsageError(f"page must be a whole number from 1 to {MAX_PAGE:,}")
    rows, total = store.runs_page(
        principal.tenants,
        workflow=workflow or None,
        state=[state] if state else None,
        offset=(page - 1) * per_page,
        limit=per_page,
    )
    return {
        "runs": run_items(store, rows),
        "page": page,
        "per_page": per_page,
        "total": total,
        "pages": max(math.ceil(total / per_page), 1),
        "workflow": workflow,
        "state": state,
    }


def visible_runs(store: Store, principal: Principal, ids: list[str]) -> list[dict[str, Any]]:
    """The list entries of the runs ``ids`` the principal may see (others are left out)."""
    rows = [r for r in (store.get_run(i, tenants=principal.tenants) for i in ids) if r is not None]
    return run_items(store, rows)


def run_items(store: Store, rows: list[RunRecord]) -> list[dict[str, Any]]:
    """The runs' list entries (T5): id, workflow, tenant, state, counts, cost, started,
    ended. An open run's counts come from its latest progress event (T6); a final run's,
    or one without progress events, from its outcomes."""
    from agac.store.repository import FINAL_STATES

    ids = [r.id for r in rows]
    records = store.record_counts([r.snapshot_id for r in rows])
    live = store.latest_events([r.id for r in rows if r.state not in FINAL_STATES], "progress")
    counted = [i for i in ids if i not in live]
    statuses = store.status_counts(counted)
    costs = store.run_costs(counted)
    out = []
    for r in rows:
        actions = r.action_names
        units = records.get(r.snapshot_id, 0) * len(actions)
        if r.id in live:
            data = loads(live[r.id].data)
            per = data.get("actions", {}).values()
            counts = {
                k: sum(int(a.get(k, 0)) for a in per) for k in ("answered", "failed", "skipped")
            }
            units = max(units, sum(int(a.get("records", 0)) for a in per))
            cost = float(data.get("cost_usd") or 0.0)
        else:
            st = statuses.get(r.id, {})
            counts = {k: int(st.get(k, 0)) for k in ("answered", "failed", "skipped")}
            cost = costs.get(r.id, 0.0)
        done = sum(counts.values())
        counts["pending"] = max(units - done, 0)
        out.append(
            {
                "id": r.id,
                "workflow": r.workflow,
                "tenant": r.tenant,
                "state": r.state,
                "retry_of": r.retry_of,
                "units": max(units, done),
                "counts": counts,
                "cost_usd": round(cost, 6),
                "started": r.created_at,
                "ended": r.ended_at,
            }
        )
    return out


def run_summary(store: Store, project: Project, principal: Principal, ref: str) -> RunPage:
    """The §7.1 summary of a run the principal may see, with its tenant (T5) and when it
    started and ended: what ``agac status`` says, through the same library call."""
    from agac.api.history import status
    from agac.engine.report.status import RunPage

    row = visible_run(store, principal, ref)
    return RunPage(
        status(row.id, project, principal=principal, store=store), row.created_at, row.ended_at
    )


@dataclass(frozen=True)
class RunDetail:
    """What a run's page shows (T6): the summary, failures grouped by reason with the
    first message and keys, the batches out with status and deadline, cost by action,
    model and tier with what batch saved, the proposals waiting, and the last event id
    (where the page's live stream starts)."""

    summary: RunPage
    failures: list[dict[str, Any]]
    batches: list[dict[str, Any]]
    cost: CostReport
    awaiting_approval: int
    last_event: int
    pilot: bool = False
    """The run is a pilot's (its report: ``/runs/{id}/pilot``)."""


def run_detail(store: Store, project: Project, principal: Principal, ref: str) -> RunDetail:
    """What a run's page shows (T6), of a run the principal may see."""
    from agac.engine.report.cost import cost_breakdown
    from agac.providers.pricing import PriceTable

    summary = run_summary(store, project, principal, ref)
    row = visible_run(store, principal, summary.status.summary.run_id)
    batches = [
        {
            "key": b.key,
            "action": b.action,
            "file": b.file,
            "part": b.part,
            "provider": b.provider,
            "provider_batch_id": b.provider_batch_id,
            "state": b.state,
            "raw_status": b.raw_status,
            "requests": b.request_count,
            "submitted_at": b.submitted_at,
            "deadline_at": b.deadline_at,
            "ended_at": b.ended_at,
        }
        for b in store.run_batches(row.id, row.workflow, row.tenant)
    ]
    waiting = store.count_proposals(row.id, ("pending",))
    return RunDetail(
        summary=summary,
        failures=store.failure_groups(row.id),
        batches=batches,
        cost=cost_breakdown(store, row, PriceTable(dict(project.config.prices))),
        awaiting_approval=sum(waiting.values()),
        last_event=store.last_event_id(),
        pilot=row.settings.overrides.get("pilot") is not None,
    )


def events_after(
    store: Store, principal: Principal, ref: str, after: int = 0, limit: int = 500
) -> tuple[Any, list[dict[str, Any]]]:
    """(the run, its events after event id ``after``, oldest first, at most ``limit``)."""
    row = visible_run(store, principal, ref)
    return row, [
        {
            "id": e.id,
            "run_id": e.run_id,
            "kind": e.kind,
            "action": e.action,
            "unit_key": e.unit_key,
            "data": loads(e.data),
            "created_at": e.created_at,
        }
        for e in store.iter_events(row.id, after, limit=limit)
    ]


def record_view(
    store: Store, project: Project, principal: Principal, run_ref: str, key: str
) -> dict[str, Any]:
    """A record's session (docs/workflow-reference.md, Fan-out and join) in a run the principal may see: what ``agac records
    show`` says, through the same library call."""
    from agac.api.history import record_session

    row = visible_run(store, principal, run_ref)
    try:
        doc = record_session(key, project, run_ref=row.id, principal=principal, store=store)
    except UsageError as exc:
        raise NotFound(f"run {row.id} has no record {key!r}") from exc
    if doc.get("record") is None and not store.unit_outcomes_under(row.id, key):
        raise NotFound(f"run {row.id} has no record {key!r}")
    return doc


# -- approvals (A2, A3, T3) -----------------------------------------------------------------------


def approvals_for(
    store: Store, project: Project, principal: Principal, *, every: bool = False
) -> list[dict[str, Any]]:
    """Proposals in the principal's tenants waiting for a decision (``every``: in any
    state), oldest first; each says whether this principal may decide on it
    (``may_decide``) and, for a revision, how it differs from what it revises (``diff``)."""
    from agac.engine.approvals.decisions import list_proposals
    from agac.engine.approvals.proposals import approver_refusal

    out = []
    for p in list_proposals(store, None, tenants=principal.tenants, every=every):
        p["may_decide"] = (
            approver_refusal(project, store, principal.name, p["approvers"], p["tenant"]) is None
        )
        p["diff"] = _revision_diff(store, p) if p.get("revises") else []
        out.append(p)
    return out


def decide(
    store: Store,
    project: Project,
    principal: Principal,
    ref: str,
    verb: str,
    *,
    reason: str | None = None,
    changes: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``approve``, ``reject`` (with ``reason``) or ``revise`` (with ``changes``) a proposal as
    the principal. A proposal of another tenant's run is NotFound; the engine then checks,
    now (T3), that the principal is active, in the run's tenant and an approver."""
    from agac.engine.approvals import decisions

    if verb not in ("approve", "reject", "revise"):
        raise UsageError(f"unknown decision {verb!r}: approve, reject or revise")
    if not ref:
        raise NotFound(f"no proposal {ref!r}")
    who = decisions.Decider(principal.name, signed_in=True)
    mine = principal.tenants
    if verb == "approve":
        return decisions.approve(project, store, ref, who, tenants=mine)
    if verb == "reject":
        return decisions.reject(project, store, ref, who, reason or "", tenants=mine)
    if verb == "revise":
        return decisions.revise(project, store, ref, who, dict(changes or {}), tenants=mine)
    raise UsageError(f"unknown decision {verb!r}: approve, reject or revise")


def _revision_diff(store: Store, proposal: dict[str, Any]) -> list[tuple[str, str]]:
    parent = store.get_proposal(proposal["revises"])
    if parent is None:
        return []
    before = json.dumps(loads(parent.arguments), indent=2, sort_keys=True, ensure_ascii=False)
    after = json.dumps(proposal["arguments"], indent=2, sort_keys=True, ensure_ascii=False)
    lines = []
    for line in difflib.unified_diff(
        before.splitlines(), after.splitlines(), "before", "after", lineterm="", n=2
    ):
        if line.startswith(("---", "+++")):
            continue
        kind = {"+": "add", "-": "del", "@": "hunk"}.get(line[:1], "same")
        lines.append((kind, line))
    return lines


# -- cost and workers -------------------------------------------------------------------------------


def cost_over_time(
    store: Store, principal: Principal, *, days: int = 30, clock: Any = time.time
) -> dict[str, Any]:
    """Spending per day over the last ``days`` days, per workflow and model, in the
    principal's tenants: ``days`` (bucket starts), ``series`` [{workflow, model, cost per
    day, total}] largest first, and the total."""
    bucket = 86400.0
    today = math.floor(clock() / bucket) * bucket
    since = today - (days - 1) * bucket
    starts = [since + i * bucket for i in range(days)]
    series: dict[tuple[str, str], list[float]] = {}
    calls: dict[tuple[str, str], int] = {}
    for r in store.cost_series(principal.tenants, since=since, bucket=bucket):
        key = (r.workflow, f"{r.provider}/{r.model}")
        at = round((float(r.bucket) - since) / bucket)
        if not 0 <= at < days:
            continue
        series.setdefault(key, [0.0] * days)[at] += float(r.cost or 0.0)
        calls[key] = calls.get(key, 0) + int(r.calls)
    out: list[dict[str, Any]] = [
        {
            "workflow": w,
            "model": m,
            "cost": [round(c, 6) for c in costs],
            "total": round(sum(costs), 6),
            "calls": calls[(w, m)],
        }
        for (w, m), costs in sorted(series.items(), key=lambda kv: (-sum(kv[1]), kv[0]))
    ]
    return {"days": starts, "series": out, "total": round(sum(sum(c) for c in series.values()), 6)}


def workers_for(store: Store, principal: Principal) -> list[dict[str, Any]]:
    """Live workers with only the shards they hold for runs the principal may see; other
    tenants' holdings are left out, not counted."""
    from agac.engine.workers.fleet import list_workers

    if not store.shares_work:
        return []
    return list_workers(store, tenants=principal.tenants)

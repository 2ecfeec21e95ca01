"""The run summary of docs/cli.md, agac status, computed from the store (never from memory), with the
run's ``tenant`` (§13 T2): a typed value (:class:`RunSummary`, one
:class:`ActionSummary` per action) whose :meth:`RunSummary.to_dict` is the summary's JSON.
Both read as mappings too (``summary["actions"]["classify"]["answered"]``), as the JSON
does."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any

from agac.engine.batch.billing import UNREAD_ORIGIN
from agac.engine.batch.hybrid import LIVE_STATE, OVERLAP_ORIGIN
from agac.engine.graph import RunGraph, run_graph
from agac.engine.requests import effect_id
from agac.engine.walk.steps import expected_units
from agac.jsontext import loads
from agac.keys import record_of
from agac.providers.base import Usage, server_tool_counts
from agac.reasons import REASONS, reason_code
from agac.store.values import FINAL_STATES
from agac.tenants import DEFAULT_TENANT

if TYPE_CHECKING:
    from agac.providers.pricing import PriceTable
    from agac.store.repository import Store
    from agac.store.rows import UsageTotal
    from agac.store.values import RunRecord

__all__ = ["ActionSummary", "RunSummary", "build_summary", "cost_breakdown", "next_command"]


class _AsMapping(Mapping[str, Any]):
    """A frozen value that also reads as its JSON object (keys in the JSON's order)."""

    def to_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    def __getitem__(self, key: str) -> Any:
        return self.to_dict()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.to_dict())

    def __len__(self) -> int:
        return len(self.to_dict())


@dataclass(frozen=True, eq=False)
class ActionSummary(_AsMapping):
    """One action's units by bucket (``records`` = answered + failed + skipped + pending),
    its calls (``unknown_calls`` of them with an outcome never stored, S1), answers reused,
    tool calls, batches out, cost, and its failures and skips by reason."""

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
    cost_usd: float = 0.0
    reasons: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            f.name: (dict(self.reasons) if f.name == "reasons" else getattr(self, f.name))
            for f in fields(self)
        }


@dataclass(frozen=True, eq=False)
class RunSummary(_AsMapping):
    """A run's summary (§7.1): what ``agac run``/``agac status`` print and ``--json``
    emits (:meth:`to_dict`). The optional parts are present only when they apply."""

    run_id: str
    workflow: str
    tenant: str
    state: str
    retry_of: str | None
    cost_usd: float
    next: str | None
    actions: dict[str, ActionSummary]
    waiting_on: tuple[dict[str, Any], ...] = ()
    """B4, B0: each batch still out, and each file a batch action cannot send yet."""
    effects_unknown: tuple[str, ...] = ()
    """E2: ids of effects a person settles (``agac effects resolve``)."""
    awaiting_approval: dict[str, Any] | None = None
    """A1: units waiting on people (counted in ``pending``), with the first proposals."""
    deadline_at: float | None = None
    hybrid: dict[str, dict[str, Any]] | None = None
    """B13: per hybrid action, the instant it goes live and whether it switched."""
    auto_modes: dict[str, dict[str, str]] = field(default_factory=dict)
    """Per action of ``run_mode: auto``: the mode chosen at admission and why."""
    budget: dict[str, Any] | None = None
    advice: tuple[dict[str, Any], ...] = ()
    error: dict[str, Any] | None = None
    checks: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    """Per action with ``checks:``, per check: units it ``passed`` and ``failed``, and its
    pass ``rate`` (of the units it judged)."""

    def to_dict(self) -> dict[str, Any]:
        """The summary's JSON, keys in this order; optional parts only when present."""
        out: dict[str, Any] = {
            "run_id": self.run_id,
            "workflow": self.workflow,
            "tenant": self.tenant,
            "state": self.state,
            "retry_of": self.retry_of,
            "cost_usd": self.cost_usd,
            "next": self.next,
            "actions": {n: a.to_dict() for n, a in self.actions.items()},
        }
        if self.waiting_on:
            out["waiting_on"] = list(self.waiting_on)
        if self.effects_unknown:
            out["effects_unknown"] = list(self.effects_unknown)
        if self.awaiting_approval is not None:
            out["awaiting_approval"] = self.awaiting_approval
        if self.deadline_at is not None:
            out["deadline_at"] = self.deadline_at
        if self.hybrid:
            out["hybrid"] = self.hybrid
        if self.auto_modes:
            out["auto_modes"] = {n: dict(c) for n, c in self.auto_modes.items()}
        if self.budget is not None:
            out["budget"] = self.budget
        if self.advice:
            out["advice"] = list(self.advice)
        if self.error is not None:
            out["error"] = self.error
        if self.checks:
            out["checks"] = self.checks
        return out


def build_summary(store: Store, run: RunRecord, *, counted: RunSummary | None = None) -> RunSummary:
    """``counted``: a summary of the same run built since its last unit settled (as
    ``finalize`` builds one before it ends the run); its per-action counts and cost are
    taken as they are instead of being counted again, everything else is read anew."""
    graph = run_graph(run)
    if counted is not None:
        return _summary(store, run, graph, counted.actions, counted.cost_usd)
    info = store.snapshot_info(run.snapshot_id)
    records = info.record_count if info else 0
    actions: dict[str, dict[str, Any]] = {}
    counts = _unit_counts(store, run.id, graph, records)
    for a in graph.actions:
        actions[a.name] = {
            "records": counts.get(a.name, records),
            "answered": 0,
            "failed": 0,
            "skipped": 0,
            "pending": 0,
            "calls": 0,
            "unknown_calls": 0,
            "reused": 0,
            "tool_calls": 0,
            "batches_out": 0,
            "cost_usd": 0.0,
            "reasons": {},
        }
    for row in store.outcome_counts(run.id):
        entry = actions.get(row.action)
        if entry is None:
            continue
        entry[row.status] = entry.get(row.status, 0) + row.n
        if row.status == "answered" and row.origin in ("reused", "carried"):
            entry["reused"] += row.n
        if row.reason and row.status in ("failed", "skipped"):
            entry["reasons"][row.reason] = entry["reasons"].get(row.reason, 0) + row.n
    cost = 0.0
    for total in store.usage_totals([run.id]):
        entry = actions.get(total.action)
        if entry is None:
            continue
        if total.kind == "tool":
            entry["tool_calls"] += total.calls
        elif total.tier != "batch":  # batch items are counted as sent, below
            entry["calls"] += total.calls
            if total.origin == "unknown":  # S1: of ``calls``, those whose outcome is unknown
                entry["unknown_calls"] += total.calls
        entry["cost_usd"] += total.cost_usd
        cost += total.cost_usd
    for name, counts in store.batch_counts(run.id, run.workflow, tenant=run.tenant).items():
        if name in actions:
            actions[name]["calls"] += counts["sent"]
            actions[name]["batches_out"] = counts["out"]
    frozen = {}
    for name, entry in actions.items():
        settled = entry["answered"] + entry["failed"] + entry["skipped"]
        entry["pending"] = max(entry["records"] - settled, 0)
        entry["cost_usd"] = round(entry["cost_usd"], 6)
        frozen[name] = ActionSummary(**entry)
    return _summary(store, run, graph, frozen, cost)


def _summary(
    store: Store,
    run: RunRecord,
    graph: RunGraph,
    actions: dict[str, ActionSummary],
    cost: float,
) -> RunSummary:
    # B4, B0: each batch still out, and each file a batch action cannot send yet
    waiting = tuple(waiting_on(store, run, graph))
    unknown = tuple(
        effect_id(e.key)
        for e in store.list_effects(run.workflow, tenants=(run.tenant,), states=("unknown",))
    )  # E2: a person settles them
    awaiting_approval = None
    if run.state not in FINAL_STATES:
        awaiting = store.count_proposals(run.id, ("pending",))
        if awaiting:  # A1: units waiting on a person's decision (counted in ``pending``)
            awaiting_approval = {
                "units": sum(awaiting.values()),
                "actions": awaiting,
                "proposals": [
                    {
                        "id": p.id,
                        "action": p.action,
                        "record": p.unit_key,
                        "expires_at": p.expires_at,
                    }
                    for p in store.list_proposals(
                        run_id=run.id, tenants=(run.tenant,), states=("pending",), limit=20
                    )
                ],
            }
    settings = run.settings
    budget = None
    if settings.budget is not None:
        from agac.engine.limits.budget import spent_by

        usd, tokens = spent_by(store, run)
        budget = {**settings.budget.to_dict(), "spent_usd": round(usd, 6), "spent_tokens": tokens}
    states = store.action_states(run.id)
    error = run.error or "; ".join(
        why for state, why in states.values() if state == "failed" and why
    )
    hybrid = {
        a: {"live_at": at, "switched": states.get(a, ("", None))[0] == LIVE_STATE}
        for a, at in settings.live_at.items()
    }
    summary = RunSummary(
        run_id=run.id,
        workflow=run.workflow,
        tenant=run.tenant,
        state=run.state,
        retry_of=run.retry_of,
        cost_usd=round(cost, 6),
        next=None,
        actions=actions,
        waiting_on=waiting,
        effects_unknown=unknown,
        awaiting_approval=awaiting_approval,
        deadline_at=settings.deadline_at,
        auto_modes=auto_modes(graph),
        hybrid=hybrid or None,
        budget=budget,
        advice=tuple(_advice(store, run, actions)),
        error=run_error(run.state, error) if error else None,
        checks=check_rates(store, run.id),
    )
    return replace(summary, next=next_command(summary))


def check_rates(store: Store, run_id: str) -> dict[str, dict[str, dict[str, Any]]]:
    """Per action, per check (in the order written): the units it passed and failed in
    the run, and its pass rate."""
    tally: dict[str, dict[str, list[int]]] = {}
    for row in store.check_counts(run_id):
        verdicts = loads(row.checks)
        per = tally.setdefault(row.action, {})
        for name, passed in verdicts.items():
            counts = per.setdefault(name, [0, 0])
            counts[0 if passed else 1] += row.n
    return {
        action: {
            name: {"passed": p, "failed": f, "rate": round(p / (p + f), 4)}
            for name, (p, f) in per.items()
        }
        for action, per in tally.items()
    }


def auto_modes(graph: RunGraph) -> dict[str, dict[str, str]]:
    """What ``run_mode: auto`` chose at admission for each of the run's actions it chose
    for (``mode``, and ``why``: the reason code and its words)."""
    return {
        a.name: {"mode": str(a.run_mode), "why": a.auto_choice}
        for a in graph.actions
        if a.auto_choice
    }


def waiting_on(store: Store, run: RunRecord, graph: RunGraph) -> list[dict[str, Any]]:
    """What the run waits for in batches: every batch of its actions still out
    (``action``, ``file``, ``batch_id`` — None for an intent the provider may not have —,
    ``key``, ``state``, ``status``: the provider's last word), and, while the run is not
    final, each input file a batch action cannot send yet because batches upstream of it
    for that file are still out (B4: ``batch_id`` None, ``state`` ``waiting``,
    ``waits_on``: those batches' ids). A final run's batches still out are adopted by the
    next run (B0)."""
    order = {name: i for i, name in enumerate(graph.order)}
    out = sorted(
        (
            b
            for b in store.list_batches(run.workflow, tenants=(run.tenant,), open_only=True)
            if b.action in order
        ),
        key=lambda b: (order[b.action], b.file, b.part),
    )
    rows: list[dict[str, Any]] = []
    ids: dict[tuple[str, str], list[str]] = {}
    for b in out:
        rows.append(
            {
                "action": b.action,
                "file": b.file,
                "batch_id": b.provider_batch_id,
                "key": b.key,
                "state": b.state,
                "status": b.raw_status,
            }
        )
        ids.setdefault((b.action, b.file), []).append(b.provider_batch_id or b.key)
    if run.state in FINAL_STATES or not ids:
        return rows
    info = store.snapshot_info(run.snapshot_id)
    files = [f["file"] for f in loads(info.files)] if info else []
    for a in graph.actions:
        if a.kind != "llm" or a.run_mode != "batch":
            continue
        for file in files:
            upstream = [i for anc in a.ancestors for i in ids.get((anc, file), [])]
            if upstream and (a.name, file) not in ids:
                rows.append(
                    {
                        "action": a.name,
                        "file": file,
                        "batch_id": None,
                        "key": None,
                        "state": "waiting",
                        "status": None,
                        "waits_on": upstream,
                    }
                )
    return rows


SKIP_REASONS = frozenset(code for code, r in REASONS.items() if r.bucket == "skipped")
"""Reasons of skipped units (agac/reasons.py); every other reason is a failure's."""

ADVISED_SKIPS = frozenset({"provider_unreachable"})
"""Skips whose fix the summary says, as a failure's (for the action that sent the calls,
not the actions skipped after it): the provider, not the workflow."""

NOT_FIXED_BY_RETRY = frozenset(
    code for code, r in REASONS.items() if r.bucket == "failed" and not r.retry
) | {"batch_refused"}
"""Failures a retry alone does not fix (the same request fails the same way; a refused
batch: `agac retry` is refused while the other files' batches are out): the summary says
the fix, and ``next`` is the `agac run` that works after it."""

_SHOWS = {
    "render_error": " — `agac render {wf} --record {record} --action {action}` shows "
    "the template's request for the first one",
    "tool_error": " — `agac records show {key} --workflow {wf}` shows the traceback",
}


def _advice(
    store: Store, run: RunRecord, actions: Mapping[str, ActionSummary]
) -> list[dict[str, Any]]:
    """For an action whose failures are mostly of one reason — most of its units, or a
    reason a retry cannot fix — that reason's first message and its fix."""
    out = []
    for name, entry in actions.items():
        failures = {
            r: n
            for r, n in entry.reasons.items()
            if r not in SKIP_REASONS or (r in ADVISED_SKIPS and entry.calls)
        }
        if not failures:
            continue
        reason, n = max(failures.items(), key=lambda item: item[1])
        if n * 2 < entry.records and reason not in NOT_FIXED_BY_RETRY:
            continue
        first = store.first_failure(run.id, name, reason)
        key = first.unit_key if first is not None else ""
        code = reason_code(reason)
        fix = (
            (code.fix if code is not None else "see `agac records show KEY`")
            .replace("WF", run.workflow)
            .replace("KEY", key)
        )
        fix += _SHOWS.get(reason, "").format(
            wf=run.workflow, record=record_of(key), key=key, action=name
        )
        out.append(
            {
                "action": name,
                "reason": reason,
                "status": "skipped" if reason in SKIP_REASONS else "failed",
                "units": n,
                "first": {"key": key, "detail": first.detail if first is not None else None},
                "fix": fix,
            }
        )
    return out


_END_CODES = {"cancelled": "cancelled", "timed_out": "deadline", "exhausted": "budget_exhausted"}


def run_error(state: str, message: str) -> dict[str, Any]:
    """Why a run ended on an error, in the one shape every error has (docs/cli.md, Errors):
    ``{"code", "message", "hint"}``; the code is the run's end reason
    (``cancelled``, ``deadline``, ``budget_exhausted``; ``run_ended`` otherwise)."""
    return {"code": _END_CODES.get(state, "run_ended"), "message": message, "hint": None}


def _unit_counts(store: Store, run_id: str, graph: RunGraph, records: int) -> dict[str, int]:
    """Units per action (docs/cli.md, agac status): one per record, but one per item inside a fan-out
    (counted from the stored fan-outs); empty for a workflow without fan-outs."""
    regions = graph.regions
    if regions is None:
        return {}
    totals = store.fanout_totals(run_id)
    return {a: expected_units(regions, a, records, totals) for a in graph.order}


def next_command(summary: Mapping[str, Any]) -> str | None:
    wf = summary["workflow"]
    tenant = summary.get("tenant") or DEFAULT_TENANT
    if tenant != DEFAULT_TENANT:
        wf = f"{wf} --tenant {tenant}"
    state = summary["state"]
    failed = sum(a["failed"] for a in summary["actions"].values())
    if summary.get("effects_unknown"):
        return f"agac effects list {wf}"
    if summary.get("awaiting_approval"):
        return f"agac approvals list {wf}"
    if state not in FINAL_STATES:
        return f"agac run {wf}"
    if state in ("cancelled", "exhausted", "timed_out") or _unreachable(summary):
        return f"agac run {wf}"  # a new run reuses every answer paid for
    if failed and _only_unfixed_by_retry(summary):
        return f"agac run {wf}"  # after the fix the summary's advice names
    if failed:
        return f"agac retry {wf}"
    names = list(summary["actions"])
    if names:
        return f"agac export {wf} --action {names[-1]} --format jsonl"
    return None


def _unreachable(summary: Mapping[str, Any]) -> bool:
    """An action paused on an unreachable provider: the next run asks its units again."""
    return any(a["reasons"].get("provider_unreachable") for a in summary["actions"].values())


def _only_unfixed_by_retry(summary: Mapping[str, Any]) -> bool:
    """Every failure is of a reason a retry cannot fix (a new run after the fix can)."""
    reasons = {
        r for a in summary["actions"].values() for r in a["reasons"] if r not in SKIP_REASONS
    }
    return bool(reasons) and reasons <= NOT_FIXED_BY_RETRY


def _tool_uses(store: Store, run_id: str) -> dict[tuple[str | None, ...], dict[str, int]]:
    """Server-tool uses summed per ledger group (as :meth:`usage_totals` groups)."""
    out: dict[tuple[str | None, ...], dict[str, int]] = {}
    for r in store.usage_tool_uses([run_id]):
        counts = out.setdefault((r.action, r.kind, r.provider, r.model, r.tier, r.origin), {})
        for name, n in (loads(r.server_tools) or {}).items():
            counts[name] = counts.get(name, 0) + int(n)
    return out


_DISCOUNTED = ("batch", "flex")
"""Ledger tiers billed below the live price: what each saved is shown apart."""

_NOT_USED = (UNREAD_ORIGIN, OVERLAP_ORIGIN)
"""Ledger origins of answers billed but never used: they save nothing (B7, B13)."""


@dataclass
class _LedgerGroup:
    """One line of ``agac cost``: the ledger's totals of one (action, kind, provider,
    model, tier, origin) group, summed over its long-context bands."""

    first: UsageTotal
    """The group's first totals row (its names)."""
    calls: int = 0
    cost: float = 0.0
    saved: float = 0.0
    """What its tier (batch or flex) saved against the live price of the same work."""
    cached: float = 0.0
    priced: int = 0
    estimated: int = 0
    usage: Usage = field(default_factory=Usage)
    """Its tokens, all bands together."""

    def add(self, r: UsageTotal) -> Usage:
        """Count one totals row (one band of the group) in; its usage."""
        usage = Usage(
            r.input_tokens,
            r.output_tokens,
            r.cached_tokens,
            r.cache_write_tokens,
            r.reasoning_tokens,
        )
        self.calls += r.calls
        self.cost += r.cost_usd
        self.priced += r.priced
        self.estimated += r.estimated
        self.usage = self.usage.plus(usage)
        return usage


def cost_breakdown(store: Store, run: RunRecord, prices: PriceTable) -> dict[str, Any]:
    """``agac cost``: cost per action, model, tier (live/batch/flex) and origin, what batch
    and flex each saved against the live price of the same tokens (a flex tier billed at
    the on-demand price, as Groq's, saves nothing), and what prompt caching saved
    against the same tokens sent uncached at the row's tier (:func:`cache_saving`).
    ``prices`` is a :class:`PriceTable`. Origin ``unread``: answers the provider billed
    in a batch agac did not read, with how many of them are ``estimated``
    (engine/batch/billing.py); ``hybrid_overlap``: answers of a batch cancelled to go
    live for units already answered live (B13); neither saving counts either. Origin
    ``cache_storage`` (kind ``cache``): keeping the run's explicit context caches, one row
    per cache (engine/lifecycle/contextcaches.py)."""
    graph = run_graph(run)
    hour = {a.name for a in graph.actions if a.cache_ttl == "1h"}
    tools = _tool_uses(store, run.id)
    # A long-context tier applies per call: the calls of each tier are totalled apart.
    models = {a.model for a in graph.actions if a.model}
    totals = store.usage_totals([run.id], bands=prices.thresholds(models))
    groups: dict[tuple[str | None, ...], _LedgerGroup] = {}
    for r in totals:
        group: tuple[str | None, ...] = (r.action, r.kind, r.provider, r.model, r.tier, r.origin)
        g = groups.setdefault(group, _LedgerGroup(r))
        usage = g.add(r)
        if r.kind != "llm" or r.origin in _NOT_USED:  # paid for, never used: no saving
            continue
        model = f"{r.provider}/{r.model}"
        if r.tier in _DISCOUNTED:
            g.saved += prices.cost(model, usage, "live", calls=r.calls) - prices.cost(
                model, usage, r.tier, calls=r.calls
            )
        g.cached += cache_saving(
            prices,
            model,
            usage,
            r.tier,
            calls=r.calls,
            one_hour=r.provider == "anthropic" and r.action in hour,
        )
    rows = []
    total = by_cache = 0.0
    saved = dict.fromkeys(_DISCOUNTED, 0.0)
    for group, g in groups.items():
        r, used = g.first, tools.get(group, {})
        model = f"{r.provider}/{r.model}"
        if used and r.kind == "llm" and r.tier in _DISCOUNTED and r.origin not in _NOT_USED:
            uses = Usage(server_tools=server_tool_counts(used))
            g.saved += prices.cost(model, uses, "live") - prices.cost(model, uses, r.tier)
        total += g.cost
        if r.tier in saved:
            saved[r.tier] += max(g.saved, 0.0)
        by_cache += g.cached
        u = g.usage
        row = {
            "action": r.action,
            "kind": r.kind,
            "provider": r.provider,
            "model": r.model,
            "tier": r.tier,
            "origin": r.origin or "call",
            "calls": g.calls,
            "input_tokens": u.input_tokens,
            "cached_tokens": u.cached_tokens,
            "cache_write_tokens": u.cache_write_tokens,
            "output_tokens": u.output_tokens,
            "reasoning_tokens": u.reasoning_tokens,
            "server_tools": dict(server_tool_counts(used)),
            "cost_usd": round(g.cost, 6),
        }
        if u.cached_tokens or u.cache_write_tokens:
            row["cache_saved_usd"] = round(g.cached, 6)
        if r.origin == "unknown":  # S1: sent or about to be when its process stopped
            row["priced_by_a_later_answer"] = g.priced
        if r.origin == UNREAD_ORIGIN:  # billed in a batch agac did not read (B7, given up)
            row["estimated"] = g.estimated
        rows.append(_priced(row, prices, model, list(used)))
    return {
        "run_id": run.id,
        "workflow": run.workflow,
        "tenant": run.tenant,
        "cost_usd": round(total, 6),
        "batch_saved_usd": round(saved["batch"], 6),
        "flex_saved_usd": round(saved["flex"], 6),
        "cache_saved_usd": round(by_cache, 6),
        "rows": rows,
    }


def _priced(
    row: dict[str, Any], prices: PriceTable, model: str, tools: list[str]
) -> dict[str, Any]:
    """A cost row with what its price says: never a silent $0 — a model call's price
    status (``unpriced``, a ``derived`` batch price) and its unpriced server tools; an
    explicit cache's storage without a known price, ``unpriced``."""
    if row["kind"] == "cache" and prices.storage(model) is None:
        row["price"] = "unpriced"
    if row["kind"] == "llm":
        row["price"] = prices.status(model, row["tier"])
        unpriced = prices.unpriced_tools(model, tools)
        if unpriced:
            row["unpriced_tools"] = unpriced
    return row


def cache_saving(
    prices: PriceTable,
    model: str,
    usage: Usage,
    tier: str,
    *,
    one_hour: bool = False,
    calls: int = 1,
) -> float:
    """What prompt caching saved on ``usage`` at ``tier``: its cost with the cached reads
    and cache writes counted as ordinary input, less its cost with them — Σ cached tokens
    × (input − cached_input) − cache writes × (cache_write − input), at the tier's rates
    (a batch tier's own, or the derived half). Negative when writes cost more than reads
    saved. The ledger's token columns do not tell a 5-minute cache write from a 1-hour
    one (the row's cost does): ``one_hour`` (an Anthropic action with ``cache_ttl: 1h``)
    prices its writes at the price table's 1-hour write rate (2× input at Anthropic)."""
    if not usage.cached_tokens and not usage.cache_write_tokens:
        return 0.0
    uncached = Usage(
        usage.input_tokens + usage.cached_tokens + usage.cache_write_tokens,
        usage.output_tokens,
        0,
        0,
        usage.reasoning_tokens,
        usage.server_tools,
    )
    billed = usage
    if one_hour:
        billed = replace(usage, cache_write_1h_tokens=usage.cache_write_tokens)
    return prices.cost(model, uncached, tier, calls) - prices.cost(model, billed, tier, calls)

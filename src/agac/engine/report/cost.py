"""``agac cost``: a run's ledger per action, model, tier (live/batch/flex) and origin,
what batch and flex each saved against the live price of the same tokens (a flex tier
billed at the on-demand price, as Groq's, saves nothing), and what prompt caching saved
against the same tokens sent uncached (:func:`cache_saving`).

Origin ``unread``: answers the provider billed in a batch agac did not read, with how
many of them are ``estimated`` (engine/batch/billing.py); ``hybrid_overlap``: answers of
a batch cancelled to go live for units already answered live (B13); neither saving
counts either. Origin ``cache_storage`` (kind ``cache``): keeping the run's explicit
context caches, one row per cache (engine/lifecycle/contextcaches.py)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from agac.engine.batch.billing import UNREAD_ORIGIN
from agac.engine.batch.hybrid import OVERLAP_ORIGIN
from agac.engine.graph import run_graph
from agac.engine.report.jsondoc import (
    ABSENT,
    ABSENT_WHEN_EMPTY,
    ABSENT_WHEN_NONE,
    Absent,
    JSONView,
)
from agac.jsontext import loads
from agac.providers.base import Usage, server_tool_counts

if TYPE_CHECKING:
    from agac.providers.pricing import PriceTable
    from agac.store.repository import Store
    from agac.store.rows import UsageTotal
    from agac.store.values import RunRecord

__all__ = ["CostReport", "CostRow", "cache_saving", "cost_breakdown"]


@dataclass(frozen=True)
class CostRow:
    """One ledger group's line: its names, calls, tokens, server-tool uses and cost; what
    caching saved on it (when it read or wrote a cache); of ``unknown`` calls (S1) those a
    later answer priced; of ``unread`` ones those ``estimated``; what its price says
    (``unpriced``, a ``derived`` batch price) and its unpriced server tools."""

    action: str
    kind: str
    provider: str | None
    model: str | None
    tier: str
    origin: str
    calls: int
    input_tokens: int
    cached_tokens: int
    cache_write_tokens: int
    output_tokens: int
    reasoning_tokens: int
    server_tools: dict[str, int]
    cost_usd: float
    cache_saved_usd: float | None = field(default=None, metadata=ABSENT_WHEN_NONE)
    priced_by_a_later_answer: int | None = field(default=None, metadata=ABSENT_WHEN_NONE)
    estimated: int | None = field(default=None, metadata=ABSENT_WHEN_NONE)
    price: str | None | Absent = ABSENT
    """A model call's price status (None: priced as written), or ``unpriced`` storage."""
    unpriced_tools: tuple[str, ...] = field(default=(), metadata=ABSENT_WHEN_EMPTY)


@dataclass(frozen=True, eq=False)
class CostReport(JSONView):
    """A run's cost: its total, what batch, flex and caching saved, and its ledger's lines."""

    run_id: str
    workflow: str
    tenant: str
    cost_usd: float
    batch_saved_usd: float
    flex_saved_usd: float
    cache_saved_usd: float
    rows: tuple[CostRow, ...]


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


_Group = tuple[str | None, ...]


def cost_breakdown(store: Store, run: RunRecord, prices: PriceTable) -> CostReport:
    """The run's cost report, priced by ``prices``."""
    groups = _ledger_groups(store, run, prices)
    tools = _tool_uses(store, run.id)
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
        rows.append(_row(g, used, prices))
    return CostReport(
        run_id=run.id,
        workflow=run.workflow,
        tenant=run.tenant,
        cost_usd=round(total, 6),
        batch_saved_usd=round(saved["batch"], 6),
        flex_saved_usd=round(saved["flex"], 6),
        cache_saved_usd=round(by_cache, 6),
        rows=tuple(rows),
    )


def _ledger_groups(store: Store, run: RunRecord, prices: PriceTable) -> dict[_Group, _LedgerGroup]:
    """The run's ledger summed per group, with what batch and caching saved on each."""
    graph = run_graph(run)
    hour = {a.name for a in graph.actions if a.cache_ttl == "1h"}
    # A long-context tier applies per call: the calls of each tier are totalled apart.
    models = {a.model for a in graph.actions if a.model}
    groups: dict[_Group, _LedgerGroup] = {}
    for r in store.usage_totals([run.id], bands=prices.thresholds(models)):
        group: _Group = (r.action, r.kind, r.provider, r.model, r.tier, r.origin)
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
    return groups


def _row(g: _LedgerGroup, used: dict[str, int], prices: PriceTable) -> CostRow:
    """A group's line, with what its price says: never a silent $0 — a model call's price
    status (``unpriced``, a ``derived`` batch price) and its unpriced server tools; an
    explicit cache's storage without a known price, ``unpriced``."""
    r, u = g.first, g.usage
    model = f"{r.provider}/{r.model}"
    price: str | None | Absent = ABSENT
    unpriced: tuple[str, ...] = ()
    if r.kind == "cache" and prices.storage(model) is None:
        price = "unpriced"
    if r.kind == "llm":
        price = prices.status(model, r.tier)
        unpriced = tuple(prices.unpriced_tools(model, list(used)) or ())
    return CostRow(
        action=r.action,
        kind=r.kind,
        provider=r.provider,
        model=r.model,
        tier=r.tier,
        origin=r.origin or "call",
        calls=g.calls,
        input_tokens=u.input_tokens,
        cached_tokens=u.cached_tokens,
        cache_write_tokens=u.cache_write_tokens,
        output_tokens=u.output_tokens,
        reasoning_tokens=u.reasoning_tokens,
        server_tools=dict(server_tool_counts(used)),
        cost_usd=round(g.cost, 6),
        cache_saved_usd=round(g.cached, 6) if u.cached_tokens or u.cache_write_tokens else None,
        # S1: sent or about to be when its process stopped
        priced_by_a_later_answer=g.priced if r.origin == "unknown" else None,
        # billed in a batch agac did not read (B7, given up)
        estimated=g.estimated if r.origin == UNREAD_ORIGIN else None,
        price=price,
        unpriced_tools=unpriced,
    )


def _tool_uses(store: Store, run_id: str) -> dict[_Group, dict[str, int]]:
    """Server-tool uses summed per ledger group (as :meth:`usage_totals` groups)."""
    out: dict[_Group, dict[str, int]] = {}
    for r in store.usage_tool_uses([run_id]):
        counts = out.setdefault((r.action, r.kind, r.provider, r.model, r.tier, r.origin), {})
        for name, n in (loads(r.server_tools) or {}).items():
            counts[name] = counts.get(name, 0) + int(n)
    return out


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

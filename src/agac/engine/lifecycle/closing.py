"""Ending a run early: ``--new``/``--fresh``, a passed deadline (R4), ``agac cancel``.

Every unit of a run that ends early gets an outcome (S4): units never sent are skipped
with the stop's reason (``cancelled``, ``deadline``); units waiting on a batch that stays
out are skipped ``batch_outstanding`` (the next run adopts the batch, B0); units of a
batch cancelled at the provider fail ``batch_cancelled`` (B7: ``agac retry`` sends them
again); a unit whose effect is unknown fails ``effect_unknown`` (E2). Nothing here claims
that an effect was undone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agac.engine.graph import run_graph
from agac.engine.outcomes.marks import account_lost_calls
from agac.engine.transitions import Closing, close_unit
from agac.engine.walk.shards import shard_ranges
from agac.engine.walk.steps import unit_keys
from agac.jsontext import dumps, loads
from agac.keys import escape
from agac.store.batches import OPEN_BATCH_STATES
from agac.store.effects import UNSETTLED_EFFECT_STATES
from agac.store.rows import Checkpoint, EventRow

if TYPE_CHECKING:
    from agac.config.fanout import Regions
    from agac.store.repository import Store
    from agac.store.values import RunRecord

__all__ = ["close_run", "collect_garbage", "run_event"]


def run_event(
    run_id: str,
    kind: str,
    data: dict[str, Any],
    now: float,
    *,
    action: str | None = None,
    unit_key: str | None = None,
) -> Checkpoint:
    """A checkpoint of one run-level event (``run_admitted``, ``run_ended``, …; of one
    action or unit when given)."""
    return Checkpoint(events=(EventRow(run_id, kind, action, unit_key, dumps(data), now),))


def close_run(
    store: Store,
    run: RunRecord,
    state: str,
    why: str,
    *,
    reason: str = "cancelled",
    failed_in_batches: set[tuple[str, str]] | None = None,
    keep_proposals: bool = False,
) -> None:
    """End a non-final run now: every unit without an outcome is skipped ``reason`` —
    ``batch_outstanding`` when it waits on a batch that is still out (the next run adopts
    it, B0), as do the units downstream of it. Units in ``failed_in_batches`` (their
    batch was cancelled at the provider) fail ``batch_cancelled``. Proposals of the run that
    nobody acted on are withdrawn (they can no longer be approved), unless
    ``keep_proposals`` (``--new``: the next run reuses those still asked, A1).

    First, calls that may have been sent and never settled are counted (S1, §8): their
    units get outcomes below, which would hide them."""
    account_lost_calls(store, run)
    info = store.snapshot_info(run.snapshot_id)
    graph = run_graph(run)
    names = list(graph.order)
    closing = Closing(
        reason,
        why,
        graph.ancestors,
        # E2: a unit whose effect may or may not have happened fails ``effect_unknown``.
        unknown={
            (e.action, e.unit_key)
            for e in store.list_effects(
                run.workflow, tenants=(run.tenant,), states=UNSETTLED_EFFECT_STATES
            )
        },
        cancelled=failed_in_batches or set(),
    )
    regions = graph.regions
    for lo, hi in shard_ranges(loads(info.files) if info else []):
        have = {(o.action, o.unit_key) for o in store.outcomes_between(run.id, lo, hi)}
        records = list(store.iter_records(run.snapshot_id, lo, hi))
        expansions = store.fanouts_between(run.id, lo, hi) if regions is not None else {}
        out = _units_in_open_batches(
            store, run, names, [escape(r.key) for r in records], items=regions is not None
        )
        ended = []
        for r in records:
            units = _units(regions, names, r.key, expansions)
            waiting = {a for a, key in units if (a, key) in out}
            ended += [
                (r.seq, close_unit(closing, unit, waiting, out))
                for unit in units
                if unit not in have
            ]
        if ended:
            store.close_units(run.id, ended)
    if not keep_proposals:
        store.withdraw_proposals(run.id, f"its run ended {state}: {why}")
    store.end_run(run.id, state, why)
    store.checkpoint(
        run_event(run.id, "run_ended", {"state": state, "why": why}, store.clock.time())
    )


def _units(
    regions: Regions | None,
    names: list[str],
    record_key: str,
    expansions: dict[tuple[str, str], int],
) -> list[tuple[str, str]]:
    """(action, unit key) of every unit of one record: its items inside a fan-out."""
    if regions is None:
        return [(a, escape(record_key)) for a in names]
    return [(a, k) for a in names for k in unit_keys(regions, a, record_key, expansions)]


def _units_in_open_batches(
    store: Store, run: RunRecord, actions: list[str], keys: list[str], *, items: bool = False
) -> dict[tuple[str, str], str]:
    """(action, unit key) of the units waiting in a batch still out -> which batch."""
    out: dict[tuple[str, str], str] = {}
    for a in actions:
        for item in store.unit_items(run.workflow, a, keys, tenant=run.tenant, items=items):
            if item.batch_state in OPEN_BATCH_STATES and item.status == "pending":
                out[a, item.unit_key] = (
                    f"waiting on batch {item.provider_batch_id or item.batch_key}"
                    f" for {item.file}, still out: the next run adopts it (B0)"
                )
    return out


def collect_garbage(store: Store, keep_runs: int) -> dict[str, Any]:
    """``agac gc``: per tenant and workflow, keep the newest ``keep_runs`` final runs and
    every run not final; prune the outcomes, events and tool-loop turns of the others (answers, the cost
    ledger, batches and effects stay: answers remain reusable by fingerprint)."""
    pruned: list[str] = []
    seen: dict[tuple[str, str], int] = {}
    for run in store.list_runs(limit=10**9):  # newest first, every tenant's
        if not run.final or run.settings.pruned is not None:
            continue
        mine = (run.tenant, run.workflow)
        seen[mine] = seen.get(mine, 0) + 1
        if seen[mine] > keep_runs:
            pruned.append(run.id)
    counts = store.prune_runs(pruned)
    return {
        "pruned_runs": pruned,
        "keep_runs": keep_runs,
        **{f"deleted_{k}": v for k, v in counts.items() if k != "runs"},
    }

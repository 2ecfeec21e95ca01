"""What people (and the end of a run) do to batches outside the batch step: ask the
provider about one now, read its raw results for a person, cancel it, settle an intent
whose submission is unknown (B2, ``agac batch resolve``), and cancel or abandon every
batch of a workflow that is out (``agac cancel``, ``--fresh``, B10).

Nothing here collects results into the store: only a run records answers (S1).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection
from typing import TYPE_CHECKING, Any, TypeVar

from agac.engine.batch.billing import unread_rows
from agac.engine.batch.context import handle_of
from agac.engine.graph import run_graph
from agac.engine.transitions import Rewrite, abandon
from agac.errors import BatchNotEnded, NotFound, RefusedError, UsageError
from agac.jsontext import dumps
from agac.providers.base import BatchStatus, BilledWork
from agac.providers.factory import open_providers
from agac.providers.pricing import PriceTable
from agac.store.batches import BATCH_NOT_CANCELLED
from agac.store.rows import EventRow
from agac.store.values import OPEN_BATCH_STATES

if TYPE_CHECKING:
    from agac.config.project import Project
    from agac.providers.base import BatchHandle, Provider, Result
    from agac.store.repository import Store
    from agac.store.rows import UsageRow
    from agac.store.values import BatchItem, BatchRecord

T = TypeVar("T")

__all__ = [
    "UNSETTLED_STATES",
    "abandon_batches",
    "cancel_batch",
    "cancel_open_batches",
    "poll_batch",
    "read_results",
    "resolve_intent",
]

UNSETTLED_STATES = ("submitting", "unknown")
"""Intents whose submission is not known to have happened (B2)."""


def _with_provider(
    project: Project, row: BatchRecord, call: Callable[[Provider, BatchHandle], Awaitable[T]]
) -> T:
    """Run ``call(adapter, handle)`` for the batch's provider, closing the adapter after."""
    handle = handle_of(row)

    async def go() -> T:
        provider = open_providers([row.provider], project.config)[row.provider]
        try:
            return await call(provider, handle)
        finally:
            await provider.aclose()

    return asyncio.run(go())


def poll_batch(project: Project, row: BatchRecord) -> BatchStatus:
    """The provider's status of a batch now; the store is not changed (the next run
    records what it says)."""
    if not row.provider_batch_id:
        raise RefusedError(
            f"batch {row.key} has no provider batch id to ask about; its state is {row.state}"
        )
    return _with_provider(project, row, lambda p, h: p.poll_batch(h))


def read_results(
    project: Project, row: BatchRecord, sink: Callable[[Result], object]
) -> dict[str, int]:
    """Hand every raw result of an ended batch to ``sink``, in the provider's order; the
    count of each result type. Only a batch the provider reports ended can be read."""
    if not row.provider_batch_id:
        raise RefusedError(
            f"batch {row.key} was never accepted by the provider (state "
            f"{row.state}); there are no results to read"
        )
    types: dict[str, int] = {}

    async def read(provider: Provider, handle: BatchHandle) -> None:
        status = await provider.poll_batch(handle)
        if status.state != "ended":
            raise RefusedError(
                f"batch {handle.id} is {status.raw_status} at the provider; its "
                "results can be read once it has ended"
            )
        try:
            async for result in provider.batch_results(handle):
                types[result.type] = types.get(result.type, 0) + 1
                sink(result)
        except BatchNotEnded as exc:  # it turned bad between the two asks (B7)
            raise RefusedError(f"{exc}; its results cannot be read") from exc

    _with_provider(project, row, read)
    return types


def cancel_batch(project: Project, store: Store, row: BatchRecord) -> None:
    """Ask the provider to cancel an open batch and mark it ``cancelling``. No result is
    claimed: the next run polls it and reads what the provider says (B7, B8 — an
    Anthropic batch canceled mid-run still ends with a result per request)."""
    if row.state not in OPEN_BATCH_STATES:
        raise RefusedError(
            f"batch {row.provider_batch_id or row.key} is already "
            f"{row.state}; there is nothing to cancel"
        )
    if not row.provider_batch_id:
        raise RefusedError(
            f"batch {row.key} has no provider batch id (state {row.state}); "
            f"settle it first: agac batch resolve {row.key} --batch-id ID "
            "| --not-submitted"
        )
    _with_provider(project, row, lambda p, h: p.cancel_batch(h))
    store.update_batch(row.key, state="cancelling")


def resolve_intent(
    store: Store, key: str, *, batch_id: str | None, not_submitted: bool, tenants: Collection[str]
) -> None:
    """Settle an intent whose submission is unknown (B2), on a person's word.

    ``batch_id``: the provider has it under this id; the intent becomes ``submitted`` and
    the next run polls and collects it. ``not_submitted``: the provider never got it; the
    intent and its pending items become ``not_submitted``, so the next run sends those
    records again.
    """
    if (batch_id is None) == (not not_submitted):
        raise UsageError("give exactly one of --batch-id ID or --not-submitted")
    row = store.get_batch(key, tenants=tenants)
    if row is None or row.key != key:
        raise NotFound(f"no batch intent with key {key!r}; `agac batch list` shows them")
    if row.state not in UNSETTLED_STATES:
        raise RefusedError(
            f"batch {key} is {row.state}, not unknown: only an intent whose "
            "submission is unknown can be resolved"
        )
    now = store.clock.time()
    if batch_id is not None:
        other = store.get_batch(batch_id)  # any tenant's: a provider's id names one batch
        if other is not None and other.key != key:
            raise RefusedError(f"provider batch {batch_id} already belongs to {other.key}")
        store.update_batch(
            key, provider_batch_id=batch_id, state="submitted", submitted_at=now, error=None
        )
    else:
        store.fail_open_items(
            key, "not_submitted", "not_submitted", "settled by `agac batch resolve --not-submitted`"
        )
        store.update_batch(
            key,
            state="not_submitted",
            ended_at=now,
            error="not submitted (settled by agac batch resolve)",
        )
    store.mark_run_needs_pass(row.workflow, tenant=row.tenant)


def cancel_open_batches(
    project: Project, store: Store, workflow: str, why: str, *, tenant: str, reason: str, state: str
) -> tuple[list[str], set[tuple[str, str]]]:
    """Cancel every batch of the tenant's ``workflow`` that is out, at the provider where it
    can be (best effort: nothing is read from it either way; one that ended already needs
    no cancel) and fail its waiting items ``reason``. What the provider billed in each is
    ledgered (engine/batch/billing.py). Returns notes and the (action, unit key) of the
    items failed. Another tenant's batches are never touched (B0, T2)."""
    notes: list[str] = []
    units: set[tuple[str, str]] = set()
    batches = store.list_batches(workflow, tenants=(tenant,), open_only=True)
    if not batches:
        return notes, units
    billed, refused = asyncio.run(_cancel_all(project, batches))
    prices = PriceTable(dict(project.config.prices) if project.config else {})
    for b in batches:
        items = list(store.iter_batch_items(b.key))
        units |= {(i.action, i.unit_key) for i in items if i.status == "pending"}
        now = store.clock.time()
        usage = unread_rows(b, items, billed[b.key], prices, now) if b.key in billed else []
        rewrite = abandoned_outcomes(store, b, items) if reason == "batch_abandoned" else []
        data = {
            "batch": b.key,
            "batch_id": b.provider_batch_id,
            "file": b.file,
            "reason": reason,
            "why": why,
            "units": sum(r.status == "failed" for r in rewrite),
            "billed_unread": len(usage),
            "billed_usd": round(sum(u.cost_usd for u in usage), 6),
        }
        unreadable = b.key in billed and not billed[b.key].status.known
        if unreadable:
            data["status_unreadable"] = billed[b.key].status.raw_status
        name = b.provider_batch_id or b.key
        detail = f"{why} (batch {name} for {b.file})"
        runs = sorted({b.run_id} | {r.run_id for r in rewrite})
        if b.key in refused:
            error = refused[b.key]
            store.end_batch_unread(
                b.key,
                reason=reason,
                detail=detail,
                tenant=b.tenant,
                usage=usage,
                outcomes=rewrite,
                state=BATCH_NOT_CANCELLED,
                error=f"{why}; the provider did not cancel it ({error}): it may still run and "
                f"be billed — cancel {name} in the provider's console",
                events=[
                    _event(b, run, "batch_not_cancelled", {**data, "error": error}, now)
                    for run in runs
                ],
            )
            notes.append(
                f"could not cancel batch {name} for {b.file} ({b.action}) at the "
                f"provider: {error}; it may still run and be billed — cancel it in "
                f"the provider's console (`agac batch list` shows it "
                f"{BATCH_NOT_CANCELLED})" + _billed_note(usage, unreadable)
            )
            continue
        store.end_batch_unread(
            b.key,
            reason=reason,
            detail=detail,
            tenant=b.tenant,
            usage=usage,
            outcomes=rewrite,
            state=state,
            error=why,
            events=[_event(b, run, f"batch_{state}", data, now) for run in runs],
        )
        notes.append(
            f"cancelled batch {name} for {b.file} ({b.action})" + _billed_note(usage, unreadable)
        )
    return notes, units


async def _cancel_all(
    project: Project, batches: list[BatchRecord]
) -> tuple[dict[str, BilledWork], dict[str, str]]:
    """Ask the provider what each batch billed, and cancel those still running. (What
    each billed; why the provider would not cancel one.)"""
    providers = open_providers({b.provider for b in batches}, project.config)
    billed: dict[str, BilledWork] = {}
    refused: dict[str, str] = {}
    try:
        for b in batches:
            if not b.provider_batch_id:
                continue
            provider = providers[b.provider]
            handle = handle_of(b)
            try:
                billed[b.key] = work = await provider.billed_work(handle)
            except Exception as exc:  # noqa: BLE001 - then it is cancelled without knowing
                billed[b.key] = work = unread_status(b, str(exc) or type(exc).__name__)
            if work.status.known and work.status.state != "running":
                continue  # it ended (or is being cancelled): nothing to cancel
            try:
                await provider.cancel_batch(handle)
            except Exception as exc:  # noqa: BLE001 - given up either way; said by the caller
                refused[b.key] = str(exc) or type(exc).__name__
    finally:
        for p in providers.values():
            await p.aclose()
    return billed, refused


def unread_status(b: BatchRecord, error: str) -> BilledWork:
    """What batch ``b`` is counted to have billed when its status cannot be read (the
    provider unreachable for it): every request answered, each at its worst case, as a
    call of unknown outcome is (S1). The estimate stands: nothing reads the batch later."""
    return BilledWork(BatchStatus("running", f"unreadable: {error}", known=False), b.request_count)


def _event(b: BatchRecord, run_id: str, kind: str, data: dict[str, Any], now: float) -> EventRow:
    """An event about batch ``b`` in run ``run_id`` (the one that sent it, or one whose
    units waited on it)."""
    return EventRow(run_id, kind, b.action, None, dumps(data), now)


def _billed_note(usage: list[UsageRow], unreadable: bool = False) -> str:
    if unreadable and usage:
        return (
            f"; its status could not be read, so what it may have billed is counted at its "
            f"worst case: {len(usage)} answers (${sum(u.cost_usd for u in usage):.6f}, "
            f"estimated), as unread in the run that sent it (`agac cost {usage[0].run_id}`)"
        )
    if not usage:
        return ""
    estimated = sum(u.status == "estimated" for u in usage)
    how = f", {estimated} of them estimated" if estimated else ""
    return (
        f"; the provider billed {len(usage)} answers in it (${sum(u.cost_usd for u in usage):.6f}"
        f"{how}), counted as unread in the run that sent it (`agac cost {usage[0].run_id}`)"
    )


def abandoned_outcomes(store: Store, b: BatchRecord, items: list[BatchItem]) -> list[Rewrite]:
    """What becomes of the units that ended runs left waiting (``batch_outstanding``) on
    batch ``b`` once it is given up: those of its waiting ``items`` fail
    ``batch_abandoned``; the units downstream of them, of the same records, are skipped
    ``upstream_failed`` (and ``agac retry`` sends them again): engine/transitions.py's
    :func:`~agac.engine.transitions.abandon`, for ``Store.end_batch_unread``."""
    keys = {i.unit_key for i in items if i.status == "pending" and i.action == b.action}
    if not keys:
        return []
    waiting = store.waiting_outcomes(b.workflow, tenant=b.tenant, since=b.created_at)
    downstream: dict[str, set[str]] = {}
    for run_id in {row.run_id for row in waiting}:
        run = store.get_run(run_id)
        graph = run_graph(run) if run is not None else None
        downstream[run_id] = (
            set(graph.descendants.get(b.action, ())) if graph is not None else set()
        )
    return abandon(b.action, keys, [(r.run_id, r.action, r.unit_key) for r in waiting], downstream)


def abandon_batches(
    project: Project, store: Store, workflow: str, why: str, *, tenant: str
) -> list[str]:
    """Give up on every batch of the tenant's ``workflow`` that is out: cancel it at the
    provider where it can be (best effort) and fail its waiting records ``batch_abandoned``."""
    notes, _ = cancel_open_batches(
        project, store, workflow, why, tenant=tenant, reason="batch_abandoned", state="abandoned"
    )
    return [n.replace("cancelled batch", "abandoned batch", 1) for n in notes]

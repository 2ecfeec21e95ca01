"""Provider batches for people: every ``agac batch`` command is one of these calls.

A batch belongs to its shard, not to a run (B0), so these calls address batches by
workflow and by id: our key (``agac_<hex>``, the idempotency key of the intent) or the
provider's batch id. Without an id they take the workflow's latest batch (or the
project's, without a workflow). Only the caller's tenants' batches are found (T2): a
batch belongs to the tenant of the run that sent it.

Nothing here collects results: only a run records answers (S1). ``retrieve`` reads
a batch's raw results for a person to look at; ``cancel`` asks the provider to stop a
batch and leaves the next run to read what it says; ``resolve`` settles an intent whose
submission is unknown (B2) so the next run polls it or sends its records again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agac.api.projects import ProjectRef, Scope, scope_of, using, workflow_name
from agac.config.project import Project
from agac.errors import NotFound
from agac.store.values import OPEN_BATCH_STATES
from agac.tenants import DEFAULT_TENANT

if TYPE_CHECKING:
    from agac.api.projects import Principal
    from agac.providers.base import Result
    from agac.store.repository import Store
    from agac.store.values import BatchRecord

__all__ = [
    "batch_dict",
    "batch_status",
    "cancel",
    "list_batches",
    "resolve",
    "result_dict",
    "retrieve",
]

UNSETTLED_STATES = ("submitting", "unknown")
"""Intents whose submission is not known to have happened (B2)."""


def list_batches(
    ref: str | None = None,
    project: ProjectRef = None,
    *,
    tenant: str | None = None,
    principal: Principal | None = None,
    store: Store | None = None,
) -> list[dict[str, Any]]:
    """Every batch of workflow ``ref`` (every batch of the project without one) of the
    caller's tenants, newest first, as :func:`batch_dict` rows."""
    with using(project, store, writes=False) as (proj, st):
        name = workflow_name(ref, proj) if ref else None
        tenants = scope_of(proj, tenant, principal).visible
        return [batch_dict(row) for row in st.list_batches(name, tenants=tenants)]


def batch_status(
    ref: str | None = None,
    project: ProjectRef = None,
    *,
    batch_id: str | None = None,
    poll: bool = False,
    tenant: str | None = None,
    principal: Principal | None = None,
    store: Store | None = None,
) -> dict[str, Any]:
    """One batch as the store knows it, with its items counted by status and the command
    a person most likely wants next. ``poll`` also asks the provider for its status now
    (``provider_status``); the store is not changed — the next run records what it says."""
    from agac.engine.batch.manual import poll_batch

    with using(project, store, writes=False) as (proj, st):
        row = _find_batch(st, proj, ref, batch_id, scope_of(proj, tenant, principal))
        doc = batch_dict(row)
        items: dict[str, int] = {}
        for item in st.iter_batch_items(row.key):
            items[item.status] = items.get(item.status, 0) + 1
        doc["items"] = items
        doc["next"] = _next_command(row)
    if poll:
        status = poll_batch(proj, row)
        doc["provider_status"] = {
            "state": status.state,
            "raw_status": status.raw_status,
            "request_count": status.request_count,
            "completed": status.completed,
            "failed": status.failed,
            "known": status.known,
        }
    return doc


def retrieve(
    ref: str | None = None,
    project: ProjectRef = None,
    *,
    batch_id: str | None = None,
    sink: Callable[[dict[str, Any]], object],
    tenant: str | None = None,
    principal: Principal | None = None,
    store: Store | None = None,
) -> dict[str, Any]:
    """Hand every raw result of an ended batch to ``sink`` (as :func:`result_dict`), in the
    provider's order, and return ``{key, batch_id, results, types}``.

    Only a batch the provider reports ended can be read; nothing is recorded in the
    store (a run collects answers, never this call).
    """
    from agac.engine.batch.manual import read_results

    with using(project, store, writes=False) as (proj, st):
        row = _find_batch(st, proj, ref, batch_id, scope_of(proj, tenant, principal))
    types = read_results(proj, row, lambda result: sink(result_dict(result)))
    return {
        "key": row.key,
        "batch_id": row.provider_batch_id,
        "results": sum(types.values()),
        "types": types,
    }


def cancel(
    ref: str | None = None,
    project: ProjectRef = None,
    *,
    batch_id: str,
    tenant: str | None = None,
    principal: Principal | None = None,
    store: Store | None = None,
) -> dict[str, Any]:
    """Ask the provider to cancel an open batch and mark it ``cancelling``.

    No result is claimed: the next run polls it and reads what the provider says (B7,
    B8 — an Anthropic batch canceled mid-run still ends with a result per request).
    """
    from agac.engine.batch.manual import cancel_batch

    with using(project, store) as (proj, st):
        row = _find_batch(st, proj, ref, batch_id, scope_of(proj, tenant, principal))
        cancel_batch(proj, st, row)
        return _reread(st, row.key)


def resolve(
    key: str,
    project: ProjectRef = None,
    *,
    batch_id: str | None = None,
    not_submitted: bool = False,
    tenant: str | None = None,
    principal: Principal | None = None,
    store: Store | None = None,
) -> dict[str, Any]:
    """Settle an intent whose submission is unknown (B2), on a person's word.

    ``batch_id``: the provider has it under this id; the intent becomes ``submitted``
    and the next run polls and collects it. ``not_submitted``: the provider never got
    it; the intent becomes ``not_submitted`` and its pending items ``not_submitted``, so
    the next run sends those records again.
    """
    from agac.engine.batch.manual import resolve_intent

    with using(project, store) as (proj, st):
        resolve_intent(
            st,
            key,
            batch_id=batch_id,
            not_submitted=not_submitted,
            tenants=scope_of(proj, tenant, principal).visible,
        )
        return _reread(st, key)


def batch_dict(row: BatchRecord) -> dict[str, Any]:
    """The plain JSON of one ``batches`` row."""
    return {
        "key": row.key,
        "batch_id": row.provider_batch_id,
        "tenant": row.tenant,
        "workflow": row.workflow,
        "action": row.action,
        "file": row.file,
        "part": row.part,
        "provider": row.provider,
        "state": row.state,
        "open": row.state in OPEN_BATCH_STATES,
        "raw_status": row.raw_status,
        "requests": row.request_count,
        "run_id": row.run_id,
        "collected_by": row.collected_by,
        "error": row.error,
        "created_at": row.created_at,
        "submitted_at": row.submitted_at,
        "ended_at": row.ended_at,
        "deadline_at": row.deadline_at,
    }


def result_dict(result: Result) -> dict[str, Any]:
    """One line of ``agac batch retrieve``: custom_id, type, response, error."""
    response = None
    if result.response is not None:
        r = result.response
        response = {"text": r.text, "stop_reason": r.stop_reason, "usage": r.usage.to_dict()}
    error = None
    if result.error is not None:
        error = {
            "kind": getattr(result.error, "kind", type(result.error).__name__),
            "message": str(result.error),
        }
    return {
        "custom_id": result.custom_id,
        "type": result.type,
        "response": response,
        "error": error,
    }


def _find_batch(
    store: Store, proj: Project, ref: str | None, batch_id: str | None, scope: Scope
) -> BatchRecord:
    """The batch ``batch_id`` names (our key or the provider's id), else the latest of
    workflow ``ref`` (of the project without one), among the scope's tenants. NotFound
    when there is none — also when it is another tenant's (T2)."""
    name = workflow_name(ref, proj) if ref else None
    if batch_id is not None:
        row = store.get_batch(batch_id, tenants=scope.visible)
        if row is None or (name is not None and row.workflow != name):
            where = f" of {name}" if name else ""
            raise NotFound(
                f"no batch {batch_id!r}{where} in {scope.label}; `agac batch list` shows them"
            )
        return row
    rows = store.list_batches(name, tenants=scope.visible)
    if not rows:
        where = f"{name} has" if name else f"{scope.label} has"
        raise NotFound(f"{where} no batches yet; a run with run_mode: batch sends them")
    return rows[0]


def _reread(store: Store, key: str) -> dict[str, Any]:
    row = store.get_batch(key)
    assert row is not None, key  # just written in this call
    return batch_dict(row)


def _next_command(row: BatchRecord) -> str | None:
    if row.state in UNSETTLED_STATES:
        return f"agac batch resolve {row.key} --batch-id ID | --not-submitted"
    if row.state in OPEN_BATCH_STATES:
        tenant = "" if row.tenant == DEFAULT_TENANT else f" --tenant {row.tenant}"
        return f"agac run {row.workflow}{tenant}"
    return None

"""Provider batches for people: every ``agac batch`` command is one of these calls.

A batch belongs to its shard, not to a run (B0), so these calls address batches by
workflow and by id: our key (``agac_<hex>``, the idempotency key of the intent) or the
provider's batch id. Without an id they take the workflow's latest batch (or the
project's, without a workflow).

Nothing here collects results: only a run records answers (S1). ``retrieve`` reads
a batch's raw results for a person to look at; ``cancel`` asks the provider to stop a
batch and leaves the next run to read what it says; ``resolve`` settles an intent whose
submission is unknown (B2) so the next run polls it or sends its records again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from agac.api.projects import ProjectRef, using, workflow_name
from agac.config.project import Project
from agac.errors import RefusedError, UsageError
from agac.jsontext import loads
from agac.providers.base import BatchHandle, Result
from agac.providers.factory import open_providers
from agac.store.batches import OPEN_BATCH_STATES

if TYPE_CHECKING:
    from sqlalchemy.engine import Row

    from agac.store.repository import Store

__all__ = ["batch_dict", "batch_status", "cancel", "list_batches", "resolve", "result_dict",
           "retrieve"]

UNSETTLED_STATES = ("submitting", "unknown")
"""Intents whose submission is not known to have happened (B2)."""


def list_batches(ref: str | None = None, project: ProjectRef = None, *,
                 store: Store | None = None) -> list[dict[str, Any]]:
    """Every batch of workflow ``ref`` (every batch of the project without one), newest
    first, as :func:`batch_dict` rows."""
    with using(project, store, writes=False) as (proj, st):
        name = workflow_name(ref, proj) if ref else None
        return [batch_dict(row) for row in st.list_batches(name)]


def batch_status(ref: str | None = None, project: ProjectRef = None, *,
                 batch_id: str | None = None, poll: bool = False,
                 store: Store | None = None) -> dict[str, Any]:
    """One batch as the store knows it, with its items counted by status and the command
    a person most likely wants next. ``poll`` also asks the provider for its status now
    (``provider_status``); the store is not changed — the next run records what it says."""
    with using(project, store, writes=False) as (proj, st):
        row = _find_batch(st, proj, ref, batch_id)
        doc = batch_dict(row)
        items: dict[str, int] = {}
        for item in st.iter_batch_items(row.key):
            items[item.status] = items.get(item.status, 0) + 1
        doc["items"] = items
        doc["next"] = _next_command(row)
    if poll:
        if not row.provider_batch_id:
            raise RefusedError(f"batch {row.key} has no provider batch id to ask about; "
                               f"its state is {row.state}")
        status = _with_provider(proj, row, lambda p, h: p.poll_batch(h))
        doc["provider_status"] = {"state": status.state, "raw_status": status.raw_status,
                                  "request_count": status.request_count,
                                  "completed": status.completed, "failed": status.failed,
                                  "known": status.known}
    return doc


def retrieve(ref: str | None = None, project: ProjectRef = None, *, batch_id: str | None = None,
             sink: Callable[[dict[str, Any]], object], store: Store | None = None) -> dict[str, Any]:
    """Hand every raw result of an ended batch to ``sink`` (as :func:`result_dict`), in the
    provider's order, and return ``{key, batch_id, results, types}``.

    Only a batch the provider reports ended can be read; nothing is recorded in the
    store (a run collects answers, never this call).
    """
    with using(project, store, writes=False) as (proj, st):
        row = _find_batch(st, proj, ref, batch_id)
    if not row.provider_batch_id:
        raise RefusedError(f"batch {row.key} was never accepted by the provider (state "
                           f"{row.state}); there are no results to read")
    types: dict[str, int] = {}

    async def read(provider: Any, handle: BatchHandle) -> None:
        status = await provider.poll_batch(handle)
        if status.state != "ended":
            raise RefusedError(f"batch {handle.id} is {status.raw_status} at the provider; its "
                               "results can be read once it has ended")
        async for result in provider.batch_results(handle):
            types[result.type] = types.get(result.type, 0) + 1
            sink(result_dict(result))

    _with_provider(proj, row, read)
    return {"key": row.key, "batch_id": row.provider_batch_id, "results": sum(types.values()),
            "types": types}


def cancel(ref: str | None = None, project: ProjectRef = None, *, batch_id: str,
           store: Store | None = None) -> dict[str, Any]:
    """Ask the provider to cancel an open batch and mark it ``cancelling``.

    No result is claimed: the next run polls it and reads what the provider says (B7,
    B8 — an Anthropic batch canceled mid-run still ends with a result per request).
    """
    with using(project, store) as (proj, st):
        row = _find_batch(st, proj, ref, batch_id)
        if row.state not in OPEN_BATCH_STATES:
            raise RefusedError(f"batch {row.provider_batch_id or row.key} is already "
                               f"{row.state}; there is nothing to cancel")
        if not row.provider_batch_id:
            raise RefusedError(f"batch {row.key} has no provider batch id (state {row.state}); "
                               f"settle it first: agac batch resolve {row.key} --batch-id ID "
                               "| --not-submitted")
        _with_provider(proj, row, lambda p, h: p.cancel_batch(h))
        st.update_batch(row.key, state="cancelling")
        return _reread(st, row.key)


def resolve(key: str, project: ProjectRef = None, *, batch_id: str | None = None,
            not_submitted: bool = False, store: Store | None = None) -> dict[str, Any]:
    """Settle an intent whose submission is unknown (B2), on a person's word.

    ``batch_id``: the provider has it under this id; the intent becomes ``submitted``
    and the next run polls and collects it. ``not_submitted``: the provider never got
    it; the intent becomes ``not_submitted`` and its pending items ``not_submitted``, so
    the next run sends those records again.
    """
    if (batch_id is None) == (not not_submitted):
        raise UsageError("give exactly one of --batch-id ID or --not-submitted")
    with using(project, store) as (_proj, st):
        row = st.get_batch(key)
        if row is None or row.key != key:
            raise UsageError(f"no batch intent with key {key!r}; `agac batch list` shows them")
        if row.state not in UNSETTLED_STATES:
            raise RefusedError(f"batch {key} is {row.state}, not unknown: only an intent whose "
                               "submission is unknown can be resolved")
        if batch_id is not None:
            other = st.get_batch(batch_id)
            if other is not None and other.key != key:
                raise RefusedError(f"provider batch {batch_id} already belongs to {other.key}")
            st.update_batch(key, provider_batch_id=batch_id, state="submitted",
                            submitted_at=time.time(), error=None)
        else:
            st.fail_open_items(key, "not_submitted", "not_submitted",
                               "settled by `agac batch resolve --not-submitted`")
            st.update_batch(key, state="not_submitted", ended_at=time.time(),
                            error="not submitted (settled by agac batch resolve)")
        st.mark_run_needs_pass(row.workflow)
        return _reread(st, key)


def batch_dict(row: Row) -> dict[str, Any]:
    """The plain JSON of one ``batches`` row."""
    return {
        "key": row.key, "batch_id": row.provider_batch_id, "workflow": row.workflow,
        "action": row.action, "file": row.file, "part": row.part, "provider": row.provider,
        "state": row.state, "open": row.state in OPEN_BATCH_STATES,
        "raw_status": row.raw_status, "requests": row.request_count, "run_id": row.run_id,
        "collected_by": row.collected_by, "error": row.error, "created_at": row.created_at,
        "submitted_at": row.submitted_at, "ended_at": row.ended_at,
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
        error = {"kind": getattr(result.error, "kind", type(result.error).__name__),
                 "message": str(result.error)}
    return {"custom_id": result.custom_id, "type": result.type, "response": response,
            "error": error}


def _find_batch(store: Store, proj: Project, ref: str | None, batch_id: str | None) -> Row:
    """The batch ``batch_id`` names (our key or the provider's id), else the latest of
    workflow ``ref`` (of the project without one). UsageError when there is none."""
    name = workflow_name(ref, proj) if ref else None
    if batch_id is not None:
        row = store.get_batch(batch_id)
        if row is None or (name is not None and row.workflow != name):
            where = f" of {name}" if name else ""
            raise UsageError(f"no batch {batch_id!r}{where} in this project's store; "
                             "`agac batch list` shows them")
        return row
    rows = store.list_batches(name)
    if not rows:
        where = f"{name} has" if name else "this project has"
        raise UsageError(f"{where} no batches yet; a run with run_mode: batch sends them")
    return rows[0]


def _reread(store: Store, key: str) -> dict[str, Any]:
    row = store.get_batch(key)
    assert row is not None, key  # just written in this call
    return batch_dict(row)


def _next_command(row: Row) -> str | None:
    if row.state in UNSETTLED_STATES:
        return f"agac batch resolve {row.key} --batch-id ID | --not-submitted"
    if row.state in OPEN_BATCH_STATES:
        return f"agac run {row.workflow}"
    return None


def _with_provider(proj: Project, row: Row,
                   call: Callable[[Any, BatchHandle], Coroutine[Any, Any, Any]]) -> Any:
    """Run ``call(adapter, handle)`` for the batch's provider, closing the adapter after."""
    handle = BatchHandle(row.provider, row.provider_batch_id, row.key, loads(row.meta) or {})

    async def go() -> Any:
        provider = open_providers([row.provider], proj.config)[row.provider]
        try:
            return await call(provider, handle)
        finally:
            await provider.aclose()

    return asyncio.run(go())

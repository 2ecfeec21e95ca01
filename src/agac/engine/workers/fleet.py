"""The library side of ``agac submit``, ``agac workers`` and the shards of ``agac
status``: admit a run for workers without executing it, cut a run into shards, list the
workers and what each holds."""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from agac.engine.graph import RunGraph, run_graph
from agac.engine.lifecycle.admission import open_or_admit
from agac.engine.walk.shards import shard_ranges
from agac.jsontext import loads

if TYPE_CHECKING:
    from agac.config.model import Workflow
    from agac.config.project import Project
    from agac.engine.lifecycle.options import AsAdmitted, RunOptions
    from agac.store.repository import Store

__all__ = ["list_workers", "shard_rows", "shard_view", "submit_run"]


def shard_rows(files: list[dict[str, Any]], graph: RunGraph) -> list[dict[str, Any]]:
    """A run's shards: online ranges of ≤1,000 records of a file, and (action, file) for
    every batch action."""
    rows: list[dict[str, Any]] = []
    by_start = {int(f["start"]): f for f in files}
    for lo, hi in shard_ranges(files):
        start = max(s for s in by_start if s <= lo)
        rows.append(
            {
                "shard": f"o:{lo:010d}",
                "kind": "online",
                "file": by_start[start]["file"],
                "lo": lo,
                "hi": hi,
            }
        )
    for action in graph.actions:
        if action.kind == "llm" and action.run_mode == "batch":
            for f in files:
                start, count = int(f["start"]), int(f["count"])
                rows.append(
                    {
                        "shard": f"b:{action.name}:{f['file']}",
                        "kind": "batch",
                        "action": action.name,
                        "file": f["file"],
                        "lo": start,
                        "hi": start + count,
                    }
                )
    return rows


def submit_run(
    project: Project,
    store: Store,
    workflow: Workflow,
    options: RunOptions,
    *,
    as_admitted: AsAdmitted | None = None,
) -> dict[str, Any]:
    """``agac submit``: the same admission as ``agac run`` (R1 continuation, ``--new``,
    the budget estimate, the input snapshot), then shards for workers and a NOTIFY; nothing
    is executed here."""
    run, notes, _ = open_or_admit(project, store, workflow, options, as_admitted=as_admitted)
    info = store.snapshot_info(run.snapshot_id)
    assert info is not None
    created = store.ensure_shards(run.id, shard_rows(loads(info.files), run_graph(run)))
    store.notify_work()
    return {
        "run_id": run.id,
        "workflow": run.workflow,
        "state": run.state,
        "tenant": run.tenant,
        "records": int(info.record_count),
        "shards": created,
        "notes": notes,
    }


def list_workers(
    store: Store, *, include_stopped: bool = False, tenants: Collection[str] | None = None
) -> list[dict[str, Any]]:
    """Live workers (or every worker seen), what each holds and its last heartbeat. A
    worker serves every tenant; with ``tenants`` (a person's), only the holdings of those
    tenants' runs are shown (T2)."""
    out = []
    now = store.clock.time()
    for w, held in store.list_workers(live_only=not include_stopped, tenants=tenants):
        out.append(
            {
                "worker_id": w.id,
                "host": w.host,
                "pid": w.pid,
                "state": w.state,
                "concurrency": w.concurrency,
                "started_at": w.started_at,
                "heartbeat_at": w.heartbeat_at,
                "heartbeat_age_s": round(now - w.heartbeat_at, 3),
                "live": w.expires_at > now,
                "holds": [
                    {
                        "run_id": h.run_id,
                        "tenant": h.tenant,
                        "shard": h.shard,
                        "kind": h.kind,
                        "lease_expires_at": h.expires_at,
                    }
                    for h in held
                ],
            }
        )
    return out


def shard_view(store: Store, run_id: str) -> list[dict[str, Any]]:
    """A run's shards for ``agac status``: state, owner (live lease) or last owner."""
    now = store.clock.time()
    out = []
    for s in store.shard_owners(run_id):
        live = s.expires_at is not None and s.expires_at > now
        out.append(
            {
                "shard": s.shard,
                "kind": s.kind,
                "action": s.action,
                "file": s.file,
                "records": [s.lo, s.hi],
                "state": "held" if live else s.state,
                "owner": s.owner if live else None,
                "last_owner": s.owner,
                "owner_host": s.host if live else None,
                "owner_pid": s.pid if live else None,
                "claims": s.claims,
            }
        )
    return out

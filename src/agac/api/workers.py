"""Scale-out: ``agac submit`` hands a run to workers, ``agac worker`` is one, ``agac
workers`` lists them. Workers share one PostgreSQL store (S3)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from agac.api.projects import ProjectRef, project_of, reading, scope_of, using
from agac.api.runs import loaded_as_admitted
from agac.api.workflows import load_workflow
from agac.config.project import store_url
from agac.errors import UsageError

if TYPE_CHECKING:
    from agac.api.projects import Principal
    from agac.store.repository import Store

__all__ = ["submit", "worker", "workers"]


def submit(
    ref: str | Path,
    project: ProjectRef = None,
    *,
    run_mode: str | None = None,
    poll_interval: float | str | None = None,
    batch_deadline: float | str | None = None,
    budget_usd: float | None = None,
    tenant: str | None = None,
    principal: Principal | None = None,
    store: Store | None = None,
    **options: Any,
) -> dict[str, Any]:
    """``agac submit``: admit a run in the tenant (or continue its open one, R1) for workers
    to execute, without executing it: ``{"run_id", "workflow", "tenant", "state",
    "records", "shards", "notes"}``.
    Options as :func:`agac.api.run`: ``new``, ``fresh``, ``limit``, ``allow_over_estimate``."""
    from agac.engine.lifecycle.options import RunOptions
    from agac.engine.workers.fleet import submit_run

    proj = project_of(project)
    acting = scope_of(proj, tenant, principal).acting()
    overrides: dict[str, Any] = {
        "run_mode": run_mode,
        "poll_interval": poll_interval,
        "batch_deadline": batch_deadline,
        "budget_usd": budget_usd,
    }
    workflow = load_workflow(ref, proj, **overrides)
    if store is None and not store_url(proj).startswith("postgres"):
        raise UsageError(
            "agac submit hands a run to workers, which need a PostgreSQL store; "
            "set AGAC_STORE=postgresql://user@host:5432/db, or run it here with "
            f"`agac run {workflow.name}`"
        )
    with using(proj, store) as (_, st):
        if not st.shares_work:
            raise UsageError(
                "agac submit hands a run to workers, which need a PostgreSQL store; "
                "set AGAC_STORE=postgresql://user@host:5432/db, or run it here with "
                f"`agac run {workflow.name}`"
            )
        as_admitted = loaded_as_admitted(
            st, workflow, overrides, acting, lambda o: load_workflow(ref, proj, **o)
        )
        return submit_run(
            proj,
            st,
            workflow,
            RunOptions(tenant=acting, overrides=overrides, **options),
            as_admitted=as_admitted,
        )


def worker(
    project: ProjectRef = None,
    *,
    concurrency: int = 4,
    lease_ttl: float = 30.0,
    poll: float = 5.0,
    exit_when_done: bool = False,
    handle_signals: bool = False,
    log: Any = None,
    store: Store | None = None,
) -> Any:
    """``agac worker``: claim and advance shards of any open run until stopped (SIGTERM:
    finish or hand back what it holds). Refused (UsageError) on a SQLite store. Returns a
    :class:`agac.engine.workers.loop.WorkerReport`."""
    from agac.engine.workers.loop import Worker, WorkerOptions

    proj = project_of(project)
    if store is None and (
        store_url(proj) == "memory" or not store_url(proj).startswith("postgres")
    ):
        raise UsageError(
            "agac worker needs a PostgreSQL store: workers coordinate through its row locks, "
            "leases and LISTEN/NOTIFY, which a SQLite file cannot share across machines; set "
            "AGAC_STORE=postgresql://user@host:5432/db (or `store:` in agac.yml), or run the "
            "workflow on this machine with `agac run`"
        )
    with using(proj, store) as (_, st):
        w = Worker(
            proj,
            st,
            WorkerOptions(
                concurrency=concurrency,
                lease_ttl=lease_ttl,
                poll=poll,
                exit_when_done=exit_when_done,
                handle_signals=handle_signals,
                log=log,
            ),
        )
        return w.run()


def workers(
    project: ProjectRef = None,
    *,
    all_workers: bool = False,
    principal: Principal | None = None,
    store: Store | None = None,
) -> list[dict[str, Any]]:
    """``agac workers``: live workers (``all_workers``: also stopped ones), the shards each
    holds (with its run's tenant) and its last heartbeat. Workers serve every tenant; with
    a ``principal``, only the holdings of its tenants' runs are shown (T2). The command
    line, an administrator's (T0), shows every holding."""
    from agac.engine.workers.fleet import list_workers

    with reading(project, store) as (_proj, st):
        if not st.shares_work:
            return []
        tenants = frozenset(principal.tenants) if principal is not None else None
        return list_workers(st, include_stopped=all_workers, tenants=tenants)

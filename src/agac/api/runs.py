"""Running workflows: ``agac run`` (admit or continue, R1), ``agac retry`` (R2) and
``agac cancel``. Each returns a :class:`agac.engine.lifecycle.options.RunResult`.

A run is found, and admitted, by (tenant, workflow) (DESIGN §13 T2): ``tenant`` (else
``AGAC_TENANT``, else ``tenant:`` in agac.yml, else ``default``) is the tenant a new run
belongs to for good; a ``principal`` acts only in its own tenants."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from agac.api.projects import ProjectRef, project_of, reading, scope_of, using, workflow_name
from agac.api.workflows import load_workflow

if TYPE_CHECKING:
    from agac.api.projects import Principal
    from agac.store.repository import Store

__all__ = ["cancel", "retry", "run"]


def run(ref: str | Path, project: ProjectRef = None, *,
        run_mode: str | None = None, poll_interval: float | str | None = None,
        batch_deadline: float | str | None = None, budget_usd: float | None = None,
        tenant: str | None = None, principal: Principal | None = None,
        store: Store | None = None, **options: Any) -> Any:
    """``agac run``: continue the tenant's open run of the workflow or admit a new one in
    the tenant, and execute it (R1).

    ``budget_usd`` caps a new run's spending instead of the file's ``budget.usd`` (R5).
    Options: ``new``, ``fresh``, ``limit``, ``wait``, ``allow_over_estimate``,
    ``handle_signals``, ``on_progress``, ``on_start``. Returns a
    :class:`agac.engine.lifecycle.options.RunResult`.
    """
    from agac.engine.lifecycle.options import RunOptions
    from agac.engine.lifecycle.runs import start_run

    proj = project_of(project)
    acting = scope_of(proj, tenant, principal).acting()
    overrides: dict[str, Any] = {"run_mode": run_mode, "poll_interval": poll_interval,
                                 "batch_deadline": batch_deadline, "budget_usd": budget_usd}
    workflow = load_workflow(ref, proj, **overrides)
    with using(proj, store, wait=bool(options.get("wait"))) as (_, st):
        # A run continued (R1) is compared with the file as loaded with the overrides
        # it was admitted with, not with today's: they belong to the run.
        result = start_run(proj, st, workflow, RunOptions(tenant=acting, **options),
                           overrides=overrides, reload=lambda o: load_workflow(ref, proj, **o))
        result.notes[:0] = st.notes  # what the store itself has to say (a torn log, O3)
        return result


def retry(ref: str | Path, project: ProjectRef = None, *,
          action: str | None = None, record: str | None = None, dry_run: bool = False,
          abandon_in_flight: bool = False, tenant: str | None = None,
          principal: Principal | None = None, store: Store | None = None,
          **options: Any) -> Any:
    """``agac retry`` (R2): re-ask the failed units of the tenant's latest final run of the
    workflow.

    ``abandon_in_flight`` (B10): retry even though a batch of the workflow is still out;
    its waiting records fail ``batch_abandoned`` first.
    """
    from agac.engine.lifecycle.options import RunOptions
    from agac.engine.lifecycle.retry import start_retry

    proj = project_of(project)
    acting = scope_of(proj, tenant, principal).acting()
    workflow = load_workflow(ref, proj)
    with using(proj, store) as (_, st):
        # A retry runs with the per-run settings (--run-mode, ...) of the run it retries.
        last = st.latest_run(workflow.name, tenant=acting, final=True)
        overrides = dict(last.settings.overrides) if last is not None else {}
        if overrides:
            workflow = load_workflow(ref, proj, **overrides)
        run_options = RunOptions(tenant=acting, **options)
        run_options.overrides = overrides
        return start_retry(proj, st, workflow, run_options, action, record, dry_run,
                           abandon_in_flight=abandon_in_flight)


def cancel(ref: str, project: ProjectRef = None, *, tenant: str | None = None,
           principal: Principal | None = None, store: Store | None = None) -> Any:
    """``agac cancel RUN|WF``: end a run ``cancelled`` — a run id, or the tenant's open run
    of a workflow (another tenant's run is not found).

    Its batches out are cancelled at the provider (their records fail ``batch_cancelled``)
    and units never sent are skipped ``cancelled``. A run owned by a live process is marked
    ``cancelling`` and ended by its owner at its next heartbeat. Returns a
    :class:`agac.engine.lifecycle.options.RunResult`."""
    from agac.engine.lifecycle.ending import cancel_run
    from agac.errors import NotFound

    with reading(project, store, writes=True) as (proj, st):
        scope = scope_of(proj, tenant, principal)
        run_row = st.get_run(ref, tenants=scope.visible)
        if run_row is None and scope.tenant is not None and scope.sees(scope.tenant):
            run_row = st.open_run(workflow_name(ref, proj), tenant=scope.tenant)
        if run_row is None:
            raise NotFound(f"{ref!r} is neither a run id nor a workflow with an open run in "
                           f"{scope.label}; `agac runs list` shows the runs")
        return cancel_run(proj, st, run_row)

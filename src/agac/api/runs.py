"""Running workflows: ``agac run`` / ``await agac.arun`` (admit or continue, R1), ``agac
retry`` (R2) and ``agac cancel``. Each returns a
:class:`agac.engine.lifecycle.options.RunResult`.

A run is found, and admitted, by (tenant, workflow) (T2): ``tenant`` (else
``AGAC_TENANT``, else ``tenant:`` in agac.yml, else ``default``) is the tenant a new run
belongs to for good; a ``principal`` acts only in its own tenants."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agac.api.inline import WorkflowRef, given_records, project_for, workflow_file
from agac.api.progress import ProgressMode, RunProgress
from agac.api.projects import ProjectRef, project_of, reading, scope_of, using, workflow_name
from agac.api.threads import RunControl, in_thread, loop_running, on_thread
from agac.api.workflows import load_workflow

if TYPE_CHECKING:
    from agac.api.projects import Principal
    from agac.config.model import Workflow
    from agac.config.project import Project
    from agac.engine.lifecycle.options import AsAdmitted, RunResult
    from agac.store.repository import Store

__all__ = ["arun", "cancel", "retry", "run", "unpriced_warnings"]


def run(
    workflow: WorkflowRef,
    project: ProjectRef = None,
    *,
    records: Any = None,
    new: bool = False,
    run_mode: str | None = None,
    tenant: str | None = None,
    progress: ProgressMode = "auto",
    poll_interval: float | str | None = None,
    batch_deadline: float | str | None = None,
    budget_usd: float | None = None,
    principal: Principal | None = None,
    store: Store | None = None,
    **options: Any,
) -> RunResult:
    """``agac run``: continue the tenant's open run of the workflow or admit a new one in
    the tenant, and execute it (R1).

    ``workflow`` is a path, a ``name:`` or the workflow as a dict (written to
    ``workflows/<name>.yml``); ``project`` a folder (created with an ``agac.yml`` when it
    does not exist). ``records`` — an iterable of dicts, a pandas or polars DataFrame or an
    Arrow table — replace ``input.path`` (docs/python.md). ``new`` ends the open run and admits
    a new one; ``run_mode`` fills every llm action without its own; ``tenant`` (else
    ``AGAC_TENANT``, else ``tenant:`` in agac.yml, else ``default``) is the run's tenant for
    good, and a ``principal`` (the service's caller) acts only in its own tenants (T2);
    ``budget_usd`` caps a new run's
    spending instead of the file's ``budget.usd`` (R5). ``progress``: ``"auto"`` shows bars
    in a notebook or terminal and a line now and then otherwise; False shows nothing.
    Other options: ``fresh``, ``limit``, ``wait``, ``allow_over_estimate``,
    ``handle_signals``, ``on_progress``, ``on_start``, ``on_warning`` (called with each
    start-up warning, such as a model without a price; else they lead the notes).

    Inside a running event loop (a notebook's cell) the call runs on a thread of its own
    and the caller waits for it; ``await arun(...)`` is the same call for async code.
    """
    control = RunControl()
    call = functools.partial(
        _run,
        workflow,
        project,
        records=records,
        new=new,
        run_mode=run_mode,
        tenant=tenant,
        progress=progress,
        poll_interval=poll_interval,
        batch_deadline=batch_deadline,
        budget_usd=budget_usd,
        principal=principal,
        store=store,
        control=control,
        **options,
    )
    if loop_running():
        return in_thread(call, control)
    return call()


async def arun(
    workflow: WorkflowRef,
    project: ProjectRef = None,
    *,
    records: Any = None,
    new: bool = False,
    run_mode: str | None = None,
    tenant: str | None = None,
    progress: ProgressMode = "auto",
    poll_interval: float | str | None = None,
    batch_deadline: float | str | None = None,
    budget_usd: float | None = None,
    principal: Principal | None = None,
    store: Store | None = None,
    **options: Any,
) -> RunResult:
    """:func:`run` for async code: the engine runs on a thread of its own. Cancelling the
    awaiting task stops the run gently (as a first Ctrl-C does) and waits for it."""
    control = RunControl()
    call = functools.partial(
        _run,
        workflow,
        project,
        records=records,
        new=new,
        run_mode=run_mode,
        tenant=tenant,
        progress=progress,
        poll_interval=poll_interval,
        batch_deadline=batch_deadline,
        budget_usd=budget_usd,
        principal=principal,
        store=store,
        control=control,
        **options,
    )
    return await on_thread(call, control)


def _run(
    workflow: WorkflowRef,
    project: ProjectRef,
    *,
    records: Any,
    new: bool,
    run_mode: str | None,
    tenant: str | None,
    progress: ProgressMode,
    poll_interval: float | str | None,
    batch_deadline: float | str | None,
    budget_usd: float | None,
    principal: Principal | None,
    store: Store | None,
    control: RunControl,
    **options: Any,
) -> RunResult:
    from agac.api.pilotgate import admit_after_pilot, pilot_used
    from agac.engine.lifecycle.options import RunOptions
    from agac.engine.lifecycle.runs import start_run

    proj = project_for(project)
    acting = scope_of(proj, tenant, principal).acting()
    ref = workflow_file(workflow, proj)
    overrides: dict[str, Any] = {
        "run_mode": run_mode,
        "poll_interval": poll_interval,
        "batch_deadline": batch_deadline,
        "budget_usd": budget_usd,
    }
    on_warning = options.pop("on_warning", None)
    watched = options.get("on_start") is None and options.get("on_progress") is None
    view = RunProgress(progress if watched else False)
    hooks = [h for h in (options.pop("on_start", None), view.start, control.attach) if h]
    with (
        given_records(records, proj) as source,
        using(proj, store, wait=bool(options.get("wait"))) as (_, st),
    ):
        from_records = source is not None or _open_run_reads_records(st, ref, proj, acting)
        kept = {} if new or options.get("fresh") else _open_run_prefixes(st, ref, proj, acting)
        loaded = load_workflow(ref, proj, records=from_records, kept_prefixes=kept, **overrides)
        warnings = unpriced_warnings(loaded, proj)
        for line in warnings if on_warning is not None else ():
            on_warning(line)
        run_options = RunOptions(
            new=new,
            source=source,
            on_start=_each(hooks),
            tenant=acting,
            overrides=overrides,
            **options,
        )
        # A run continued (R1) is compared with the file as loaded with the overrides it
        # was admitted with, not with today's: they belong to the run.
        as_admitted = loaded_as_admitted(
            st,
            loaded,
            overrides,
            acting,
            lambda o: load_workflow(ref, proj, records=from_records, kept_prefixes=kept, **o),
        )
        approved = None
        if _admits(st, loaded.name, acting, new):
            approved = admit_after_pilot(ref, proj, loaded, st, acting, progress, source)
        try:
            result = start_run(proj, st, loaded, run_options, as_admitted=as_admitted)
            if approved is not None:
                pilot_used(st, approved, result.run_id)
            result.notes[:0] = st.notes  # what the store itself has to say (a torn log, O3)
            if on_warning is None:
                result.notes[:0] = [f"warning: {line}" for line in warnings]
            return result
        finally:
            view.stop()


def _admits(store: Store, workflow: str, tenant: str, new: bool) -> bool:
    """Whether this call admits a new full run (no open run, or only an interrupted
    pilot's, or ``new``): then a ``pilot:`` with ``approve`` must have been approved."""
    if new:
        return True
    open_run = store.open_run(workflow, tenant=tenant)
    return open_run is None or open_run.settings.overrides.get("pilot") is not None


def unpriced_warnings(workflow: Workflow, project: ProjectRef = None) -> list[str]:
    """One line per model of ``workflow`` with no known price (never a silent $0, R5);
    ``agac run`` says them at start (``on_warning``), a library call in its notes."""
    from agac.providers.pricing import PriceTable

    proj = project_of(project)
    prices = PriceTable(dict(proj.config.prices))
    models = sorted(
        {a.model for a in workflow.actions if a.kind == "llm" and a.model}
        | {c.judge.model for a in workflow.actions for c in a.checks if c.judge is not None}
    )
    return [
        f"model {m} has no known price: its calls count $0 (`agac cost` marks them "
        f"unpriced); add prices: {{{m}: {{input: …, output: …}}}} to agac.yml "
        "[unpriced_model]"
        for m in models
        if not prices.known(m)
    ]


def loaded_as_admitted(
    store: Store,
    loaded: Workflow,
    overrides: dict[str, Any],
    tenant: str,
    load: Callable[[dict[str, Any]], Workflow],
) -> AsAdmitted | None:
    """The workflow file loaded with the settings its open run was admitted with, when
    they are not today's (``--run-mode``, …); None when there is no such run."""
    from agac.engine.lifecycle.admission import admitted_overrides
    from agac.engine.lifecycle.options import AsAdmitted

    admitted = admitted_overrides(store, loaded.name, tenant=tenant)
    today = {k: v for k, v in overrides.items() if v is not None}
    if admitted is None or admitted == today:
        return None
    return AsAdmitted(admitted, load(admitted))


def _open_run_reads_records(store: Store, ref: str | Path, proj: Project, tenant: str) -> bool:
    """Whether the tenant's open run of the workflow reads records given in memory: then a
    call without records continues it with its own snapshot of them."""
    open_run = store.open_run(workflow_name(str(ref), proj), tenant=tenant)
    return open_run is not None and bool(open_run.config["input"].get("records"))


def _open_run_prefixes(store: Store, ref: str | Path, proj: Project, tenant: str) -> dict[str, str]:
    """action -> the ``context_prefix`` template of the tenant's open run of the workflow,
    for each action that keeps its rendered text: continuing the run sends that text, so
    its files need not be there any more (only a new run reads them)."""
    from agac.engine.graph import run_graph
    from agac.engine.prefixes import context_texts

    open_run = store.open_run(workflow_name(str(ref), proj), tenant=tenant)
    if open_run is None:
        return {}
    return {
        name: template
        for name, (template, text) in context_texts(run_graph(open_run).workflow).items()
        if template is not None and text is not None
    }


def _each(hooks: list[Callable[[Any, Any], None]]) -> Callable[[Any, Any], None]:
    def start(progress: Any, control: Any) -> None:
        for hook in hooks:
            hook(progress, control)

    return start


def retry(
    ref: WorkflowRef,
    project: ProjectRef = None,
    *,
    action: str | None = None,
    record: str | None = None,
    dry_run: bool = False,
    abandon_in_flight: bool = False,
    tenant: str | None = None,
    principal: Principal | None = None,
    store: Store | None = None,
    **options: Any,
) -> Any:
    """``agac retry`` (R2): re-ask the failed units of the tenant's latest final run of the
    workflow, over its input snapshot (records given in memory included: they need not be
    given again).

    ``abandon_in_flight`` (B10): retry even though a batch of the workflow is still out;
    its waiting records fail ``batch_abandoned`` first.
    """
    from agac.engine.lifecycle.options import RunOptions
    from agac.engine.lifecycle.retry import start_retry

    proj = project_of(project)
    acting = scope_of(proj, tenant, principal).acting()
    path = workflow_file(ref, proj)
    with using(proj, store) as (_, st):
        # A retry runs with the per-run settings (--run-mode, ...) of the run it retries.
        last = st.latest_run(workflow_name(str(path), proj), tenant=acting, final=True)
        overrides = dict(last.settings.overrides) if last is not None else {}
        from_records = last is not None and bool(last.config["input"].get("records"))
        workflow = load_workflow(path, proj, records=from_records, **overrides)
        run_options = RunOptions(tenant=acting, overrides=overrides, **options)
        return start_retry(
            proj,
            st,
            workflow,
            run_options,
            action,
            record,
            dry_run,
            abandon_in_flight=abandon_in_flight,
        )


def cancel(
    ref: str,
    project: ProjectRef = None,
    *,
    tenant: str | None = None,
    principal: Principal | None = None,
    store: Store | None = None,
) -> Any:
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
            raise NotFound(
                f"{ref!r} is neither a run id nor a workflow with an open run in "
                f"{scope.label}; `agac runs list` shows the runs"
            )
        return cancel_run(proj, st, run_row)
